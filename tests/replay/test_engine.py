"""The replay engine on hand-made records (app/replay/engine.py): what the service gave
the core is applied over the recorded context, and a check that would read a masked value
makes a decision unreplayable rather than unchanged."""

from __future__ import annotations

import copy

import pytest

from app.policy.checks import evaluate
from app.policy.model import Context, RegisteredTool, Tool
from app.policy.profiles import SafetyProfile
from app.replay.engine import LEDGER, LEGACY, MASKED, Candidate, Unreplayable, replay

CONTEXT = {"plan_id": None, "sandbox_id": "sb", "sandbox_root": "/srv/sb",
           "plan_read_only": False, "require_checkpoints": False, "accumulated_cost": 0.0,
           "total_accumulated_cost": 0.0, "step_retry_count": 0, "dry_run": False,
           "confirmed": False, "metadata": {}, "variables": {}}
DETAIL = {
    "layer": "runtime",
    "tool": {"writes": True, "checkpointable": True, "unsafe": False, "destructive": False,
             "skill_category": None, "registered": True, "args": {"path": "/srv/sb/a"},
             "path_args": ["path"]},
    "request": {"capability": None, "safety_category": None, "skill_category": None},
    "context": CONTEXT,
}
PROFILE = SafetyProfile(max_cost_per_plan=10.0, max_total_cost=100.0,
                        max_retries_per_step=2, require_human_approval=False)


UNCHANGED = Candidate()


def _replay(detail, candidate=UNCHANGED, profile=PROFILE, action_id="act",
            spend=(0.0, 0.0)):
    return replay(detail, tool_name="fs.write", plan_id="p-1", action_id=action_id,
                  plan_profile=profile, candidate=candidate, spend=spend)


def _with(**changes):
    detail = copy.deepcopy(DETAIL)
    for key, value in changes.items():
        detail[key] = value
    return detail


def test_a_recorded_allow_replays_as_allow():
    assert _replay(DETAIL) == "allow"


@pytest.mark.parametrize(("effective", "verdict"), [
    ({"accumulated_cost": 10.0}, "plan_cost_limit_exceeded"),
    ({"total_accumulated_cost": 100.0}, "total_cost_limit_exceeded"),
    ({"step_retry_count": 3}, "retry_limit_exceeded"),
    ({"plan_read_only": True}, "read_only"),
])
def test_what_the_service_gave_the_core_is_applied_over_the_context(effective, verdict):
    assert _replay(_with(effective=effective)) == verdict


def test_a_server_mode_approval_is_the_recorded_one():
    approving = PROFILE.model_copy(update={"require_human_approval": True})
    granted = _with(effective={"approval": "granted"}, settings={"approval_mode": "server"})
    assert _replay(granted, profile=approving) == "allow"
    flagged = _with(context={**CONTEXT, "metadata": {"human_approved": True}},
                    settings={"approval_mode": "server"})
    # A candidate requiring approval where none was looked up: the agent's flag is not a grant.
    assert _replay(flagged, Candidate(profile=approving)) == "human_approval_required"


def test_a_masked_path_argument_is_unreplayable():
    masked = _with(masked={"args": ["path"]})
    with pytest.raises(Unreplayable) as raised:
        _replay(masked)
    assert raised.value.reason == MASKED
    # A masked value no check reads does not matter.
    assert _replay(_with(masked={"metadata": ["password"]})) == "allow"


def test_records_without_the_request_block_are_legacy():
    old = {k: v for k, v in DETAIL.items() if k != "request"}
    with pytest.raises(Unreplayable) as raised:
        _replay(old)
    assert raised.value.reason == LEGACY


def test_a_candidate_registry_entry_is_merged_with_the_request_word():
    unsafe = RegisteredTool(name="fs.write", writes=True, checkpointable=True, unsafe=True)
    assert _replay(DETAIL, Candidate(tools={"fs.write": unsafe})) == "unsafe_tool"
    # Removed, in a project refusing unregistered tools.
    refusing = _with(settings={"deny_unregistered_tools": True})
    assert _replay(refusing, Candidate(tools={"fs.write": None})) == "tool_not_activated"
    # Removed elsewhere, and the request never said what the tool does: not a decision.
    assert _replay(DETAIL, Candidate(tools={"fs.write": None})) == "invalid_input"


def test_a_stateless_decision_without_a_profile_stays_without_one():
    assert _replay(DETAIL, Candidate(profile=SafetyProfile(max_cost_per_plan=0.0)),
                   action_id=None) == "allow"
    own = _with(safety_profile=SafetyProfile(max_cost_per_plan=0.0).as_dict())
    assert _replay(own, action_id=None) == "plan_cost_limit_exceeded"


def test_the_request_path_args_stay_checked_under_a_candidate_registry_entry():
    # The request named `dest` a path argument (SPEC §17); a candidate entry for the tool
    # without `path_args` must not drop that check.
    escaping = _with(
        tool={**DETAIL["tool"], "args": {"path": "/srv/sb/a", "dest": "/etc/passwd"},
              "path_args": ["path", "dest"]},
        request={**DETAIL["request"], "path_args": ["dest"]})
    entry = RegisteredTool(name="fs.write", writes=True, checkpointable=True, unsafe=False)
    assert _replay(escaping) == "sandbox_path_escape"
    assert _replay(escaping, Candidate(tools={"fs.write": entry})) == "sandbox_path_escape"


def test_a_candidate_cost_limit_reads_the_spend_as_of_the_decision():
    # The plan had no cost limit, so its decision did not read the ledger: the spend the
    # log gives (app/replay/spend.py) is what a candidate's limit is checked against.
    capped = Candidate(profile=SafetyProfile(require_sandbox=False, max_total_cost=1.0))
    assert _replay(DETAIL, capped, spend=(10.0, 10.0)) == "total_cost_limit_exceeded"
    assert _replay(DETAIL, capped, spend=(0.5, 0.5)) == "allow"
    per_plan = Candidate(profile=SafetyProfile(require_sandbox=False, max_cost_per_plan=2.0))
    assert _replay(DETAIL, per_plan, spend=(3.0, 3.0)) == "plan_cost_limit_exceeded"
    # The agent's own, higher figure still counts (the larger of the two, as live).
    sent = _with(context={**CONTEXT, "accumulated_cost": 5.0})
    assert _replay(sent, per_plan, spend=(0.0, 0.0)) == "plan_cost_limit_exceeded"
    # Not known (a pruned log): unreplayable, never unchanged.
    with pytest.raises(Unreplayable) as raised:
        _replay(DETAIL, capped, spend=None)
    assert raised.value.reason == LEDGER
    # A decision that read the ledger itself is replayed on what it read.
    metered = _with(effective={"accumulated_cost": 0.0, "total_accumulated_cost": 0.0,
                               "step_retry_count": 0})
    assert _replay(metered, capped, spend=None) == "allow"
    # Without a cost limit in the candidate nothing reads the spend.
    assert _replay(DETAIL, Candidate(profile=SafetyProfile(require_sandbox=False)),
                   spend=None) == "allow"


CATEGORIES = [f"c{i:04d}" for i in range(1000)]


@pytest.mark.parametrize("category", [None, "c0999", "other"])
@pytest.mark.parametrize("tool_fields", [
    {}, {"unsafe": True}, {"checkpointable": False}, {"writes": False},
])
@pytest.mark.parametrize("sandbox", ["sb", ""])
def test_a_long_category_list_gives_the_verdict_the_core_gives(category, tool_fields,
                                                               sandbox):
    # Replay checks the categories on a set, the other checks without the list: the
    # verdict must be the core's own, whichever check comes first.
    profile = SafetyProfile(allowed_skill_categories=CATEGORIES, require_checkpoints=True)
    recorded = {**DETAIL["tool"], "skill_category": category, **tool_fields}
    detail = _with(tool=recorded, context={**CONTEXT, "sandbox_id": sandbox,
                                           "require_checkpoints": True})
    core = evaluate(Tool("fs.write", recorded["writes"], recorded["checkpointable"],
                         recorded["unsafe"], recorded["destructive"], category,
                         recorded["args"], ("path",), True),
                    Context("p-1", sandbox or None, "/srv/sb", {}, False, True, {}),
                    profile)
    expected = "allow" if core.allowed else core.deny.code
    assert _replay(detail, Candidate(profile=profile)) == expected
    assert _replay(detail, profile=profile) == expected
