"""Retention keeps the remaining chain verifiable."""

from datetime import UTC, datetime

import orjson

from app.decisions.prune import prune
from app.log.chain import verify

TOOL = {"name": "t", "capability": {"writes": False, "checkpointable": True, "unsafe": False}}


async def test_prune_keeps_the_rest_verifiable(client):
    for _ in range(4):
        await client.post("/v1/authorize-tool", json={"tool": TOOL})
    cut = datetime.now(UTC)
    for _ in range(3):
        await client.post("/v1/authorize-tool", json={"tool": TOOL})
    result = await prune(client.app.state.sessions, cut)
    assert result["deleted"] == 4 and result["anchor_seq"] == 4
    records = [orjson.loads(line) for line in
               (await client.get("/v1/audit/export")).text.splitlines()]
    assert records[0]["seq"] == 5 and records[0]["prev_hash"] == result["anchor_hash"]
    assert records[-1]["detail"]["operation"] == "prune"
    status = (await client.get("/v1/audit/verify")).json()
    assert status["ok"] is True and status["checked"] == 4
    assert status["range"] == {
        "first_seq": 5, "first_decision_id": records[0]["decision_id"],
        "last_seq": records[-1]["seq"], "last_decision_id": records[-1]["decision_id"],
        "count": 4, "anchor": "prune"}
    # Offline, the export starts at the anchor its own prune record names: whole, not cut.
    offline = verify(records)
    assert offline.ok and offline.anchor == "prune" and offline.checked == 4
    cut = verify(records[1:])
    assert not cut.ok and "older records may have been removed" in cut.first_bad["reason"]
    assert verify(records[1:], partial=True).as_dict()["range"]["anchor"] == "none"
    # Nothing to prune is not an error.
    assert (await prune(client.app.state.sessions,
                        datetime(2000, 1, 1, tzinfo=UTC)))["deleted"] == 0


async def test_range_verify_and_range_export(client):
    for _ in range(3):
        await client.post("/v1/authorize-tool", json={"tool": TOOL})
    middle = datetime.now(UTC).isoformat()
    for _ in range(2):
        await client.post("/v1/authorize-tool", json={"tool": TOOL})
    later = (await client.get("/v1/audit/export", params={"since": middle})).text.splitlines()
    assert len(later) == 2
    status = (await client.get("/v1/audit/verify", params={"since": middle})).json()
    assert status["ok"] is True and status["checked"] == 2
    assert status["range"]["count"] == 2 and status["range"]["anchor"] == "previous_record"
    assert status["range"]["last_decision_id"] == orjson.loads(later[-1])["decision_id"]
    whole = (await client.get("/v1/audit/verify")).json()
    assert whole["range"]["first_seq"] == 1 and whole["range"]["anchor"] == "genesis"
