"""The knaif project's cases (tests/cases/peers/knaif.json, see its README): what toolgate
must answer for them, shared by the core runner (tests/policy/test_knaif.py) and the HTTP
runner (tests/registry/test_knaif.py).

The file holds, among others:
- `skills`: three skills with their `unsafe_phrases`;
- `must_reject` (the skills' `data/safety_test.jsonl`) and `must_not_reject` (utterances the
  skills plan or clarify), each `{"skill", "text", "substring_match", ...}` where
  `substring_match` is the phrase a plain lowercase substring match finds (or null);
- `matcher_cases`: `{"phrases" or "skill", "text", "expect"}`, `expect` being toolgate's
  answer as extracted;
- `path_cases`: `{"skill", "tool", "arg", "value", "variables", "sandbox_root", "expect"}`
  with `expect` "allow"/"deny", and `tools` giving each tool's `path_args`;
- `gate_cases`: destructive tools with `dry_run`/`confirmed`, knaif's verdict in `knaif`.

Two utterances cannot be answered by a phrase screen as the data wishes; they are named below
rather than skipped, so any other disagreement fails.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

KNAIF = Path(__file__).resolve().parent / "cases" / "peers" / "knaif.json"

# A must-reject utterance no phrase of its skill occurs in ("format drive" is not in "format
# my external drive"): knaif's model rejects it, not a pre-model screen; knaif's own phrase
# matcher misses it too (its `knaif_token_match` is null).
SCREEN_CANNOT_REJECT = {("ffmpeg", "Format my external drive.")}
# A must-pass utterance (a training example the model plans) that contains its skill's
# phrase "delete all": the io skill's phrase list rejects it, in knaif as here
# (`knaif_token_match` "delete all"). The phrase list's false positive, not the screen's.
PHRASE_LIST_REJECTS = {("io", "delete all *.tmp files in tmp")}
# Matcher cases whose extracted `expect` predates SPEC §5's whitespace rule: a double space
# or a tab between "rm" and "-rf" is now the phrase "rm -rf" (knaif rejects them too).
SPEC_5_NOW_REJECTS = {"please run rm  -rf on the media folder",
                      "please run rm\t-rf on the media folder"}


@cache
def knaif() -> dict[str, Any]:
    return json.loads(KNAIF.read_text())


def phrases(skill: str) -> list[str]:
    return next(s["unsafe_phrases"] for s in knaif()["skills"] if s["name"] == skill)


def utterances() -> list[tuple[str, str, bool, str | None]]:
    """(skill, text, rejected?, the phrase that rejects it) for every must-reject and
    must-pass utterance, as toolgate's screen must answer."""
    out = []
    for case in knaif()["must_reject"]:
        key = (case["skill"], case["text"])
        out.append((*key, key not in SCREEN_CANNOT_REJECT, case["substring_match"]))
    for case in knaif()["must_not_reject"]:
        key = (case["skill"], case["text"])
        out.append((*key, key in PHRASE_LIST_REJECTS, case["substring_match"]))
    return out


def matcher_cases() -> list[tuple[list[str], str, bool]]:
    """(phrases, text, rejected?)."""
    return [(case["phrases"] or phrases(case["skill"]), case["text"],
             case["expect"] or case["text"] in SPEC_5_NOW_REJECTS)
            for case in knaif()["matcher_cases"]]


def path_args(skill: str, tool: str) -> list[str]:
    return next(t["path_args"] for t in knaif()["tools"]
                if t["skill"] == skill and t["name"] == tool)


def tool(skill: str, name: str) -> dict[str, Any]:
    return next(t for t in knaif()["tools"] if t["skill"] == skill and t["name"] == name)
