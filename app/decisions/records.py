"""Building log records: the fields every record has, and masking of secrets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

MASK = "[masked]"

RECORD_FIELDS = (
    "decision_id", "kind", "created_at", "project", "plan_id", "action_id", "tool",
    "allowed", "code", "error", "check", "provenance", "profile_name", "profile_version",
    "latency_ms", "request_id", "key_id", "detail",
)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def mask(values: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """Replace the values of listed keys (case-insensitive) by a marker; never stored."""
    if not keys or not values:
        return values
    return {k: (MASK if k.lower() in keys else v) for k, v in values.items()}


def new_record(kind: str, decision_id: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
    record.update(kind=kind, decision_id=decision_id, created_at=iso(datetime.now(UTC)),
                  detail={})
    unknown = set(fields) - set(RECORD_FIELDS)
    if unknown:
        raise TypeError(f"unknown record fields: {sorted(unknown)}")
    record.update(fields)
    return record
