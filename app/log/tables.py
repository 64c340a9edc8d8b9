"""Decision log tables: one hash-chained log for decisions and configuration changes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Float, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, UTCDateTime

# Every kind but the decisions nearly every record is: what the kind index holds.
RARE_KINDS = text("kind <> 'authorize'")


class LogRecord(Base):
    """A decision (authorize, screen, plan, resolve) or a configuration change.

    `seq` is the chain order, assigned under the chain-head lock, so it is total across
    processes and replicas. `detail` is the canonical JSON text exactly as it was hashed.
    """

    __tablename__ = "decision_log"

    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                     primary_key=True, autoincrement=False)
    decision_id: Mapped[str] = mapped_column(String(36), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    project: Mapped[str | None] = mapped_column(String(200))
    plan_id: Mapped[str | None] = mapped_column(String(200))
    action_id: Mapped[str | None] = mapped_column(String(200))
    tool: Mapped[str | None] = mapped_column(String(200))
    allowed: Mapped[bool | None] = mapped_column(Boolean)
    code: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(String(64))
    check: Mapped[str | None] = mapped_column(String(32))
    provenance: Mapped[str | None] = mapped_column(String(16))
    profile_name: Mapped[str | None] = mapped_column(String(64))
    profile_version: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    request_id: Mapped[str | None] = mapped_column(String(200))
    key_id: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str] = mapped_column(Text)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))

    # Dashboards filter by one of these and page newest-first by seq. Each index costs every
    # logged decision its insert, so the ones most records never need leave them out
    # (migrations 0005, 0006): only denies have a code; only the rare kinds are in the kind
    # index (a query for one names RARE_KINDS too, which SQLite's planner needs to use it);
    # on Postgres created_at, which grows with seq, is a BRIN index (each filled range of
    # pages summarised by the log writer every few seconds; until then it is scanned).
    __table_args__ = (
        Index("ix_decision_log_created_at", "created_at", postgresql_using="brin",
              postgresql_with={"autosummarize": "off"}),  # the writer does it (0007)
        Index("ix_decision_log_project_seq", "project", "seq"),
        Index("ix_decision_log_plan_id_seq", "plan_id", "seq"),
        Index("ix_decision_log_action_id_seq", "action_id", "seq"),
        Index("ix_decision_log_tool_seq", "tool", "seq"),
        Index("ix_decision_log_code_seq", "code", "seq",
              postgresql_where=text("code IS NOT NULL"), sqlite_where=text("code IS NOT NULL")),
        Index("ix_decision_log_kind_seq", "kind", "seq",
              postgresql_where=RARE_KINDS, sqlite_where=RARE_KINDS),
    )


class ChainHead(Base):
    """The single row every writer locks to extend the chain: last seq and its hash.

    `pruned_seq`/`pruned_hash` anchor the chain after `toolgate audit prune`: the oldest
    remaining record must follow them.
    """

    __tablename__ = "chain_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    hash: Mapped[str] = mapped_column(String(64))
    pruned_seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    pruned_hash: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Rollup(Base):
    """Counts of the decisions of one hour (those with a verdict: `allowed` is not null), by
    kind, project, tool, verdict, code and error: what `/v1/decisions/stats` reads for the
    hours that are over instead of the log (app/decisions/rollups.py). Null project, tool,
    code and error are stored as "" (a key column is never null)."""

    __tablename__ = "decision_rollup"

    hour: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    tool: Mapped[str] = mapped_column(String(200), primary_key=True)
    allowed: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    code: Mapped[str] = mapped_column(String(64), primary_key=True)
    error: Mapped[str] = mapped_column(String(64), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))


class RolledHour(Base):
    """An hour whose counts `decision_rollup` holds (an hour without decisions has none)."""

    __tablename__ = "decision_rolled_hour"

    hour: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)


class LogCheckpoint(Base):
    """A signed checkpoint of the chain's head (SPEC §16): `seq` and `head_hash` are the
    head it signs, `record_seq` the chain record of kind `checkpoint` that holds it (the
    next one), `note` the signed note. Kept past a prune, which deletes the records."""

    __tablename__ = "log_checkpoints"

    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                     primary_key=True, autoincrement=False)
    head_hash: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str] = mapped_column(String(200))
    time: Mapped[datetime] = mapped_column(UTCDateTime)
    verifier_key: Mapped[str] = mapped_column(String(400))
    record_seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    note: Mapped[str] = mapped_column(Text)
