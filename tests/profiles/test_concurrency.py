"""Concurrent writers of one resource: never a 5xx, and the right answers."""

import asyncio


async def test_identical_plan_use_at_once_is_idempotent(client):
    await client.put("/v1/actions/a", json={"project": "p"})
    body = {"action_id": "a", "plan_id": "same"}
    answers = await asyncio.gather(*[client.post("/v1/plans", json=body) for _ in range(20)])
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] * 19 + [201], codes
    assert len({r.json()["created_at"] for r in answers}) == 1


async def test_different_plan_use_at_once_conflicts(client):
    for n in range(10):
        await client.put(f"/v1/actions/a{n}", json={})
    answers = await asyncio.gather(*[
        client.post("/v1/plans", json={"action_id": f"a{n}", "plan_id": "contested"})
        for n in range(10)])
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] + [409] * 9, codes


async def test_concurrent_configuration_writes_all_succeed(client):
    answers = await asyncio.gather(
        *[client.put("/v1/profiles/x", json={"safety": {"max_retries_per_step": n}})
          for n in range(10)],
        *[client.put("/v1/config", json={"automation_profile": None}) for _ in range(5)],
        *[client.put("/v1/projects/pj", json={}) for _ in range(5)],
        *[client.put("/v1/actions/ac", json={"project": "pj"}) for _ in range(5)],
    )
    assert all(r.status_code in (200, 201) for r in answers), [
        (r.status_code, r.text[:100]) for r in answers if r.status_code >= 300]
    versions = [v["version"] for v in
                (await client.get("/v1/profiles/x/versions")).json()["items"]]
    assert versions == list(range(1, len(versions) + 1)) and len(versions) == 10
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True
