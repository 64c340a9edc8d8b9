"""Approvals (SPEC §10). One row per approval; its history is in the hash chain (records of
kind `approval`), the row is its current state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime

PENDING = text("state = 'pending'")
LIVE = text("state IN ('pending', 'granted')")


class Approval(Base):
    __tablename__ = "approvals"

    # uuid7: ordering by id is ordering by creation (the list is newest first).
    approval_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # pending | granted | rejected | cancelled | expired | used
    state: Mapped[str] = mapped_column(String(16))
    project: Mapped[str | None] = mapped_column(String(200))
    plan_id: Mapped[str] = mapped_column(String(200))
    action_id: Mapped[str | None] = mapped_column(String(200))
    tool: Mapped[str] = mapped_column(String(200))
    request: Mapped[dict[str, Any]] = mapped_column(Json)  # the bound fields, masked
    request_sha256: Mapped[str] = mapped_column(String(64))
    args_sha256: Mapped[str | None] = mapped_column(String(64))
    requested_by: Mapped[str | None] = mapped_column(String(64))  # key id
    # The principal behind the requesting key: no key of it may decide (self-approval).
    requested_principal: Mapped[str | None] = mapped_column(String(200))
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_by: Mapped[str | None] = mapped_column(String(64))
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    note: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    # Pending: when the request lapses; granted: when the grant does.
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    uses_left: Mapped[int] = mapped_column(Integer, default=0)
    decision_ids: Mapped[list[str]] = mapped_column(Json, default=list)

    __table_args__ = (
        # At most one pending approval per binding, whatever the concurrency or replica:
        # the second insert finds the first (ON CONFLICT DO NOTHING) and uses it.
        Index("uq_approvals_pending_binding", "plan_id", "request_sha256", unique=True,
              postgresql_where=PENDING, sqlite_where=PENDING),
        Index("ix_approvals_binding", "plan_id", "request_sha256", "state"),
        Index("ix_approvals_project_id", "project", "approval_id"),
        Index("ix_approvals_state_id", "state", "approval_id"),
        # The expiry sweep: live approvals by when they lapse.
        Index("ix_approvals_live_expires_at", "expires_at",
              postgresql_where=LIVE, sqlite_where=LIVE),
    )
