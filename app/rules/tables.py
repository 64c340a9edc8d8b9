"""The rules table (SPEC §18): one row per rule id, its body as the core normalised it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime


class Rule(Base):
    """A call rule. A deleted rule keeps its row (`deleted_at` set) so that a rule created
    again under the same id continues its versions: a record naming (id, version) always
    means one body, which the audit log holds."""

    __tablename__ = "rules"

    rule_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    # None: a global rule; a name: that project's calls only.
    project: Mapped[str | None] = mapped_column(String(200))
    # The normalised body (app/policy/rules compile_rule): tools, when, effect, capability,
    # message, mode, project.
    body: Mapped[dict] = mapped_column(Json)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_rules_project", "project"),)
