"""What both of the writer's stores share: the clock, and the table's columns as their
INSERT names them."""

from __future__ import annotations

from datetime import UTC, datetime

from app.log.chain import COLUMNS


def _now() -> datetime:
    return datetime.now(UTC)


_QUOTED = ", ".join(f'"{c}"' for c in COLUMNS)  # "check" is an SQL keyword
