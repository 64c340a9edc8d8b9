"""Integers beyond 2^53 never match an approval (SPEC §10, issue 30 item 7), on SQLite and
Postgres and whichever way the body is read: past 64 bits orjson reads them as doubles, and
2^64 and 2^64 + 1 (or 10^23 and the literal 1e23) are then one number. Before, a grant for
`amount: 18446744073709551616` allowed `amount: 18446744073709551617`, and the approver saw
1.8446744073709552e+19; now neither creates an approval or can use one."""

from __future__ import annotations

import pytest

from app.kit.canonical import canonical_sha256
from tests.approvals.test_approvals import WRITER, new_key, setup


def _raw(plan: str, number: str) -> bytes:
    return (b'{"plan_id":"%s","tool":{"name":"deploy","capability":{"writes":true,'
            b'"checkpointable":true,"unsafe":false},"args":{"service":"web","amount":%s}}}'
            % (plan.encode(), number.encode()))


@pytest.mark.parametrize("number", [str(2 ** 53), str(2 ** 53 + 1), str(2 ** 64), str(2 ** 64 + 1),
                                    str(10 ** 23), "1e23", str(-(2 ** 64)), "1.7e308"])
async def test_a_number_past_2_53_is_unbindable_and_asks_no_one(client, number):
    agent = await new_key(client, "agent", principal="build-bot")
    plan = await setup(client)
    r = await client.post("/v1/authorize-tool", content=_raw(plan, number), headers={
        **agent, "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    deny = r.json()["deny"]
    assert deny["code"] == "human_approval_required"
    assert deny["details"]["approval"] == {"state": "unbindable"}
    assert (await client.get("/v1/approvals")).json()["items"] == []


async def test_safe_integers_still_bind(client):
    agent = await new_key(client, "agent", principal="build-bot")
    approver = await new_key(client, "approver", principal="alice")
    plan = await setup(client)
    r = await client.post("/v1/authorize-tool", content=_raw(plan, str(2 ** 53 - 1)), headers={
        **agent, "Content-Type": "application/json"})
    pending = r.json()["deny"]["details"]["approval"]
    assert pending["state"] == "pending"
    shown = (await client.get(f"/v1/approvals/{pending['approval_id']}")).json()
    assert shown["request"]["args"]["amount"] == 2 ** 53 - 1  # as sent
    await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={"uses": 5},
                      headers=approver)
    r = await client.post("/v1/authorize-tool", content=_raw(plan, str(2 ** 53 - 3)),
                          headers={**agent, "Content-Type": "application/json"})
    assert r.json()["allowed"] is False
    r = await client.post("/v1/authorize-tool", content=_raw(plan, str(2 ** 53 - 1)),
                          headers={**agent, "Content-Type": "application/json"})
    assert r.json()["allowed"] is True


def test_the_digest_refuses_what_a_double_cannot_tell_apart():
    assert canonical_sha256({"a": float(2 ** 64)}) is None
    assert canonical_sha256({"a": [1, {"b": -1e23}]}) is None
    assert canonical_sha256({"a": 2 ** 53 + 1}) is None
    assert canonical_sha256({"a": float(2 ** 53)}) is None
    assert canonical_sha256({"a": float(2 ** 52)}) == canonical_sha256({"a": 2 ** 52})
    assert canonical_sha256({"a": 0.1, "w": WRITER}) is not None
