"""The declarative Base, its naming convention and the column types every feature's
tables use. Tables are never sent as they are: each feature's schemas.py is the wire."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, MetaData
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase
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


def floats_for_huge_ints(value: Any) -> Any:
    """JSONB stores 1e20 as the integer 100000000000000000000; read it back as the float it
    was (orjson, which writes the log's canonical JSON, refuses integers past 64 bits)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT64:
        return float(value)
    if isinstance(value, dict):
        return {k: floats_for_huge_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [floats_for_huge_ints(v) for v in value]
    return value


class JsonValue(TypeDecorator[Any]):
    """JSON on SQLite, JSONB on PostgreSQL, read back with the numbers they were written as."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        return dialect.type_descriptor(JSONB() if dialect.name == "postgresql" else JSON())

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return floats_for_huge_ints(value) if dialect.name == "postgresql" else value


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
