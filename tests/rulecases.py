"""Call-rule cases as data (SPEC §18): the loader every runner shares (the core's,
and those that run the same cases through HTTP, the hooks and the gateway).

`tests/cases/shell/*.json` each hold one object::

    {"description": "...",
     "rules": {"<rule_id>": {<PUT /v1/rules body>}, ...},   # the rule set of every case
     "call": {"tool": "Bash", "shell_arg": "command",         # defaults of every case
              "sandbox_root": "/repo", "home": "/home/agent",
              "path_args": [...], "url_args": [...], "args": {...},
              "plan": {...}, "context": {...}},
     "cases": [
       {"name": "kebab-case",
        "command": "rm -rf /",               # shorthand: args[shell_arg] = command
        "call": {...},                       # optional: overrides the file's call fields
        "expect": {"verdict": "deny" | "ask" | "classify" | "none",
                   "rule": "<rule_id>",      # the rule that decides (not for "none")
                   "matched": "rm -rf /",    # optional: its `matched` exactly
                   "matches": ["<rule_id>", ...]}},   # optional: every rule that matched
     ]}

The verdict is what the enforce-mode rules say, in SPEC §18's order: a deny rule decides;
else an ask rule; else a classify rule; else none (the registry's capability stands).
How a runner maps it: deny -> `allowed: false`, code `rule_denied`, `details.rule.id`;
ask -> check 6 applies (an approval is needed); classify -> the rule's capability replaces
the registry's for checks 1-10; none -> what the registry and profile say. The call's
`shell_arg`, `path_args` and `url_args` are the registry entry's (`shell: {"arg": ...}`,
`path_args`, `url_args`), `sandbox_root` is `context.sandbox_root` and `home` is
`context.variables.HOME`.

Free of the core and of HTTP: it reads and checks the files only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SHELL_CASES_DIR = Path(__file__).resolve().parent / "cases" / "shell"
NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
VERDICTS = ("deny", "ask", "classify", "none")
CALL_FIELDS = {"tool", "shell_arg", "sandbox_root", "home", "path_args", "url_args", "args",
               "plan", "context"}
EXPECT_FIELDS = {"verdict", "rule", "matched", "matches"}


def _check_call(call: Any, where: str) -> None:
    if not isinstance(call, dict) or set(call) - CALL_FIELDS:
        raise ValueError(f"{where}: call fields are {sorted(CALL_FIELDS)}")


def _check_case(case: Any, where: str, rules: dict[str, Any]) -> None:
    if not isinstance(case, dict) or not {"name", "expect"} <= set(case) \
            or set(case) - {"name", "expect", "command", "call"}:
        raise ValueError(f"{where}: a case has name, expect, and command and/or call")
    if not isinstance(case["name"], str) or not NAME.match(case["name"]):
        raise ValueError(f"{where}: name {case.get('name')!r} is not kebab-case")
    if "call" in case:
        _check_call(case["call"], where)
    expect = case["expect"]
    if not isinstance(expect, dict) or set(expect) - EXPECT_FIELDS:
        raise ValueError(f"{where}: expect fields are {sorted(EXPECT_FIELDS)}")
    if expect.get("verdict") not in VERDICTS:
        raise ValueError(f"{where}: verdict is one of {VERDICTS}")
    if (expect["verdict"] == "none") is ("rule" in expect):
        raise ValueError(f"{where}: a rule is named exactly when the verdict is not none")
    for rule in [expect.get("rule"), *expect.get("matches", [])]:
        if rule is not None and rule not in rules:
            raise ValueError(f"{where}: rule {rule!r} is not in the file's rules")


def load_rule_cases() -> list[tuple[str, dict[str, Any]]]:
    """(id, case) pairs; id is `<file stem>/<case name>`. Each case holds the file's
    `rules`, and `call`: the file's call updated with the case's, `args` holding the
    command. ValueError for a malformed file or a duplicate name within a file."""
    pairs: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(SHELL_CASES_DIR.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or set(doc) != {"description", "rules", "call", "cases"}:
            raise ValueError(f"{path.name}: a file has description, rules, call, cases")
        _check_call(doc["call"], path.name)
        names: set[str] = set()
        for i, case in enumerate(doc["cases"]):
            where = f"{path.name}[{i}]"
            _check_case(case, where, doc["rules"])
            if case["name"] in names:
                raise ValueError(f"{where}: duplicate name {case['name']!r}")
            names.add(case["name"])
            call = {**doc["call"], **case.get("call", {})}
            args = dict(call.get("args") or {})
            if "command" in case:
                args[call["shell_arg"]] = case["command"]
            call["args"] = args
            pairs.append((f"{path.stem}/{case['name']}",
                          {"rules": doc["rules"], "call": call, "expect": case["expect"]}))
    return pairs
