"""Shared steps of the ledger tests: a project, an action with a profile, a plan, calls."""

from __future__ import annotations

import httpx

WRITER = {"writes": True, "checkpointable": True, "unsafe": False}
OPEN = {"require_human_approval": False, "require_sandbox": False,
        "require_checkpoints": False}


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def new_key(client: httpx.AsyncClient, role: str, *,
                  projects: list[str] | None = None) -> dict[str, str]:
    r = await client.post("/v1/keys", json={"name": role, "role": role, "projects": projects})
    assert r.status_code == 201, r.text
    return bearer(r.json()["key"])


async def plan_with(client: httpx.AsyncClient, project: str = "ops", **limits) -> str:
    await client.put(f"/v1/projects/{project}", json={})
    r = await client.put(f"/v1/actions/run-{project}", json={
        "project": project, "safety_profile": {**OPEN, **limits}})
    assert r.status_code in (200, 201), r.text
    r = await client.post("/v1/plans", json={"action_id": f"run-{project}"})
    assert r.status_code == 201, r.text
    return r.json()["plan_id"]


def call(plan_id: str, *, args: dict | None = None, **context) -> dict:
    return {"plan_id": plan_id,
            "tool": {"name": "deploy", "capability": WRITER,
                     "args": args if args is not None else {"service": "web"}},
            "context": context}


async def authorize(client, body, headers=None) -> dict:
    r = await client.post("/v1/authorize-tool", json=body, headers=headers or {})
    assert r.status_code == 200, r.text
    return r.json()


async def report(client, decision_id: str, body: dict, headers=None) -> httpx.Response:
    return await client.post(f"/v1/decisions/{decision_id}/outcome", json=body,
                             headers=headers or {})
