"""The writer's chaining (one serialisation of `detail`, embedded in the hash as a
Fragment) must hash exactly what verification recomputes from an exported record."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.log.chain import (
    COLUMNS,
    GENESIS,
    canonical_details,
    chain_rows,
    chain_values,
    record_hash,
    verify,
)
from app.log.records import PG_EPOCH, RECORD_FIELDS, iso_from_ns, parse_iso, pg_micros
from app.log.records import sqlite_text as _sqlite_text
from app.log.records import sqlite_time as _sqlite_time

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(details=st.lists(st.dictionaries(st.text(), JSON, max_size=5), min_size=1, max_size=4),
       tool=st.text())
def test_chained_rows_hash_what_verification_recomputes(details, tool):
    records = [{**dict.fromkeys(RECORD_FIELDS), "decision_id": f"d{i}", "kind": "authorize",
                "created_at": iso_from_ns(time.time_ns()), "tool": tool, "detail": detail}
               for i, detail in enumerate(details)]
    rows, seq, head = chain_rows(records, 0, GENESIS)
    assert seq == len(records) and head == records[-1]["hash"]
    for record in records:
        assert record["hash"] == record_hash(record)
    assert verify(records, anchor=(0, GENESIS)).ok
    # The rows hold what was hashed: the canonical detail text, the time as `time` made it.
    for row, record in zip(rows, records, strict=True):
        assert row["hash"] == record["hash"] and row["created_at"] == parse_iso(
            record["created_at"])
        assert verify([{**record, "detail": orjson.loads(row["detail"])}], partial=True).ok


@settings(max_examples=200, deadline=None)
@given(details=st.lists(st.dictionaries(st.text(), JSON, max_size=5), min_size=1, max_size=4))
def test_a_detail_sent_as_canonical_text_chains_as_the_nested_detail_does(details):
    """A worker sends a writer process each detail as its canonical text (one string to
    parse, nothing to serialise again): the rows and hashes are those of the nested
    details, and the records verify once their stored detail is read back."""
    nested = [{**dict.fromkeys(RECORD_FIELDS), "decision_id": f"d{i}", "kind": "authorize",
               "created_at": iso_from_ns(time.time_ns()), "detail": detail}
              for i, detail in enumerate(details)]
    sent = orjson.loads(orjson.dumps(canonical_details([dict(r) for r in nested])))
    assert all(isinstance(r["detail"], str) for r in sent)
    expected = chain_values(nested, 3, "b" * 64)
    assert chain_values(sent, 3, "b" * 64) == expected
    stored = [{**r, "detail": orjson.loads(r["detail"])} for r in sent]
    assert verify(stored, anchor=(3, "b" * 64)).ok


def _records(count: int) -> list[dict]:
    return [{**dict.fromkeys(RECORD_FIELDS), "decision_id": f"d{i}", "kind": "authorize",
             "created_at": iso_from_ns(time.time_ns()), "detail": {"n": i, "a": [1, 2]}}
            for i in range(count)]


def test_a_batch_chained_again_onto_another_head_verifies_there():
    """What a writer does when the head moved: the records, chained once, are chained
    again from the head it then finds; they kept their ISO time and nested detail."""
    records = _records(3)
    chain_values(records, 0, GENESIS, time=pg_micros)
    assert isinstance(records[0]["created_at"], str) and records[0]["detail"]["n"] == 0
    rows, seq, head = chain_values(records, 7, "a" * 64, time=pg_micros)
    assert seq == 10 and [row[0] for row in rows] == [8, 9, 10]
    assert verify(records, anchor=(7, "a" * 64)).ok and head == records[-1]["hash"]
    assert rows[0][COLUMNS.index("created_at")] == pg_micros(records[0]["created_at"])


def test_a_record_with_a_field_the_table_lacks_is_refused_not_hashed_into_the_chain():
    records = _records(2)
    records[1]["note"] = "not a column"
    with pytest.raises(ValueError, match=r"unknown \['note'\], missing \[\]"):
        chain_values(records, 0, GENESIS)
    del records[1]["note"]
    assert verify(records[:1], anchor=(0, GENESIS)).ok  # the first was chained as usual
    del records[1]["tool"]
    with pytest.raises(ValueError, match=r"unknown \[\], missing \['tool'\]"):
        chain_values(records[1:], 1, records[0]["hash"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 253402300799 * 10**9), min_size=1, max_size=5))
def test_pg_micros_is_the_microseconds_since_2000_of_the_iso_text(stamps):
    """Cached per second like iso_from_ns, so several in a row, and texts of other shapes."""
    for ns in [*stamps, stamps[0] + 1000, stamps[0]]:
        iso = iso_from_ns(ns)
        assert pg_micros(iso) == (parse_iso(iso) - PG_EPOCH) // timedelta(microseconds=1)
    for iso in ("2026-01-01T05:00:00.000001+05:00", "2026-01-01T00:00:00Z",
                "1999-12-31T23:59:59.999999Z"):
        assert pg_micros(iso) == (parse_iso(iso) - PG_EPOCH) // timedelta(microseconds=1)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, 253402300799 * 10**9), min_size=1, max_size=5))
def test_iso_from_ns_is_the_datetime_iso_text(stamps):
    """Cached per second, so several stamps in a row: each must match its own datetime."""
    for ns in [*stamps, stamps[0] + 1000, stamps[0]]:
        moment = datetime.fromtimestamp(ns // 10**9, UTC).replace(microsecond=ns % 10**9 // 1000)
        assert iso_from_ns(ns) == moment.isoformat(timespec="microseconds")[:-6] + "Z"


def test_sqlite_time_text_from_iso_matches_the_datetime_route():
    for iso in (iso_from_ns(time.time_ns()), "2026-01-01T00:00:00.000000Z",
                "2026-01-01T05:00:00.000001+05:00"):
        assert _sqlite_text(iso) == _sqlite_time(parse_iso(iso))


def test_a_time_in_another_form_is_hashed_as_an_export_shows_it():
    """created_at with an offset other than Z is chained as iso() writes it (what an export
    of the stored row shows); a time without an offset is refused: its instant is unknown."""
    records = _records(2)
    records[0]["created_at"] = "2026-01-01T05:00:00.000001+05:00"
    rows, _, _ = chain_values(records, 0, GENESIS, time=pg_micros)
    assert records[0]["created_at"] == "2026-01-01T00:00:00.000001Z"
    assert verify(records, anchor=(0, GENESIS)).ok
    assert rows[0][COLUMNS.index("created_at")] == pg_micros("2026-01-01T00:00:00.000001Z")
    naive = _records(1)
    naive[0]["created_at"] = "2026-01-01T00:00:00.000001"
    with pytest.raises(ValueError, match="no UTC offset"):
        chain_values(naive, 0, GENESIS)


def test_a_record_orjson_refuses_is_unhashable_and_left_as_it_was():
    from app.log.chain import Unhashable

    records = _records(1)
    records[0]["detail"] = {"n": 2**70}
    with pytest.raises(Unhashable):
        chain_values(records, 0, GENESIS)
    assert records[0]["detail"] == {"n": 2**70} and "hash" not in records[0]


def test_a_dataclass_in_a_detail_is_refused_not_hashed_in_its_field_order():
    """orjson sorts dict keys but not a dataclass's fields: hashed as it is, such a detail
    would fail verification, which reads the stored text back as dicts. Both ways a detail
    is serialised refuse it."""
    from dataclasses import dataclass

    from app.log.chain import Unhashable

    @dataclass
    class Late:
        z: int = 1
        a: int = 2

    records = _records(1)
    records[0]["detail"] = {"x": Late()}
    with pytest.raises(Unhashable):
        chain_values(records, 0, GENESIS)
    with pytest.raises(orjson.JSONEncodeError):
        canonical_details(records)
    assert isinstance(records[0]["detail"]["x"], Late)  # left as it was


def test_a_record_nested_past_what_the_log_writes_is_reported_not_raised():
    """An export line can hold a record the log never wrote (a row stored by something
    else, up to the 1,024 levels JSON readers take): offline verification reports it."""
    deep: object = 1
    for _ in range(300):
        deep = [deep]
    record = {**dict.fromkeys(RECORD_FIELDS), "seq": 1, "decision_id": "d", "kind": "authorize",
              "detail": {"x": deep}, "prev_hash": GENESIS, "hash": GENESIS}
    result = verify([record], anchor=(0, GENESIS))
    assert not result.ok and "cannot be hashed" in result.first_bad["reason"]
