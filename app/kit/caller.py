"""Who asked, and the id a decision gets: plain values every feature records."""

from __future__ import annotations

from dataclasses import dataclass

from uuid_utils import uuid7


def new_decision_id() -> str:
    """Time-ordered (UUIDv7), so decision ids sort the way decisions happened."""
    return str(uuid7())


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asked, for the log: the caller's X-Request-ID and key id."""

    request_id: str | None = None
    key_id: str | None = None
