"""Who asked, and the id a decision gets: plain values every feature records."""

from __future__ import annotations

import re
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


# A client's X-Request-ID is kept only when it is 1 to 128 of [A-Za-z0-9._:-] (issue 30):
# anything else could write `x status=200 decision_id=forged` into a text log line.
VALID_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def client_request_id(value: bytes | str | None) -> str | None:
    """The client's X-Request-ID when it is valid, else None (the record then has none)."""
    if isinstance(value, str):
        value = value.encode("latin-1", "replace")
    return value.decode("ascii") if value and VALID_REQUEST_ID.fullmatch(value) else None
