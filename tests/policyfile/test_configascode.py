"""Configuration as code without a server: reading, validation with lines, plans, export.

The live round trip (`toolgate apply`/`export` against `toolgate serve`) is in
tests/client/test_live_client.py."""

from __future__ import annotations

import copy
from pathlib import Path

import httpx
import pytest
import typer

from app.cli.apply import Service, _send
from app.policyfile.document import (
    Change,
    PolicyFileError,
    State,
    dump_yaml,
    export_document,
    load_policy,
    make_plan,
    read_yaml,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"


def empty_state() -> State:
    return State({"profiles": {}, "config": {"automation_profile": None}, "projects": {},
                  "actions": {}, "tools": {}, "skills": {}})


def state_of(text: str) -> State:
    """The state a service would hold after applying `text` to an empty one."""
    sections = copy.deepcopy(load_policy(text).sections)
    base = empty_state().sections
    return State({**base, **sections})


def problems(text: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(PolicyFileError) as info:
        load_policy(text, "p.yaml")
    return [(p.line, p.where, p.message) for p in info.value.problems]


def test_example_file_is_valid_and_applies_in_dependency_order() -> None:
    plan = make_plan(load_policy(EXAMPLE.read_text()), empty_state())
    sections = [c.section for c in plan.changes]
    assert sections == sorted(sections, key=["profiles", "config", "projects", "actions",
                                             "tools", "skills", "settings"].index)
    assert sections[-1] == "settings"
    assert {c.op for c in plan.changes} == {"create", "update"}  # config exists, empty


def test_every_problem_is_reported_with_its_line() -> None:
    text = (
        "version: 1\n"                                       # 1
        "profiles:\n"                                        # 2
        "  strict:\n"                                        # 3
        "    safety:\n"                                      # 4
        "      require_sandbox: yes\n"                       # 5: a string in YAML 1.2
        "      max_cost_per_plan: -1\n"                      # 6
        "  Bad_Name: {}\n"                                   # 7
        "actions:\n"                                         # 8
        "  deploy: {automation_profile: strict, safety_profile: {}}\n"  # 9
        "tools:\n"                                           # 10
        "  fs.write:\n"                                      # 11
        "    capability: {writes: true, checkpointable: true, unsafe: false, x: 1}\n"  # 12
        "    safety_category: destructive\n"                 # 13
        "  fs.read:\n"                                       # 14
        "    capability: {writes: false, checkpointable: true, unsafe: false}\n"  # 15
        "skills:\n"                                          # 16
        "  files: {unsafe_phrases: ['rm -rf', '  ']}\n"      # 17
        "extra: 1\n"                                         # 18
    )
    found = problems(text)
    lines = {where: line for line, where, _ in found}
    assert lines == {
        "profiles.strict.safety.require_sandbox": 5,
        "profiles.strict.safety.max_cost_per_plan": 6,
        "profiles.Bad_Name": 7,
        "actions.deploy.safety_profile": 9,
        "tools.fs.write.capability.x": 12,
        "tools.fs.read.safety_category": 14,  # missing: the line of its resource
        "skills.files.unsafe_phrases.1": 17,
        "extra": 18,
    }
    message = {where: msg for _, where, msg in found}
    assert "'yes' is a string" in message["profiles.strict.safety.require_sandbox"]
    assert message["tools.fs.read.safety_category"] == "field required"


@pytest.mark.parametrize("text, line, fragment", [
    ("version: 1\ntools:\n  a: {}\n  a: {}\n", 4, "duplicate key (first at line 3)"),
    ("version: 1\nprofiles: [\n", 3, "YAML syntax error"),
    ("profiles: {}\n", 1, "field required"),
    ("version: 2\n", 1, "Input should be 1"),
    ("- version: 1\n", 1, "expected a mapping"),
    ("version: 1\nbase: &b {description: x}\nprofiles:\n  a:\n    <<: *b\n", 5, "merge keys"),
])
def test_structural_problems(text: str, line: int, fragment: str) -> None:
    found = problems(text)
    assert any(p[0] == line and fragment in p[2] for p in found), found


def test_yaml_12_scalars() -> None:
    data, lines = read_yaml("a: yes\nb: on\nc: 0o17\nd: 2024-01-01\ne: ~\nf: 1.5\n123: x\n")
    assert data == {"a": "yes", "b": "on", "c": 15, "d": "2024-01-01", "e": None, "f": 1.5,
                    "123": "x"}
    assert lines[("123",)] == 7


def test_empty_section_is_an_empty_section() -> None:
    policy = load_policy("version: 1\ntools:\n")
    assert policy.sections == {"tools": {}}


def test_update_lists_changed_fields_only() -> None:
    text = EXAMPLE.read_text()
    state = state_of(text)
    assert not make_plan(load_policy(text), state).changes
    changed = text.replace("max_retries_per_step: 2", "max_retries_per_step: 4")
    (change,) = make_plan(load_policy(changed), state).changes
    assert (change.op, change.label) == ("update", "profile strict")
    assert change.fields == (("safety.max_retries_per_step", 2, 4),)
    assert change.render() == ["~ profile strict", "    safety.max_retries_per_step: 2 -> 4"]


def test_prune_deletes_last_and_reports_what_cannot_be_deleted() -> None:
    state = state_of(EXAMPLE.read_text())
    state.sections["tools"]["old.tool"] = state.sections["tools"]["fs.read"]
    state.sections["projects"]["legacy"] = {"automation_profile": None}
    state.sections["profiles"]["unused"] = state.sections["profiles"]["strict"]
    policy = load_policy(EXAMPLE.read_text())
    assert not make_plan(policy, state).changes  # without --prune nothing is deleted
    plan = make_plan(policy, state, prune=True)
    assert [(c.op, c.label) for c in plan.changes] == [("delete", "tool old.tool"),
                                                       ("delete", "profile unused")]
    assert [c.render() for c in plan.not_pruned] == [
        ["! project legacy: not pruned (no delete route)"]]
    assert plan.summary() == ("Plan: 0 to create, 0 to update, 2 to delete, 16 unchanged; "
                              "1 not pruned (no delete route).")


def test_sections_absent_from_the_file_are_not_pruned() -> None:
    state = state_of(EXAMPLE.read_text())
    plan = make_plan(load_policy("version: 1\nskills: {}\n"), state, prune=True)
    assert [c.label for c in plan.changes] == ["skill files", "skill search"]


def test_profiles_are_deleted_only_when_nothing_left_names_them() -> None:
    state = state_of(EXAMPLE.read_text())
    # The file drops `reviewed` but an action it does not set still names it: refused whole.
    text = "version: 1\nprofiles:\n  strict: {}\n  sandboxed-dev: {}\n"
    with pytest.raises(PolicyFileError, match="action 'deploy-web' still names it"):
        make_plan(load_policy(text), state, prune=True)
    # Pointing the action elsewhere in the same file makes the delete possible, and the
    # delete comes after the update.
    text += "actions:\n  deploy-web: {project: web, automation_profile: strict}\n" \
            "  review-web: {project: web, read_only: true}\n  explore: {project: research}\n" \
            "settings:\n  web: {deny_unregistered_tools: true}\n"  # web's shadow_profile too
    plan = make_plan(load_policy(text), state, prune=True)
    ops = [(c.op, c.label) for c in plan.changes]
    assert ops.index(("delete", "profile reviewed")) > ops.index(("update", "action deploy-web"))


def test_unknown_profile_reference_is_refused_with_its_line() -> None:
    text = "version: 1\nprojects:\n  web:\n    automation_profile: nope\n"
    with pytest.raises(PolicyFileError) as info:
        make_plan(load_policy(text), empty_state(), source="p.yaml")
    assert str(info.value) == ("p.yaml:4: projects.web.automation_profile: profile 'nope' is "
                               "neither in this file nor on the service")


def test_export_then_apply_is_a_no_op() -> None:
    state = state_of(EXAMPLE.read_text())
    state.sections["tools"]["0o17"] = state.sections["tools"]["fs.read"]  # needs quoting
    state.sections["skills"]["files"]["category"] = "yes"
    exported = dump_yaml(export_document(state))
    assert "'0o17':" in exported
    plan = make_plan(load_policy(exported), state, prune=True)
    assert not plan.changes and not plan.not_pruned


def test_export_leaves_out_sections_the_service_cannot_list() -> None:
    state = state_of(EXAMPLE.read_text())
    state.partial = frozenset({"projects", "actions"})
    doc = export_document(state)
    assert "projects" not in doc and "actions" not in doc


def test_a_refusal_midway_reports_exactly_what_was_applied(
        capsys: pytest.CaptureFixture[str]) -> None:
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.headers.get("authorization")))
        if request.url.path == "/v1/projects/web":
            return httpx.Response(422, json={"error": {"code": "unknown_profile",
                                                       "message": "profile 'x' does not exist",
                                                       "details": {}}})
        return httpx.Response(200, json={})

    service = Service("http://toolgate.test", "tg_secret")
    service.http = httpx.Client(base_url="http://toolgate.test",
                                headers={"Authorization": "Bearer tg_secret"},
                                transport=httpx.MockTransport(handler))
    changes = [Change("create", "profiles", "strict", {"description": ""}),
               Change("update", "config", None, {"automation_profile": "strict"}),
               Change("create", "projects", "web", {"automation_profile": "x"}),
               Change("create", "tools", "fs.read", {})]
    with pytest.raises(typer.Exit) as info:
        _send(service, changes)
    assert info.value.exit_code == 2
    assert [s[:2] for s in seen] == [("PUT", "/v1/profiles/strict"), ("PUT", "/v1/config"),
                                     ("PUT", "/v1/projects/web")]
    assert {s[2] for s in seen} == {"Bearer tg_secret"}
    err = capsys.readouterr().err
    assert "PUT /v1/projects/web answered 422 (unknown_profile" in err
    assert ("Applied 2 of 4 changes before the failure:\n  + profile strict\n  ~ config\n"
            "Not applied:\n  + project web (refused)\n  + tool fs.read\n") in err


def test_the_documented_example_is_the_shipped_one() -> None:
    doc = (EXAMPLE.parents[1] / "docs" / "config-as-code.md").read_text()
    block = doc.split("<!-- example:start -->\n```yaml\n")[1].split("```\n<!-- example:end -->")[0]
    assert block == EXAMPLE.read_text(), "docs/config-as-code.md: paste examples/policy.yaml"


# --- project settings (SPEC §9) -------------------------------------------------------------

def test_settings_are_a_section_keyed_by_project_sent_to_their_route() -> None:
    text = ("version: 1\nsettings:\n  web: {approval_mode: server}\n"
            "  api: {deny_unregistered_tools: true, shadow_profile: strict}\n"
            "profiles:\n  strict: {}\n")
    policy = load_policy(text)
    assert policy.sections["settings"] == {
        "web": {"deny_unregistered_tools": False, "approval_mode": "server",
                "shadow_profile": None},  # replaced whole: the rest takes its defaults
        "api": {"deny_unregistered_tools": True, "approval_mode": "client_flag",
                "shadow_profile": "strict"}}
    plan = make_plan(policy, empty_state())
    settings = [c for c in plan.changes if c.section == "settings"]
    assert [(c.method, c.path, c.label) for c in settings] == [
        ("PUT", "/v1/projects/web/settings", "settings of web"),
        ("PUT", "/v1/projects/api/settings", "settings of api")]
    assert settings[0].body == policy.sections["settings"]["web"]
    assert plan.changes[-1].section == "settings"  # after the profile it names


def test_settings_at_their_defaults_on_an_unset_project_change_nothing() -> None:
    state = empty_state()
    plan = make_plan(load_policy("version: 1\nsettings:\n  web: {}\n"), state)
    assert not plan.changes and plan.unchanged == 1
    state.sections["settings"] = {"web": {"deny_unregistered_tools": False,
                                          "approval_mode": "server", "shadow_profile": None}}
    (change,) = make_plan(load_policy("version: 1\nsettings:\n  web: {}\n"), state).changes
    assert change.render() == ["~ settings of web", '    approval_mode: "server" -> "client_flag"']


def test_bad_settings_are_refused_with_their_lines() -> None:
    text = ("version: 1\n"                                   # 1
            "settings:\n"                                    # 2
            "  web:\n"                                       # 3
            "    approval_mode: manual\n"                    # 4
            "    deny_unregistered_tools: yes\n"             # 5
            "  bad name: {}\n"                               # 6
            "  api: {shadow_profile: Not-A-Profile}\n")      # 7
    found = {where: line for line, where, _ in problems(text)}
    assert found == {"settings.web.approval_mode": 4, "settings.web.deny_unregistered_tools": 5,
                     "settings.bad name": 6, "settings.api.shadow_profile": 7}
    text = "version: 1\nsettings:\n  web:\n    shadow_profile: nope\n"
    with pytest.raises(PolicyFileError) as info:
        make_plan(load_policy(text), empty_state(), source="p.yaml")
    assert str(info.value) == ("p.yaml:4: settings.web.shadow_profile: profile 'nope' is "
                               "neither in this file nor on the service")


def test_a_shadow_profile_left_alone_keeps_its_profile_from_being_pruned() -> None:
    state = state_of(EXAMPLE.read_text())
    text = EXAMPLE.read_text().split("\n# Project settings")[0]  # no settings: section
    text = text.replace("automation_profile: reviewed", "automation_profile: strict")
    text = text.replace("  reviewed:\n", "  other:\n")
    with pytest.raises(PolicyFileError, match="the settings of project 'web' still names it"):
        make_plan(load_policy(text), state, prune=True)


def test_settings_export_and_apply_round_trip() -> None:
    state = state_of(EXAMPLE.read_text())
    state.sections["settings"]["api"] = {"deny_unregistered_tools": False,
                                         "approval_mode": "server", "shadow_profile": None}
    doc = export_document(state)
    assert doc["settings"] == {
        "api": {"deny_unregistered_tools": False, "approval_mode": "server"},
        "web": {"deny_unregistered_tools": True, "approval_mode": "client_flag",
                "shadow_profile": "reviewed"}}
    plan = make_plan(load_policy(dump_yaml(doc)), state, prune=True)
    assert not plan.changes and not plan.not_pruned
    # Settings have no DELETE route: a project the file no longer names is reported.
    plan = make_plan(load_policy("version: 1\nsettings: {}\n"), state, prune=True)
    assert [c.render() for c in plan.not_pruned] == [
        ["! settings of api: not pruned (no delete route)"],
        ["! settings of web: not pruned (no delete route)"]]


def test_apply_reads_settings_one_by_one_from_a_service_without_the_list() -> None:
    from app.cli.apply import read_state

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/project-settings":
            return httpx.Response(404, json={"error": {"code": "not_found", "message": "",
                                                       "details": {}}})
        if path == "/v1/projects/web/settings":
            return httpx.Response(200, json={
                "project": "web", "deny_unregistered_tools": True, "approval_mode": "server",
                "shadow_profile": None, "updated_at": "2026-12-02T00:00:00Z"})
        if path == "/v1/config":
            return httpx.Response(200, json={"automation_profile": None})
        return httpx.Response(200, json={"items": []})

    service = Service("http://toolgate.test", None)
    service.http = httpx.Client(base_url="http://toolgate.test",
                                transport=httpx.MockTransport(handler))
    policy = load_policy("version: 1\nsettings:\n  web: {approval_mode: server}\n")
    state = read_state(service, policy)
    assert "settings" in state.partial
    assert state.sections["settings"] == {"web": {"deny_unregistered_tools": True,
                                                  "approval_mode": "server",
                                                  "shadow_profile": None}}
    (change,) = make_plan(policy, state).changes
    assert change.fields == (("deny_unregistered_tools", True, False),)


TOOL_TEXT = """version: 1
tools:
  deploy:
    capability: {writes: true, checkpointable: true, unsafe: false}
    safety_category: safe
    human_approval: %s
"""


def test_a_tool_may_require_human_approval() -> None:
    """Issue 35 item 9: `human_approval: required` is part of a registry entry as code."""
    required = load_policy(TOOL_TEXT % "required")
    assert required.sections["tools"]["deploy"]["human_approval"] == "required"
    # The default is not written out: a file that never names it is as it was.
    assert "human_approval" not in load_policy(TOOL_TEXT % "profile").sections["tools"]["deploy"]
    (change,) = make_plan(required, state_of(TOOL_TEXT % "profile")).changes
    assert change.fields == (("human_approval", None, "required"),)
    [(line, where, message)] = problems(TOOL_TEXT % "always")
    assert (line, where) == (6, "tools.deploy.human_approval") and "required" in message
