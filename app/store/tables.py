"""Tables. The wire schema lives in app/api/schemas.py; these are never sent as they are."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, MetaData, String, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

_INT64 = 2**63 - 1


def _floats_for_huge_ints(value: Any) -> Any:
    """JSONB stores 1e20 as the integer 100000000000000000000; read it back as the float it
    was (orjson, which writes the log's canonical JSON, refuses integers past 64 bits)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT64:
        return float(value)
    if isinstance(value, dict):
        return {k: _floats_for_huge_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats_for_huge_ints(v) for v in value]
    return value


class JsonValue(TypeDecorator[Any]):
    """JSON on SQLite, JSONB on PostgreSQL, read back with the numbers they were written as."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        return dialect.type_descriptor(JSONB() if dialect.name == "postgresql" else JSON())

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return _floats_for_huge_ints(value) if dialect.name == "postgresql" else value


Json = JsonValue()


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both SQLite (which stores naive) and Postgres."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = metadata


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
