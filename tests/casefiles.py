"""Decision cases as data: the loader shared by the core runner and the HTTP runner.

`tests/cases/*.json` each hold a JSON list of cases. Two kinds:

- **decision** cases (every file but `invalid.json`)::

      {"name": "unique-kebab-name",
       "request": {<stateless /v1/authorize-tool body: no plan_id>},
       "expect": {"allowed": bool, "code": str|null, "error": str|null, "check": str|null,
                  "message": "exact text"             (optional),
                  "details": {subset of deny.details}  (optional),
                  "outcomes": {"<check>": "pass"|"fail"|"skip"}  (optional, explain=true)}}

- **invalid** cases (`invalid.json`): bodies that must be rejected with 422::

      {"name": ..., "request": {...}, "expect": {"status": 422, "field": "dotted.path"}}

  `field` is the dotted location of the bad field (list indexes as numbers), e.g.
  `safety_profile.allowed_skill_categories.0` or `tool.capability.writes`.

This module is deliberately free of HTTP and of the core: it only reads and sanity-checks
the files, so any runner can use it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

CASES_DIR = Path(__file__).resolve().parent / "cases"
INVALID_FILE = "invalid.json"
NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

Kind = Literal["decision", "invalid"]


def case_files(kind: Kind) -> list[Path]:
    files = sorted(CASES_DIR.glob("*.json"))
    if kind == "invalid":
        return [f for f in files if f.name == INVALID_FILE]
    if kind == "decision":
        return [f for f in files if f.name != INVALID_FILE]
    raise ValueError(f"unknown case kind {kind!r}")


def _check_shape(case: Any, where: str, kind: Kind) -> None:
    if not isinstance(case, dict) or set(case) != {"name", "request", "expect"}:
        raise ValueError(f"{where}: a case is an object with exactly name, request, expect")
    if not isinstance(case["name"], str) or not NAME.match(case["name"]):
        raise ValueError(f"{where}: name {case.get('name')!r} is not kebab-case")
    if not isinstance(case["request"], dict) or not isinstance(case["expect"], dict):
        raise ValueError(f"{where}: request and expect must be objects")
    expect = case["expect"]
    if kind == "invalid":
        if expect.get("status") != 422 or not isinstance(expect.get("field"), str):
            raise ValueError(f"{where}: an invalid case expects status 422 and a field")
        return
    if "plan_id" in case["request"]:
        raise ValueError(f"{where}: decision cases are stateless (no plan_id)")
    required = {"allowed", "code", "error", "check"}
    optional = {"message", "details", "outcomes"}
    if not required <= set(expect) or set(expect) - required - optional:
        raise ValueError(f"{where}: expect needs {sorted(required)}, may have {sorted(optional)}")
    if expect["allowed"] is not (expect["code"] is None):
        raise ValueError(f"{where}: allowed cases have code null, denied ones a code")


def load_cases(kind: Kind = "decision") -> list[tuple[str, dict[str, Any]]]:
    """(id, case) pairs for every case of `kind`; id is `<file stem>/<case name>`.

    Raises ValueError for a malformed case or a duplicate name (names are unique across
    all files of a kind), so a typo in a case file fails loudly instead of being skipped.
    """
    pairs: list[tuple[str, dict[str, Any]]] = []
    seen: dict[str, str] = {}
    for path in case_files(kind):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path.name}: a case file is a JSON list")
        for index, case in enumerate(data):
            where = f"{path.name}[{index}]"
            _check_shape(case, where, kind)
            name = case["name"]
            if name in seen:
                raise ValueError(f"{where}: duplicate case name {name!r} (also in {seen[name]})")
            seen[name] = path.name
            pairs.append((f"{path.stem}/{name}", case))
    return pairs
