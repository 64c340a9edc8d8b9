"""Outcomes and the ledger (SPEC §11), stored apart from the decision log: pruning the log
never changes a budget. Each ledger row holds running totals, so a decision reads one row
and a hold is one conditional UPDATE of it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Float, Index, Integer, String, Text, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from app.log.records import iso
from app.store.base import Base, Json, UTCDateTime

HELD = text("state = 'held'")


class PlanLedger(Base):
    """One plan's spend (reported costs, lapsed holds charged) and open holds."""

    __tablename__ = "ledger_plans"

    plan_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    project: Mapped[str | None] = mapped_column(String(200))
    spent: Mapped[float] = mapped_column(Float, default=0.0)
    held: Mapped[float] = mapped_column(Float, default=0.0)


class ProjectLedger(Base):
    """The same totals over a project's plans ("" for plans in no project)."""

    __tablename__ = "ledger_projects"

    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    spent: Mapped[float] = mapped_column(Float, default=0.0)
    held: Mapped[float] = mapped_column(Float, default=0.0)


class StepLedger(Base):
    """Failed attempts of one step of a plan: what check 8 counts."""

    __tablename__ = "ledger_steps"

    plan_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    step_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)


class Hold(Base):
    """An allowed decision's `estimated_cost`, counted until its outcome settles it or it
    lapses (then it is charged as spent: state `charged`)."""

    __tablename__ = "ledger_holds"

    decision_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    plan_id: Mapped[str] = mapped_column(String(200))
    project: Mapped[str | None] = mapped_column(String(200))
    amount: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16))  # held | charged | settled
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_ledger_holds_held_expires_at", "expires_at",
              postgresql_where=HELD, sqlite_where=HELD),
    )


class Outcome(Base):
    """What the agent reported about one allowed decision; its history is the record of
    kind `outcome` in the hash chain."""

    __tablename__ = "outcomes"

    decision_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    project: Mapped[str | None] = mapped_column(String(200))
    plan_id: Mapped[str | None] = mapped_column(String(200))
    step_id: Mapped[str | None] = mapped_column(String(200))
    tool: Mapped[str | None] = mapped_column(String(200))
    key_id: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32))
    cost: Mapped[float] = mapped_column(Float)
    verified: Mapped[bool | None] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text)
    args_sha256: Mapped[str | None] = mapped_column(String(64))
    artifacts: Mapped[list[dict[str, Any]] | None] = mapped_column(Json)
    error_class: Mapped[str | None] = mapped_column(String(64))
    unverified: Mapped[bool] = mapped_column(Boolean)
    args_mismatch: Mapped[bool] = mapped_column(Boolean)
    reported_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The RFC 8785 digest of the report as received: the same body again is answered 200,
    # a different one 409.
    body_sha256: Mapped[str] = mapped_column(String(64))

    __table_args__ = (
        Index("ix_outcomes_plan_id", "plan_id"),
    )


# How every reader shows an outcome report, and the join `GET /v1/decisions/stats` groups
# authorize decisions by: they live with the table so the decision log's readers
# (app/decisions) need the ledger's tables, never its service.
def outcome_out(row: Outcome) -> dict[str, Any]:
    return {"status": row.status, "cost": row.cost, "verified": row.verified,
            "error": row.error, "args_sha256": row.args_sha256, "artifacts": row.artifacts,
            "error_class": row.error_class, "unverified": row.unverified,
            "args_mismatch": row.args_mismatch, "reported_at": iso(row.reported_at)}


async def outcome_of(session: AsyncSession, decision_id: str) -> dict[str, Any] | None:
    """`GET /v1/decisions/{id}`'s "outcome" (None until reported)."""
    row = await session.get(Outcome, decision_id)
    return outcome_out(row) if row is not None else None


# Columns `GET /v1/decisions/stats?group_by=` may group authorize decisions by (joined on
# decision_id: a decision without a report groups under null).
OUTCOME_GROUPS = {"outcome": Outcome.status, "unverified": Outcome.unverified,
                  "args_mismatch": Outcome.args_mismatch}
OUTCOME_JOIN = (Outcome, Outcome.decision_id)
