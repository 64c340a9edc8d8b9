"""Shared steps of the hook tests: the shipped mapping applied, an agent key, hook bodies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from app.policyfile.document import State, load_policy, make_plan

ROOT = Path(__file__).resolve().parents[2]
MAPPING = ROOT / "examples" / "claude-code.yaml"
GEMINI_MAPPING = ROOT / "examples" / "gemini-cli.yaml"


def mapping_changes(mapping: Path = MAPPING) -> list[tuple[str, str, dict[str, Any] | None]]:
    """examples/claude-code.yaml (or another agent's) as `toolgate apply` sends it to an
    empty service."""
    policy = load_policy(mapping.read_text(), str(mapping))
    plan = make_plan(policy, State(sections={}))
    return [(c.method, c.path, c.body) for c in plan.changes]


async def apply_mapping(client: httpx.AsyncClient, mapping: Path = MAPPING) -> None:
    for method, path, body in mapping_changes(mapping):
        r = await client.request(method, path, json=body)
        assert r.status_code in (200, 201), (path, r.text)


async def agent_key(client: httpx.AsyncClient, projects: list[str] | None = None) -> dict:
    r = await client.post("/v1/keys", json={"name": "claude-code", "role": "agent",
                                            "projects": projects})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def pre(tool: str, tool_input: dict, *, session: str = "s-1", cwd: str = "/work/repo",
        tool_use_id: str = "toolu_01", **extra: Any) -> dict:
    return {"session_id": session, "cwd": cwd,
            "transcript_path": f"/home/dev/.claude/projects/-work-repo/{session}.jsonl",
            "permission_mode": "default", "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": tool_input, "tool_use_id": tool_use_id,
            **extra}


def post(tool: str, tool_input: dict, *, failed: bool = False, **kw: Any) -> dict:
    body = pre(tool, tool_input, **kw)
    if failed:
        body.update(hook_event_name="PostToolUseFailure", error="Exit code 1")
    else:
        body.update(hook_event_name="PostToolUse",
                    tool_response={"stdout": "", "stderr": "", "interrupted": False})
    return body


def permission(answer: dict) -> tuple[str, str]:
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out["permissionDecision"], out["permissionDecisionReason"]
