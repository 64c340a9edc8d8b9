"""The plans table: a plan's resolved, locked safety profile."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime


class Plan(Base):
    """A plan and its locked profile snapshot; the snapshot columns never change."""

    __tablename__ = "plans"

    plan_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    action_id: Mapped[str] = mapped_column(ForeignKey("actions.action_id"), index=True)
    project: Mapped[str | None] = mapped_column(String(200), index=True)
    read_only: Mapped[bool] = mapped_column(Boolean)
    safety: Mapped[dict] = mapped_column(Json)
    provenance: Mapped[str] = mapped_column(String(16))
    profile_name: Mapped[str | None] = mapped_column(String(64))
    profile_version: Mapped[int | None] = mapped_column(Integer)
    is_default: Mapped[bool] = mapped_column(Boolean)
    # The normalised plan-use request, to tell an idempotent repeat from a conflict.
    request: Mapped[dict] = mapped_column(Json)
    state: Mapped[str] = mapped_column(String(32), default="created")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
