"""No stored record, whatever its detail holds, makes a read route fail.

Before the free-form limits (docs/api.md) a decision could be recorded with a detail nested
up to 254 levels (orjson's limit when the log serialises it on its own); reading it back
inside a page, a record or a hash wrapped it deeper than orjson writes, so
GET /v1/decisions answered 500, /v1/audit/verify 500 and /v1/audit/export dropped the
connection, for good: the record cannot be removed without breaking the chain. Records are
appended here as the log appends them (chain intact), bypassing the API's limits.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from uuid_utils import uuid7

from app.log.chain import GENESIS, verify
from app.log.decision_log import append
from app.log.records import new_record


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _deep_detail(depth: int) -> dict[str, Any]:
    """A decision's detail nested `depth` levels in all (the detail itself is level 1), as
    an authorize request with a deep `context.metadata` left it."""
    return {"context": {"metadata": {"x": _nested(depth - 3)}}}


async def _store(client: Any, detail: Any) -> str:
    record = new_record("authorize", str(uuid7()), tool="t", allowed=True, detail=detail)
    async with client.app.state.sessions() as session, session.begin():
        await append(session, [record])
    return record["decision_id"]


async def _reads(client: Any) -> tuple[list[dict], list[dict], str, dict]:
    page = await client.get("/v1/decisions", params={"limit": 1000})
    assert page.status_code == 200, page.text
    export = await client.get("/v1/audit/export")
    assert export.status_code == 200
    csv = await client.get("/v1/audit/export", params={"format": "csv"})
    assert csv.status_code == 200
    checked = await client.get("/v1/audit/verify")
    assert checked.status_code == 200, checked.text
    lines = [orjson.loads(line) for line in export.text.splitlines()]
    return page.json()["items"], lines, csv.text, checked.json()


@pytest.mark.parametrize("depth", [250, 252, 254])
async def test_records_written_before_the_limit_read_export_and_verify(client, depth):
    """254 levels is the deepest detail the log ever wrote (orjson refuses more)."""
    orjson.dumps(_deep_detail(254))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(_deep_detail(255))
    await _store(client, {"n": 1})
    decision_id = await _store(client, _deep_detail(depth))
    await _store(client, {"n": 2})

    items, lines, csv, checked = await _reads(client)
    assert [i["detail"] for i in items] == [{"n": 2}, _deep_detail(depth), {"n": 1}]
    one = await client.get(f"/v1/decisions/{decision_id}")
    assert one.status_code == 200 and one.json()["detail"] == _deep_detail(depth)
    assert [r["detail"] for r in lines] == [{"n": 1}, _deep_detail(depth), {"n": 2}]
    assert len(csv.splitlines()) == 4
    assert checked["ok"] is True and checked["checked"] == 3
    # The export verifies offline too, and the head is the service's.
    result = verify(lines, anchor=(0, GENESIS))
    assert result.ok and result.checked == 3 and result.head == checked["head"]


@pytest.mark.parametrize("text", [
    "{not json", "", '{"a": NaN}', '{"s": "\\ud800"}', "[" * 2000 + "]" * 2000,
    '{"a": 1} {"b": 2}',
])
async def test_a_detail_that_is_not_readable_json_is_shown_as_its_text(client, text):
    """Only something other than toolgate can store such a detail: every read route still
    answers, with the stored text as a string, and verify names the record."""
    await _store(client, {"n": 1})
    decision_id = await _store(client, text)  # a str detail is stored as it is
    await _store(client, {"n": 2})

    items, lines, csv, checked = await _reads(client)
    assert [i["detail"] for i in items] == [{"n": 2}, text, {"n": 1}]
    one = await client.get(f"/v1/decisions/{decision_id}")
    assert one.status_code == 200 and one.json()["detail"] == text
    assert [r["detail"] for r in lines] == [{"n": 1}, text, {"n": 2}]
    assert checked["ok"] is False and checked["checked"] == 1
    assert checked["first_bad"]["seq"] == 2
    assert "not JSON" in checked["first_bad"]["reason"]
    assert not verify(lines, anchor=(0, GENESIS)).ok
