"""The writer's chaining (one serialisation of `detail`, embedded in the hash as a
Fragment) must hash exactly what verification recomputes from an exported record."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from app.decisions.chain import GENESIS, chain_rows, record_hash, verify
from app.decisions.records import RECORD_FIELDS, iso_from_ns, parse_iso
from app.decisions.writer import _sqlite_text, _sqlite_time

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
