"""Signed checkpoints of the chain's head (SPEC §16), as pure functions shared by the
writer (which signs them), the routes, `toolgate audit verify --checkpoint` and the
witness. No SQLAlchemy: the writer process imports this.

A checkpoint signs `(origin, seq, head_hash, time)`: the chain's head when it was taken.
Its note's text is four lines,

    <origin>
    <seq>
    <head_hash>
    <time>

signed in the C2SP signed-note format (app/log/note.py) by the key named `origin`.
It is stored as the chain's next record (kind `checkpoint`, its detail the four fields,
the note and the verifier key), and in `log_checkpoints`, which a prune keeps."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.log.chain import Verifier as ChainVerifier
from app.log.note import NoteError, Signer, Verifier, open_note, sign
from app.log.records import new_record, parse_iso

KIND = "checkpoint"
_HASH = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    seq: int
    head_hash: str
    time: str  # RFC 3339, as records.iso writes it
    note: str  # the signed note

    def describe(self) -> str:
        return f"seq {self.seq} head_hash {self.head_hash} at {self.time}"


def text(origin: str, seq: int, head_hash: str, time: str) -> str:
    return f"{origin}\n{seq}\n{head_hash}\n{time}\n"


def load_signer(path: str) -> Signer:
    """The signing key file (`toolgate keys signing-key new`): OSError or NoteError."""
    with open(path, encoding="utf-8") as handle:
        return Signer.parse(handle.read())


def open_checkpoint(note: str | bytes, verifiers: list[Verifier]) -> Checkpoint:
    """A checkpoint whose signature by one of `verifiers` holds; NoteError otherwise (a
    bad signature, another key, a text that is not a checkpoint's)."""
    opened = open_note(note, verifiers)
    lines = opened.text[:-1].split("\n")
    if len(lines) != 4 or not lines[1].isdigit() or not _HASH.match(lines[2]):
        raise NoteError("not a toolgate checkpoint (origin, seq, head_hash, time)")
    origin, seq, head_hash, time = lines
    if origin not in {s.name for s in opened.signatures}:
        raise NoteError(f"the checkpoint's origin {origin!r} did not sign it")
    try:
        parse_iso(time)
    except ValueError:
        raise NoteError(f"the checkpoint's time is not RFC 3339: {time!r}") from None
    return Checkpoint(origin, int(seq), head_hash, time,
                      note if isinstance(note, str) else note.decode())


def make(signer: Signer, seq: int, head_hash: str, now: str
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checkpoint of head (seq, head_hash) at `now`: its chain record (to be chained
    as seq + 1) and its log_checkpoints row (record_seq filled in by the store)."""
    from uuid_utils import uuid7

    note = sign(text(signer.name, seq, head_hash, now), signer)
    key = signer.verifier().key()
    record = new_record(KIND, str(uuid7()), created_at=now, detail={
        "origin": signer.name, "seq": seq, "head_hash": head_hash, "time": now,
        "note": note, "verifier_key": key})
    row = {"seq": seq, "head_hash": head_hash, "origin": signer.name, "time": now,
           "verifier_key": key, "note": note}
    return record, row


class Forged(RuntimeError):
    """The stored log contradicts its last signed checkpoint (a rewrite with recomputed
    hashes): no checkpoint is signed over it."""


# The latest checkpoint with what the log holds at its seq, in one statement either database
# reads: (record_seq, time, seq, head_hash, the record's hash there, pruned_seq, pruned_hash).
LAST_HELD = ("SELECT c.record_seq, c.time, c.seq, c.head_hash, "
             "(SELECT hash FROM decision_log WHERE seq = c.seq), h.pruned_seq, h.pruned_hash "
             "FROM log_checkpoints c, chain_head h WHERE h.id = 1 ORDER BY c.seq DESC LIMIT 1")


def contradiction(seq: int, head_hash: str, found: str | None, pruned_seq: int,
                  pruned_hash: str) -> str | None:
    """Why the stored log no longer holds the signed head (seq, head_hash), or None: the
    record at seq has another hash (`found`; None when the log holds none there), or, once
    a prune cut at or past seq, its anchor does."""
    if found is None:
        if pruned_seq >= seq:
            return None if pruned_seq > seq or pruned_hash == head_hash \
                else "the prune anchor at its seq has another hash"
        return f"the log holds no record at seq {seq}"
    return None if found == head_hash else \
        f"the record at seq {seq} no longer has the signed head_hash"


def due(*, head_seq: int, last_record_seq: int | None, since_last: float | None,
        interval: float) -> bool:
    """Whether a writer holding the chain head takes a checkpoint now: the log grew since
    the last checkpoint's own record, and that one is (nearly) an interval old. Every
    writer asks this under the head's lock, so writers sharing a database take one
    checkpoint an interval between them, one sequence. (A tenth of the interval's slack:
    a writer whose timer fires just before the interval is up does not wait another.)"""
    if head_seq == 0 or (last_record_seq is not None and head_seq <= last_record_seq):
        return False
    return since_last is None or since_last >= interval * 0.9


class Against:
    """Records of an export fed in seq order, checked against checkpoints: the export's
    chain must verify (chain.Verifier, which the caller feeds too), and at each
    checkpoint's seq its record's hash must be the checkpoint's head_hash. An export that
    starts just after a checkpoint (a prune cut there) is anchored by its first record's
    prev_hash instead."""

    def __init__(self, checkpoints: Iterable[Checkpoint]) -> None:
        self.want = {c.seq: c for c in checkpoints}
        self.reached: set[int] = set()
        self.problem: str | None = None
        self._first = True

    def feed(self, record: dict[str, Any]) -> None:
        seq = record.get("seq")
        if self._first:
            self._first = False
            before = self.want.get(seq - 1) if isinstance(seq, int) else None
            if before is not None:
                self._at(before, record.get("prev_hash"), "the first record's prev_hash")
        point = self.want.get(seq)  # type: ignore[arg-type]
        if point is not None:
            self._at(point, record.get("hash"), f"the record at seq {seq} has hash")

    def _at(self, point: Checkpoint, found: Any, what: str) -> None:
        self.reached.add(point.seq)
        if found != point.head_hash and self.problem is None:
            self.problem = (f"{what} {found}, not the checkpoint's head_hash "
                            f"{point.head_hash} (signed {point.time}): history was rewritten")

    def result(self) -> str | None:
        """Why the export does not match the checkpoints, or None."""
        if self.problem is not None:
            return self.problem
        missing = sorted(set(self.want) - self.reached)
        if missing:
            return (f"the export does not reach the checkpoint at seq {missing[0]}: it holds "
                    "no record there")
        return None


def verify_between(records: Iterable[dict[str, Any]], stored: Checkpoint | None,
                   new: list[Checkpoint]) -> str | None:
    """Whether the records (an export after `stored`'s seq, up to the last of `new`) show
    that every checkpoint of `new` extends `stored`: the chain verifies from stored's head
    (from the log's start when there is none), it holds each new checkpoint's head at its
    seq, and it ends at the newest one. The reason it does not, or None."""
    if stored is not None:
        for point in new:
            if point.seq == stored.seq and point.head_hash != stored.head_hash:
                return f"seq {point.seq} has two hashes"
            if point.seq < stored.seq:
                return f"seq went back from {stored.seq} to {point.seq}"
        new = [point for point in new if point.seq > stored.seq]
    if not new:
        return None
    chain = (ChainVerifier((stored.seq, stored.head_hash), anchor_kind=KIND)
             if stored is not None else ChainVerifier())
    against = Against(new)
    last = max(c.seq for c in new)
    for record in records:
        if isinstance(record.get("seq"), int) and record["seq"] > last:
            break
        against.feed(record)
        if not chain.feed(record):
            break
    result = chain.result()
    if not result.ok:
        bad = result.first_bad or {}
        return f"the export between them does not verify: seq {bad.get('seq')}: " \
               f"{bad.get('reason')}"
    return against.result()
