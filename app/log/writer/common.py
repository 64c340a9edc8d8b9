"""What both of the writer's stores share: the clock, and when a checkpoint is due."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.log.records import iso


def _now() -> datetime:
    return datetime.now(UTC)




_CHECKPOINT_COLUMNS = ("seq", "head_hash", "origin", "time", "verifier_key", "record_seq",
                       "note")


def checkpoint_due(signer: Any, interval: float, seq: int, head_hash: str, moment: datetime,
                   last: tuple[int, datetime] | None, held: Sequence[Any] | None = None
                   ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Under the head's lock: the checkpoint record and row for head (seq, head_hash), or
    None when none is due (`last`: the latest checkpoint's record seq and time). Raises
    Forged when the log no longer holds the last signed head (`held`: checkpoints.LAST_HELD's
    row): a checkpoint signed then would vouch for a rewritten history."""
    from app.log.checkpoints import Forged, contradiction, due, make

    if not due(head_seq=seq, last_record_seq=last[0] if last else None,
               since_last=(moment - last[1]).total_seconds() if last else None,
               interval=interval):
        return None
    problem = held and contradiction(*held[2:7])
    if problem:
        raise Forged(f"the log contradicts its checkpoint at seq {held[2]}: {problem}")
    record, row = make(signer, seq, head_hash, iso(moment))
    row["record_seq"] = seq + 1
    return record, row
