"""A varied log of recorded decisions for replay tests, made through the real authorize
routes: every decision case of tests/cases and knaif's path and gate cases
(tests/cases/peers/knaif.json), each sent stateless and to plans of several profiles,
projects and settings (deny_unregistered_tools, approval_mode server, a read-only action,
inline profiles), some with masked values."""

from __future__ import annotations

import copy
from typing import Any

from tests import peercases
from tests.casefiles import load_cases

MASKED_PATH_ARG = "secret_path"  # a path argument whose value the log masks
PROFILES = {
    "strict": {},
    "loose": {"require_sandbox": False, "require_checkpoints": False,
              "allow_unsafe_tools": True, "max_retries_per_step": 10},
    "approve": {"require_sandbox": False, "require_human_approval": True,
                "max_cost_per_plan": 10.0, "max_total_cost": 100.0,
                "allowed_skill_categories": ["io", "files"]},
}
PROJECTS = {"web": {}, "locked": {"deny_unregistered_tools": True},
            "srv": {"approval_mode": "server"}}


def _knaif_tool_body(tool: dict[str, Any]) -> dict[str, Any]:
    return {"capability": {"writes": not tool["readonly"], "read_only": tool["readonly"],
                           "checkpointable": True, "unsafe": False},
            "safety_category": tool["safety_category"], "path_args": tool["path_args"],
            "skill_category": tool["skill"]}


def requests() -> list[dict[str, Any]]:
    """Stateless authorize bodies (no plan_id)."""
    bodies = [copy.deepcopy(case["request"]) for _, case in load_cases("decision")]
    data = peercases.knaif()
    for case in data["path_cases"]:
        bodies.append({"tool": {"name": f"{case['skill']}.{case['tool']}",
                                "args": {case["arg"]: case["value"]}},
                       "context": {"sandbox_id": "sb", "sandbox_root": case["sandbox_root"],
                                   "variables": case["variables"], "confirmed": True}})
    for case in data["gate_cases"]:
        bodies.append({"tool": {"name": f"{case['skill']}.{case['tool']}",
                                "args": case["args"]},
                       "context": {"sandbox_id": "sb", "sandbox_root": "/srv/knaif-sb/sandbox",
                                   "dry_run": case["dry_run"],
                                   "confirmed": case["confirmed"]}})
    for value in ("/srv/sb/in", "/etc/passwd"):  # masked: unreplayable under the path check
        bodies.append({"tool": {"name": "vault.read", "args": {MASKED_PATH_ARG: value}},
                       "context": {"sandbox_id": "sb", "sandbox_root": "/srv/sb",
                                   "metadata": {"password": "hunter2"}}})
    # Varied costs and retries, approvals sent by the agent, an unregistered tool.
    for cost, retries, approved in ((0.0, 0, False), (12.0, 4, True), (150.0, 11, True)):
        bodies.append({"tool": {"name": "pay.send", "skill_category": "io",
                                "capability": {"writes": True, "checkpointable": True,
                                               "unsafe": False}},
                       "context": {"sandbox_id": "sb", "accumulated_cost": cost,
                                   "total_accumulated_cost": cost * 5,
                                   "step_retry_count": retries,
                                   "metadata": {"human_approved": approved}}})
    return bodies


async def build(client: Any) -> int:
    """Fills the log; returns how many authorize decisions it holds."""
    for name, safety in PROFILES.items():
        r = await client.put(f"/v1/profiles/{name}", json={"safety": safety})
        assert r.status_code in (200, 201), r.text
    data = peercases.knaif()
    for skill, name in sorted({(c["skill"], c["tool"])
                               for c in data["path_cases"] + data["gate_cases"]}):
        r = await client.put(f"/v1/tools/{skill}.{name}",
                             json=_knaif_tool_body(peercases.tool(skill, name)))
        assert r.status_code == 201, r.text
    r = await client.put("/v1/tools/vault.read", json={
        "capability": {"writes": False, "checkpointable": True, "unsafe": False},
        "safety_category": "safe", "path_args": [MASKED_PATH_ARG]})
    assert r.status_code == 201, r.text
    plans = []
    for project, settings in PROJECTS.items():
        r = await client.put(f"/v1/projects/{project}/settings", json=settings)
        assert r.status_code == 200, r.text
        for name in PROFILES:
            await client.put(f"/v1/actions/{project}-{name}", json={"project": project})
            r = await client.post("/v1/plans", json={"action_id": f"{project}-{name}",
                                                     "plan_id": f"{project}-{name}",
                                                     "automation_profile": name})
            assert r.status_code == 201, r.text
            plans.append(f"{project}-{name}")
        await client.put(f"/v1/actions/{project}-ro", json={"project": project,
                                                             "read_only": True})
        r = await client.post("/v1/plans", json={
            "action_id": f"{project}-ro", "plan_id": f"{project}-ro",
            "safety_profile": {"require_sandbox": False, "allow_unsafe_tools": True}})
        assert r.status_code == 201, r.text
        plans.append(f"{project}-ro")
    bodies = []
    for body in requests():
        bodies.append(body)
        for plan in plans:
            bound = {k: v for k, v in copy.deepcopy(body).items() if k != "safety_profile"}
            bodies.append({**bound, "plan_id": plan})
    decided = await _granted(client)
    for start in range(0, len(bodies), 100):
        chunk = bodies[start:start + 100]
        r = await client.post("/v1/authorize-tools", json={"requests": chunk})
        if r.status_code == 200:
            decided += len(chunk)
            continue
        for body in chunk:  # one of them is not a decision (a 422): send them one by one
            r = await client.post("/v1/authorize-tool", json=body)
            decided += r.status_code == 200
    return decided


async def _granted(client: Any) -> int:
    """Server-mode decisions that a grant made allowed (detail.effective.approval granted),
    on a plan of the srv project whose profile requires approval. Returns how many
    authorize decisions it made."""
    r = await client.post("/v1/keys", json={"name": "approver", "role": "approver",
                                            "projects": None, "principal": "alice"})
    approver = {"Authorization": f"Bearer {r.json()['key']}"}
    body = {"plan_id": "srv-approve", "tool": {
        "name": "deploy", "skill_category": "io",
        "capability": {"writes": True, "checkpointable": True, "unsafe": False},
        "args": {"service": "web"}}}
    r = await client.post("/v1/authorize-tool", json=body)
    approval = r.json()["deny"]["details"]["approval"]
    r = await client.post(f"/v1/approvals/{approval['approval_id']}/grant",
                          json={"uses": 2}, headers=approver)
    assert r.status_code == 200, r.text
    for _ in range(2):
        r = await client.post("/v1/authorize-tool", json=body)
        assert r.json()["allowed"] is True, r.text
    return 3
