"""Registry tables (SPEC §5, seed 003): tools, skills, per-project settings (SPEC §9) and the
registry version that lets every replica notice a change."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime


class RegistryTool(Base):
    """A tool's capability and safety category: the source of truth for its decisions."""

    __tablename__ = "tools"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    writes: Mapped[bool] = mapped_column(Boolean)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    checkpointable: Mapped[bool] = mapped_column(Boolean)
    unsafe: Mapped[bool] = mapped_column(Boolean)
    safety_category: Mapped[str] = mapped_column(String(16))
    skill_category: Mapped[str | None] = mapped_column(String(200))
    path_args: Mapped[list] = mapped_column(Json)
    # "required": check 6 applies to this tool in every plan (SPEC §17); "profile": as
    # the plan's profile says.
    human_approval: Mapped[str] = mapped_column(String(16), default="profile",
                                                server_default="profile")
    # SPEC §18: the argument holding a shell tool's command line ("shell": {"arg": ...}),
    # and the arguments whose values are URLs; None for rows written before them.
    shell_arg: Mapped[str | None] = mapped_column(String(200))
    url_args: Mapped[list | None] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Skill(Base):
    """A skill's pre-model phrase list, stored normalised (SPEC §5), in screening order
    (rows written before that rule are normalised when screening, app/policy/screening.py)."""

    __tablename__ = "skills"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    category: Mapped[str | None] = mapped_column(String(200))
    unsafe_phrases: Mapped[list] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ProjectSettings(Base):
    """A project's settings (SPEC §9); no row means every setting at its default.

    The table keeps the name it had when it held only `deny_unregistered_tools`: replicas of
    the previous release keep using it during a rolling upgrade (migration 0008), and the
    server defaults fill the columns they do not know of."""

    __tablename__ = "project_registry_settings"

    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    deny_unregistered_tools: Mapped[bool] = mapped_column(Boolean, default=False)
    # "client_flag" | "server" (SPEC §10): stored and served; approvals are not built yet.
    approval_mode: Mapped[str] = mapped_column(String(16), default="client_flag",
                                               server_default="client_flag")
    # A profile's name (SPEC §12): decisions are evaluated under it too (docs/replay.md).
    shadow_profile: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RegistryState(Base):
    """One row (id=1). `version` is bumped in the same transaction as every registry change
    (tools and project registry settings), so a replica's cache can tell it is stale with one
    cheap read."""

    __tablename__ = "registry_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, default=0)
