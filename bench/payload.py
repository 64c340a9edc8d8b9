"""What the benchmarks send: one action, one plan with an inline safety profile, and a
realistic authorize body (~450 bytes) that this plan allows after running every check."""

from __future__ import annotations

import orjson

ACTION_ID = "bench-action"
PLAN_ID = "bench-plan-0001"

# Every profile check has something to look at: sandbox and checkpoints required, a category
# allow-list, both cost limits, the retry limit.
SAFETY_PROFILE = {
    "require_sandbox": True,
    "require_checkpoints": True,
    "allow_unsafe_tools": False,
    "require_human_approval": False,
    "allowed_skill_categories": ["filesystem", "code"],
    "max_cost_per_plan": 25.0,
    "max_retries_per_step": 3,
    "max_total_cost": 250.0,
}

ACTION = {"project": "bench", "read_only": False}
# The plan of every scenario but the `_limits` ones: the same profile without its cost
# limits, so checks 7 and 8 ask no ledger (SPEC §11) and the decision is made in memory, as
# every decision was before the ledger. In-process timings (bench/core.py) keep the whole
# profile: the core runs the cost checks on the submitted values either way.
PLAN = {"action_id": ACTION_ID, "plan_id": PLAN_ID, "safety_profile": {
    k: v for k, v in SAFETY_PROFILE.items() if k not in ("max_cost_per_plan", "max_total_cost")}}
# The `_limits` scenarios: the whole profile, so every decision reads the plan's and the
# project's ledger totals before answering.
PLAN_LIMITS = {"action_id": ACTION_ID, "plan_id": PLAN_ID, "safety_profile": SAFETY_PROFILE}
AGENT_KEY = {"name": "bench agent", "role": "agent", "projects": [ACTION["project"]]}

AUTHORIZE = {
    "plan_id": PLAN_ID,
    "tool": {
        "name": "fs.write_file",
        "capability": {"writes": True, "read_only": False, "checkpointable": True,
                       "unsafe": False},
        "skill_category": "filesystem",
        "args": {"path": "src/app/handlers.py", "mode": "overwrite", "bytes": 1834},
    },
    "context": {
        "sandbox_id": "sbx-7f3a9c2e41",
        "metadata": {"agent": "coder-v2", "session": "sess-1d2c3b4a", "step": 12,
                     "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
        "accumulated_cost": 1.25,
        "total_accumulated_cost": 17.5,
        "step_retry_count": 0,
    },
}

BODY: bytes = orjson.dumps(AUTHORIZE)


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
