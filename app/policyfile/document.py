"""Configuration as code (issue 7): a policy file <-> the service's configuration.

Pure: no HTTP here. `app/cli/apply.py` fetches the current state, calls `load_policy` and
`make_plan`, prints the plan and sends it. Everything a file says is validated with the
service's own pydantic models (app/profiles/schemas.py, app/registry/schemas.py) before a
single request is sent, so a file the service would refuse is refused here, whole, with the
line of each problem.

YAML is read and written by app/policyfile/yamlfile.py (line numbers, YAML 1.2 scalars).

Sections absent from a file are not managed by it: `--prune` only deletes within the
sections the file has (an empty `tools: {}` prunes every tool; no `tools:` leaves them be).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import StringConstraints, ValidationError

from app.kit.schemas import Name, ProfileName, Strict
from app.policy.rules import RuleError
from app.policyfile.rules import RULE_FIELDS, rule_form, rule_problem
from app.policyfile.yamlfile import Path, PolicyFileError, Problem, dotted, dump_yaml, read_yaml
from app.profiles.schemas import ActionIn, ProfileChoice, ProfileIn
from app.registry.schemas import ProjectSettingsIn, SkillIn, ToolDefIn
from app.rules.schemas import RuleIn

__all__ = ["Change", "Plan", "Policy", "PolicyFileError", "Problem", "State", "dump_yaml",
           "export_document", "from_answer", "load_policy", "make_plan", "read_yaml"]

# In the order changes are sent: profiles first (the others name them); project settings
# last, so a project's deny_unregistered_tools is turned on after its tools are registered.
SECTIONS = ("profiles", "config", "projects", "actions", "tools", "skills", "rules",
            "settings")
PRUNABLE = ("profiles", "tools", "skills", "rules")  # the others have no DELETE route
KIND = {"profiles": "profile", "config": "config", "projects": "project",
        "actions": "action", "tools": "tool", "skills": "skill", "rules": "rule",
        "settings": "settings of"}
# A project whose settings were never set has these (SPEC §9).
DEFAULT_SETTINGS = {"deny_unregistered_tools": False, "approval_mode": "client_flag",
                    "shadow_profile": None}

# --- the file's schema: the service's models ----------------------------------------------

PeopleValue = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class PersonRoleIn(Strict):
    """`people:` (SPEC §21, docs/auth.md): a value of the OIDC roles claim -> the role and
    projects of a person whose ID token holds it (null or absent projects: every project)."""

    role: Literal["admin", "agent", "approver", "auditor"]
    projects: list[Name] | None = None


class PolicyFileModel(Strict):
    version: Literal[1]
    profiles: dict[ProfileName, ProfileIn] | None = None
    config: ProfileChoice | None = None
    projects: dict[Name, ProfileChoice] | None = None
    actions: dict[Name, ActionIn] | None = None
    tools: dict[Name, ToolDefIn] | None = None
    skills: dict[Name, SkillIn] | None = None
    rules: dict[Name, RuleIn] | None = None
    settings: dict[Name, ProjectSettingsIn] | None = None
    # Read by `toolgate serve` (TOOLGATE_OIDC_PEOPLE_FILE), never sent by `toolgate apply`.
    people: dict[PeopleValue, PersonRoleIn] | None = None


# Normal forms: what a PUT body holds and what a GET answer is compared on.
def _profile(m: ProfileIn) -> dict[str, Any]:
    return {"description": m.description, "safety": m.safety.as_dict()}


def _choice(m: ProfileChoice) -> dict[str, Any]:
    return {"automation_profile": m.automation_profile}


def _action(m: ActionIn) -> dict[str, Any]:
    return {"project": m.project, "read_only": m.read_only,
            "automation_profile": m.automation_profile,
            "safety_profile": m.safety_profile.as_dict() if m.safety_profile else None}


def _tool(m: ToolDefIn) -> dict[str, Any]:
    return {"capability": m.capability.model_dump(), "safety_category": m.safety_category,
            "skill_category": m.skill_category, "path_args": list(dict.fromkeys(m.path_args)),
            # Only when not the default: exports of files that never name it stay as they were.
            **({"human_approval": m.human_approval} if m.human_approval != "profile" else {}),
            **({"shell": m.shell.model_dump()} if m.shell is not None else {}),
            **({"url_args": list(dict.fromkeys(m.url_args))} if m.url_args else {})}


def _skill(m: SkillIn) -> dict[str, Any]:
    return {"category": m.category, "unsafe_phrases": list(m.unsafe_phrases)}


def _settings(m: ProjectSettingsIn) -> dict[str, Any]:
    return {"deny_unregistered_tools": m.deny_unregistered_tools,
            "approval_mode": m.approval_mode, "shadow_profile": m.shadow_profile}


MODELS: dict[str, tuple[type, Any]] = {
    "profiles": (ProfileIn, _profile), "config": (ProfileChoice, _choice),
    "projects": (ProfileChoice, _choice), "actions": (ActionIn, _action),
    "tools": (ToolDefIn, _tool), "skills": (SkillIn, _skill),
    "rules": (RuleIn, rule_form), "settings": (ProjectSettingsIn, _settings),
}


def normalize(section: str, data: Any) -> dict[str, Any]:
    """One resource's normal form, validated by the service's model (ValidationError)."""
    model, form = MODELS[section]
    return form(model.model_validate(data))


@dataclass
class Policy:
    """A validated file: the normal form of every resource, per section present."""

    sections: dict[str, Any]  # "config" -> dict; the others -> {name: dict}
    lines: dict[Path, int] = field(default_factory=dict)
    # `people:`: {claim value: {"role", "projects"}}; None when the file has no such section.
    people: dict[str, dict[str, Any]] | None = None

    def line(self, *path: str | int) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _problem_for(error: dict[str, Any], lines: dict[Path, int],
                 sections: tuple[str, ...] | None = None) -> Problem:
    """A pydantic error as a Problem at its line (`sections`: the top-level keys an unknown
    one is told about; the policy file's by default). The gateway's config uses it too."""
    loc = tuple(error["loc"])
    is_key = bool(loc) and loc[-1] == "[key]"
    path = loc[:-1] if is_key else loc
    probe = path
    while probe and probe not in lines:
        probe = probe[:-1]
    message = error["msg"].removeprefix("Value error, ")
    if is_key:
        message = f"invalid name {path[-1]!r}: {message}"
    elif error["type"] == "extra_forbidden":
        known = SECTIONS if sections is None else sections
        message = "unknown field" + (f" (sections: {', '.join(known)})" if len(path) == 1
                                     else "")
    elif error["type"] == "missing":
        message = "field required"
    elif error["type"] == "bool_type" and isinstance(error.get("input"), str):
        message += f" (write true or false: {error['input']!r} is a string in YAML 1.2)"
    return Problem(lines.get(probe, 1 if not probe else None), dotted(path), message)


def load_policy(text: str, source: str = "<policy>") -> Policy:
    """Read and validate a whole file; PolicyFileError lists every problem with its line."""
    data, lines = read_yaml(text, source)
    if not isinstance(data, dict):
        raise PolicyFileError([Problem(1, "", "expected a mapping starting with `version: 1`")],
                              source)
    # An empty section (`tools:` with everything commented out) is an empty section.
    data = {k: ({} if v is None and k in SECTIONS else v) for k, v in data.items()}
    try:
        model = PolicyFileModel.model_validate(data)
    except ValidationError as exc:
        raise PolicyFileError([_problem_for(e, lines) for e in exc.errors()], source) from None
    sections: dict[str, Any] = {}
    for section in SECTIONS:
        value = getattr(model, section)
        if section not in data:
            continue
        form = MODELS[section][1]
        if section == "rules":
            sections[section] = _rules(value, lines, source)
            continue
        sections[section] = (form(value) if section == "config"
                             else {name: form(item) for name, item in value.items()})
    people = None if model.people is None and "people" not in data else {
        value: {"role": item.role, "projects": item.projects}
        for value, item in (model.people or {}).items()}
    return Policy(sections, lines, people)


def people_of_file(path: str) -> dict[str, dict[str, Any]]:
    """The `people:` section of the policy file at `path` (TOOLGATE_OIDC_PEOPLE_FILE), read
    when `toolgate serve` starts; PolicyFileError (every problem, with its line) when the
    file is not valid or has no such section, OSError when it cannot be read."""
    from pathlib import Path as FilePath

    policy = load_policy(FilePath(path).read_text(encoding="utf-8"), path)
    if policy.people is None:
        raise PolicyFileError([Problem(1, "people", "no people: section (TOOLGATE_OIDC_"
                                                    "PEOPLE_FILE names this file for it)")],
                              path)
    return policy.people


def _rules(value: dict[str, RuleIn], lines: dict[Path, int], source: str) -> dict[str, Any]:
    """Every rule compiled, as the service will when it is sent: the problems of all."""
    forms, problems = {}, []
    for name, item in value.items():
        try:
            forms[name] = rule_form(item)
        except RuleError as exc:
            problems.append(rule_problem(name, exc, lines))
    if problems:
        raise PolicyFileError(problems, source)
    return forms


# --- the service's state ------------------------------------------------------------------

@dataclass
class State:
    """The service's configuration in normal form. `partial` names the sections the service
    could not list (only the resources the file names were fetched one by one)."""

    sections: dict[str, Any]
    partial: frozenset[str] = frozenset()


FIELDS = {"profiles": ("description", "safety"), "config": ("automation_profile",),
          "projects": ("automation_profile",),
          "actions": ("project", "read_only", "automation_profile", "safety_profile"),
          "tools": ("capability", "safety_category", "skill_category", "path_args",
                    "human_approval", "shell", "url_args"),
          "rules": RULE_FIELDS,
          "skills": ("category", "unsafe_phrases"),
          "settings": tuple(DEFAULT_SETTINGS)}


def from_answer(section: str, item: dict[str, Any]) -> dict[str, Any]:
    """A GET answer's resource in normal form (output-only fields dropped)."""
    return normalize(section, {k: item[k] for k in FIELDS[section] if k in item})


# --- the plan -----------------------------------------------------------------------------

Op = Literal["create", "update", "delete", "not_pruned"]
SIGN = {"create": "+", "update": "~", "delete": "-", "not_pruned": "!"}


@dataclass(frozen=True)
class Change:
    op: Op
    section: str
    name: str | None
    body: dict[str, Any] | None = None
    fields: tuple[tuple[str, Any, Any], ...] = ()  # (dotted field, before, after)

    @property
    def label(self) -> str:
        return KIND[self.section] + (f" {self.name}" if self.name is not None else "")

    @property
    def method(self) -> str:
        return "DELETE" if self.op == "delete" else "PUT"

    @property
    def path(self) -> str:
        if self.section == "config":
            return "/v1/config"
        name = quote(str(self.name), safe='')
        if self.section == "settings":
            return f"/v1/projects/{name}/settings"
        return f"/v1/{self.section}/{name}"

    def render(self) -> list[str]:
        head = f"{SIGN[self.op]} {self.label}"
        if self.op == "not_pruned":
            return [f"{head}: not pruned (no delete route)"]
        return [head] + [
            f"    {name}: {_show(before)} -> {_show(after)}" if self.op == "update"
            else f"    {name}: {_show(after)}"
            for name, before, after in self.fields
        ]


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _diff(before: dict[str, Any] | None, after: dict[str, Any]) -> tuple[tuple[str, Any, Any], ...]:
    """(field, before, after) for each changed field; for a creation, each field set."""
    new = _flat(after)
    if before is None:
        return tuple((k, None, v) for k, v in new.items() if v is not None)
    old = _flat(before)
    return tuple((k, old.get(k), new.get(k)) for k in dict.fromkeys([*new, *old])
                 if old.get(k) != new.get(k))


@dataclass
class Plan:
    changes: list[Change]
    not_pruned: list[Change]
    unchanged: int

    def render(self) -> list[str]:
        out = [line for change in self.changes + self.not_pruned for line in change.render()]
        return out + [self.summary()]

    def summary(self) -> str:
        counts = {op: sum(c.op == op for c in self.changes)
                  for op in ("create", "update", "delete")}
        extra = (f"; {len(self.not_pruned)} not pruned (no delete route)"
                 if self.not_pruned else "")
        if not self.changes:
            return f"No changes ({self.unchanged} unchanged{extra})."
        return (f"Plan: {counts['create']} to create, {counts['update']} to update, "
                f"{counts['delete']} to delete, {self.unchanged} unchanged{extra}.")


def make_plan(policy: Policy, state: State, *, prune: bool = False,
              source: str = "<policy>") -> Plan:
    """Every change in the order it must be sent: profiles first (they are named by the
    rest), then config, projects, actions, tools, skills, project settings; deletes last,
    so a profile is deleted only after whatever named it was pointed elsewhere. A project
    whose settings were never set has the default settings: a file giving it exactly those
    changes nothing."""
    want, have = policy.sections, state.sections
    _check_references(policy, state, prune=prune, source=source)
    changes: list[Change] = []
    unchanged = 0
    for section in SECTIONS:
        if section not in want:
            continue
        if section == "config":
            items = {None: want["config"]}
            current = {None: have.get("config") or {"automation_profile": None}}
        else:
            items, current = want[section], have.get(section, {})
        for name, body in items.items():
            before = current.get(name)
            if before == body or (section == "settings" and before is None
                                  and body == DEFAULT_SETTINGS):
                unchanged += 1
            else:
                op: Op = "create" if before is None else "update"
                changes.append(Change(op, section, name, body, _diff(before, body)))
    not_pruned: list[Change] = []
    if prune:
        for section in ("rules", "tools", "skills", "profiles", "projects", "actions",
                        "settings"):
            if section not in want:
                continue
            for name in sorted(set(have.get(section, {})) - set(want[section])):
                if section in PRUNABLE:
                    changes.append(Change("delete", section, name))
                else:
                    not_pruned.append(Change("not_pruned", section, name))
    return Plan(changes, not_pruned, unchanged)


REFERENCING = {"projects": "automation_profile", "actions": "automation_profile",
               "settings": "shadow_profile"}


def _references(sections: dict[str, Any]) -> list[tuple[str, str | None, str, str]]:
    """(section, name, field, profile) for every profile named in these sections."""
    refs = []
    if (sections.get("config") or {}).get("automation_profile"):
        refs.append(("config", None, "automation_profile",
                     sections["config"]["automation_profile"]))
    for section, field_name in REFERENCING.items():
        for name, body in (sections.get(section) or {}).items():
            if body.get(field_name):
                refs.append((section, name, field_name, body[field_name]))
    return refs


def _check_references(policy: Policy, state: State, *, prune: bool, source: str) -> None:
    want, have = policy.sections, state.sections
    existing = set(have.get("profiles", {}))
    pruned = existing - set(want["profiles"]) if prune and "profiles" in want else set()
    known = set(want.get("profiles", {})) | (existing - pruned)
    problems = []
    for section, name, field_name, profile in _references(want):
        if profile not in known:
            why = ("is pruned by this apply" if profile in pruned
                   else "is neither in this file nor on the service")
            path = (section,) if name is None else (section, name)
            problems.append(Problem(policy.line(*path, field_name),
                                    dotted((*path, field_name)),
                                    f"profile '{profile}' {why}"))
    # What the file leaves alone keeps naming its profile after the apply.
    untouched = {s: {n: b for n, b in (have.get(s) or {}).items() if n not in want.get(s, {})}
                 for s in REFERENCING}
    if "config" not in want:
        untouched["config"] = have.get("config")
    for section, name, _field, profile in _references(untouched):
        if profile in pruned:
            who = ("the global config" if name is None
                   else f"the settings of project '{name}'" if section == "settings"
                   else f"{KIND[section]} '{name}'")
            problems.append(Problem(policy.line("profiles"), f"profiles.{profile}",
                                    f"cannot prune profile '{profile}': {who} still names it "
                                    "and this file does not change that"))
    if problems:
        raise PolicyFileError(problems, source)


# --- export -------------------------------------------------------------------------------

def export_document(state: State) -> dict[str, Any]:
    """The state as a policy file's data: `apply` of it changes nothing. Sections the
    service could not list are left out (so applying the export leaves them alone)."""
    doc: dict[str, Any] = {"version": 1}
    for section in SECTIONS:
        if section in state.partial:
            continue
        value = state.sections.get(section)
        if section == "config":
            doc["config"] = dict(value or {"automation_profile": None})
            continue
        doc[section] = {name: _compact(section, value[name]) for name in sorted(value or {})}
    return doc


def _compact(section: str, body: dict[str, Any]) -> dict[str, Any]:
    # Optional fields that are null are left out; a project always shows its choice.
    keep = {"automation_profile"} if section == "projects" else set()
    return {k: v for k, v in body.items() if v is not None or k in keep}
