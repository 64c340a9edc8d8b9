"""The hash chain, as pure functions shared by the service and offline verification.

Each record carries `prev_hash` (the hash of the record before it in `seq` order) and
`hash` = SHA-256 over the canonical JSON of every other field of the record. Canonical JSON:
keys sorted, no whitespace, UTF-8 (orjson with OPT_SORT_KEYS). The first record ever
written has prev_hash GENESIS.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from app.log.records import RECORD_FIELDS, iso, parse_iso

GENESIS = "0" * 64


# Canonical JSON takes JSON's own types: OPT_SORT_KEYS sorts dict keys, not a dataclass's
# fields, so a dataclass in a detail would be hashed in another order than verification,
# which reads the stored text back as dicts, recomputes. orjson refuses one instead.
_DETAIL = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def canonical(record: dict[str, Any]) -> bytes:
    """The bytes a record's hash covers. Its detail is written on its own and embedded, as
    chain_values does: the same bytes as writing the record whole, and a detail as deep as
    the log could write (254 levels, orjson's limit) is hashed again here, where the whole
    record would be one level too deep. A detail read from a row is its stored text already
    (an orjson Fragment: queries.stored_detail)."""
    body = {k: v for k, v in record.items() if k != "hash"}
    detail = body.get("detail")
    if isinstance(detail, dict | list):
        body["detail"] = orjson.Fragment(orjson.dumps(detail, option=orjson.OPT_SORT_KEYS))
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def record_hash(record: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(record)).hexdigest()


# The decision_log columns in table order (tests/store checks this against the table): how
# the writers bind a row, positionally.
COLUMNS = ("seq", *RECORD_FIELDS, "prev_hash", "hash")
# The columns as an INSERT names them ("check" is an SQL keyword).
QUOTED_COLUMNS = ", ".join(f'"{c}"' for c in COLUMNS)
_values = operator.itemgetter(*COLUMNS)


def chain_values(records: list[dict[str, Any]], seq: int, prev: str,
                 time: Callable[[str], Any] = parse_iso
                 ) -> tuple[list[tuple[Any, ...]], int, str]:
    """Give each record its seq, prev_hash and hash; return the rows to insert, as tuples
    in COLUMNS order, and the new head. The hash covers the record as exported (ISO time,
    nested detail); the row holds `time(ISO text)` and `detail` as the canonical JSON text
    that was hashed (serialised once: the hash embeds it as an orjson Fragment). A
    record's detail may come as that text already (canonical_details: how a worker sends it
    to a writer process); a str detail is trusted to be that text, so nothing else may
    pass one. The records keep their ISO time and detail as they came, so a batch can be
    chained again."""
    rows = []
    sort = orjson.OPT_SORT_KEYS
    for record in records:
        seq += 1
        record["seq"] = seq
        record["prev_hash"] = prev
        record.pop("hash", None)  # chained before, onto a head that had moved meanwhile
        nested, moment = record["detail"], record["created_at"]
        if len(moment) != 27 or moment[-1] != "Z":  # not as iso() writes it, as exported
            moment = record["created_at"] = _exported_time(moment)
        try:
            detail = (nested if nested.__class__ is str  # canonical already: see below
                      else orjson.dumps(nested, option=_DETAIL).decode())
            record["detail"] = orjson.Fragment(detail)
            hashed = orjson.dumps(record, option=sort)
        except orjson.JSONEncodeError as exc:
            raise Unhashable(str(exc)) from None
        finally:
            record["detail"] = nested
        record["hash"] = prev = hashlib.sha256(hashed).hexdigest()
        if len(record) != len(COLUMNS):  # a field the table lacks, or one missing
            raise ValueError(f"not the log's record fields: unknown "
                             f"{sorted(set(record) - _COLUMN_SET)}, missing "
                             f"{sorted(_COLUMN_SET - set(record))}")
        try:
            record["detail"], record["created_at"] = detail, time(moment)
            rows.append(_values(record))
        finally:
            record["detail"], record["created_at"] = nested, moment
    return rows, seq, prev


_COLUMN_SET = frozenset(COLUMNS)


def canonical_details(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each record's detail replaced, in place, by its canonical JSON text (what the row
    stores and the hash embeds): how a worker hands records to a writer process. The
    writer then parses one string per detail instead of its ~40 objects, and does not
    serialise it again: 7 µs less per record for the writer, 2 µs more for the worker
    (docs/performance.md). Raises orjson.JSONEncodeError for a detail it cannot write."""
    for record in records:
        detail = record["detail"]
        if detail.__class__ is not str:
            record["detail"] = orjson.dumps(detail, option=_DETAIL).decode()
    return records


class Unreadable(str):
    """A stored detail that is not JSON orjson reads (malformed, or nested past 1,024
    levels): toolgate never stores one. Read routes give it as this text, a JSON string;
    verification reports its record."""


class Unhashable(ValueError):
    """A record orjson cannot serialise (an integer past 64 bits): it cannot be chained.
    Its own exception, not orjson's JSONEncodeError, which is a TypeError like many others:
    the writer answers only this one as "the record cannot be written"."""


def _exported_time(text: str) -> str:
    """A record's created_at as an export shows it (iso(), "...ffffffZ"), so that what is
    hashed is what verification recomputes. Text without a UTC offset is refused: its
    instant is unknown."""
    moment = parse_iso(text)
    if moment.utcoffset() is None:
        raise ValueError(f"created_at {text!r} has no UTC offset")
    return iso(moment)


def chain_rows(records: list[dict[str, Any]], seq: int, prev: str,
               time: Callable[[str], Any] = parse_iso
               ) -> tuple[list[dict[str, Any]], int, str]:
    """chain_values with each row a dict of column -> value (an SQLAlchemy insert's)."""
    rows, seq, prev = chain_values(records, seq, prev, time)
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows], seq, prev


# Where a verified run of records starts (VerifyResult.anchor).
GENESIS_ANCHOR = "genesis"  # the chain's first record (seq 1, prev_hash GENESIS)
PRUNE_ANCHOR = "prune"  # the record just after a prune's anchor (chain_head, or a prune
#                         record in the same export naming it)
RECORD_ANCHOR = "previous_record"  # online, a time range: the stored record before it
NO_ANCHOR = "none"  # a partial check: the first record's seq and prev_hash were trusted


@dataclass
class VerifyResult:
    ok: bool
    checked: int
    first_bad: dict[str, Any] | None
    head: str | None
    anchor: str | None = None
    first: dict[str, Any] | None = None  # {"seq", "decision_id"} of the first record proved
    last: dict[str, Any] | None = None  # ... and of the last

    def as_dict(self) -> dict[str, Any]:
        """`range` says what was proved: the first and last record checked and how the
        first one is anchored (None when nothing was checked)."""
        proved = None if self.first is None else {
            "first_seq": self.first["seq"], "first_decision_id": self.first["decision_id"],
            "last_seq": self.last["seq"] if self.last else None,
            "last_decision_id": self.last["decision_id"] if self.last else None,
            "count": self.checked, "anchor": self.anchor}
        return {"ok": self.ok, "checked": self.checked, "first_bad": self.first_bad,
                "head": self.head, "range": proved}


def _prune_anchor(record: dict[str, Any]) -> tuple[int, str] | None:
    """The (seq, hash) a prune record names as the chain's new anchor (app/decisions/prune.py
    records it in the log, after the records it removed), else None."""
    detail = record.get("detail")
    if record.get("kind") != "config" or not isinstance(detail, dict) \
            or detail.get("resource") != "audit_log" or detail.get("operation") != "prune":
        return None
    after = detail.get("after")
    if not isinstance(after, dict):
        return None
    seq, digest = after.get("anchor_seq"), after.get("anchor_hash")
    return (seq, digest) if isinstance(seq, int) and isinstance(digest, str) else None


class Verifier:
    """Feed records in seq order; the first altered, removed or reordered one is reported.

    `anchor` is (seq, hash) of the record just before the first one fed: the prune anchor,
    the record before a time range, or (0, GENESIS) for a whole log; `anchor_kind` says
    which (reported in the result's range). Without an anchor (an export checked offline)
    the first record must be the chain's first (seq 1 after GENESIS) or follow an anchor
    that a prune record among the records fed names: a file with its oldest records cut
    off is refused, and so is a file with no records. `partial=True` accepts any start (an
    export of a time range), trusting the first record's seq and prev_hash, and says so
    (anchor "none").
    """

    def __init__(self, anchor: tuple[int, str] | None = None, *,
                 anchor_kind: str | None = None, partial: bool = False) -> None:
        self.checked = 0
        self.first_bad: dict[str, Any] | None = None
        self.head: str | None = anchor[1] if anchor else None
        self._seq = anchor[0] + 1 if anchor else None
        self._prev = anchor[1] if anchor else None
        self._anchored = anchor is not None
        self.anchor_kind = anchor_kind if anchor is not None else None
        self.partial = partial
        self.first: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self._claimed: tuple[int, str] | None = None  # an unanchored file's start
        self._prunes: set[tuple[int, str]] = set()

    def feed(self, record: dict[str, Any]) -> bool:
        """Returns False once a bad record was found (stop feeding)."""
        if self.first_bad is not None:
            return False
        seq = record.get("seq")
        problem = None
        if (content := _content_problem(record)) is not None:
            problem = content
        elif self._seq is not None and seq != self._seq:
            gap = isinstance(seq, int) and seq > self._seq
            problem = (f"expected seq {self._seq}, found {seq} "
                       f"({'records removed' if gap else 'records reordered'})")
        elif self._prev is not None and record.get("prev_hash") != self._prev:
            problem = "prev_hash is not the previous record's hash (removed or reordered)"
        elif not isinstance(seq, int):
            problem = f"seq is not an integer: {seq!r}"
        if problem:
            self.first_bad = {"seq": seq, "decision_id": record.get("decision_id"),
                              "reason": problem}
            return False
        mark = {"seq": seq, "decision_id": record.get("decision_id")}
        if self.first is None:
            self.first = mark
            if not self._anchored:
                self._claimed = (seq - 1, record.get("prev_hash"))  # type: ignore[assignment]
        self.last = mark
        if not self._anchored and (named := _prune_anchor(record)) is not None:
            self._prunes.add(named)
        self.checked += 1
        self.head = self._prev = record["hash"]
        self._seq = seq + 1
        return True

    def _start(self) -> tuple[str | None, str | None]:
        """How the first record is anchored, or why it is not (when it must be)."""
        if self._anchored:
            return self.anchor_kind, None
        if self._claimed is None:
            return None, "no records: nothing was verified"
        if self._claimed == (0, GENESIS):
            return GENESIS_ANCHOR, None
        if self._claimed in self._prunes:
            return PRUNE_ANCHOR, None
        if self.partial:
            return NO_ANCHOR, None
        return None, (f"the records start at seq {self._claimed[0] + 1}, neither the chain's "
                      "first record nor a prune anchor named in them: older records may have "
                      "been removed (check a part of the log with --partial)")

    def result(self) -> VerifyResult:
        anchor, refused = self._start()
        result = VerifyResult(self.first_bad is None, self.checked, self.first_bad, self.head,
                              anchor, self.first, self.last)
        if result.ok and refused is not None:
            result.ok = False
            result.first_bad = {"seq": self.first["seq"] if self.first else None,
                                "decision_id": self.first["decision_id"] if self.first
                                else None, "reason": refused}
        return result


def _content_problem(record: dict[str, Any]) -> str | None:
    """Why a record's content is not what its hash says, or None."""
    if isinstance(record.get("detail"), Unreadable):
        return "its stored detail is not JSON (malformed, or nested past 1024 levels)"
    try:
        if record_hash(record) == record.get("hash"):
            return None
    except orjson.JSONEncodeError as exc:  # nested past what orjson (and the log) writes
        return f"the record cannot be hashed ({exc})"
    return "hash does not match the record's content (altered)"


def verify(records: Iterable[dict[str, Any]], *, anchor: tuple[int, str] | None = None,
           anchor_kind: str | None = None, partial: bool = False) -> VerifyResult:
    verifier = Verifier(anchor, anchor_kind=anchor_kind, partial=partial)
    for record in records:
        if not verifier.feed(record):
            break
    return verifier.result()
