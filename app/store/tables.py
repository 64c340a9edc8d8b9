"""The store's own table: which releases may serve the schema (app/store/migrate.py)."""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base


class SchemaMark(Base):
    """One row, written by every migration run (migrations/env.py): the oldest schema
    revision whose code may serve the schema as it is now. A release whose own head is
    older than the schema serves it only if it knows this revision (docs/deployment.md,
    "Upgrades")."""

    __tablename__ = "toolgate_schema"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    oldest_revision: Mapped[str] = mapped_column(String(32), nullable=False)
