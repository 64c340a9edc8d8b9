"""Tables of profiles (and their versions), the global configuration, projects, actions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime


class Profile(Base):
    __tablename__ = "profiles"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    description: Mapped[str] = mapped_column(Text, default="")
    safety: Mapped[dict] = mapped_column(Json)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ProfileVersion(Base):
    """Every version of every profile, kept for plans' provenance and for audit."""

    __tablename__ = "profile_versions"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    description: Mapped[str] = mapped_column(Text, default="")
    safety: Mapped[dict] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class GlobalConfig(Base):
    __tablename__ = "global_config"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    automation_profile: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Project(Base):
    __tablename__ = "projects"

    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    automation_profile: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Action(Base):
    __tablename__ = "actions"

    action_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    project: Mapped[str | None] = mapped_column(String(200), index=True)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    automation_profile: Mapped[str | None] = mapped_column(String(64), index=True)
    safety_profile: Mapped[dict | None] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
