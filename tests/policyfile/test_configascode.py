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
                                             "tools", "skills"].index)
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
    assert plan.summary() == ("Plan: 0 to create, 0 to update, 2 to delete, 15 unchanged; "
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
            "  review-web: {project: web, read_only: true}\n  explore: {project: research}\n"
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
