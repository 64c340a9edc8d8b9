"""The rule set examples/claude-code.yaml ships is the one tests/cases/shell/claude-code.json
runs (so the corpus tests what users adopt), and its registry lets the rules see the calls."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "claude-code.yaml"
CORPUS = ROOT / "tests" / "cases" / "shell" / "claude-code.json"


def _example() -> dict:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert "rules" in doc, "examples/claude-code.yaml ships a rules: section (issue 41 item 7)"
    return doc


def test_the_example_ships_the_corpus_rules() -> None:
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))["rules"]
    assert _example()["rules"] == corpus


def test_the_example_registry_gives_the_rules_what_they_read() -> None:
    tools = _example()["tools"]
    assert tools["Bash"]["shell"] == {"arg": "command"}
    for name in ("Read", "Edit", "Write", "MultiEdit"):
        assert tools[name]["path_args"] == ["file_path"]
    assert "url" in tools["WebFetch"]["url_args"]
