"""The settings the real-CLI tests run under (tests/hooks/claude_cli.py) are the ones
docs/coding-agents.md tells users to paste ("The settings to paste"), so that "gated under
the documented settings" stays true of the suite when either changes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.docblocks import blocks
from tests.hooks.claude_cli import command_hooks, http_hooks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "coding-agents.md"


def _pasted() -> list[dict]:
    """The page's JSON blocks that are whole Claude Code settings (hooks and permissions)."""
    found = []
    for block in blocks(PAGE):
        if block.lang != "json":
            continue
        try:
            doc = json.loads(block.text)
        except ValueError:
            continue
        if isinstance(doc, dict) and {"hooks", "permissions"} <= set(doc):
            found.append(doc)
    return found


def test_the_suites_settings_are_the_documented_ones() -> None:
    http, command = _pasted()[:2]
    assert http == http_hooks("http://127.0.0.1:8000", "action=coding")
    # The suite passes the URL as --url; the page takes it from TOOLGATE_URL: the same.
    tested = command_hooks("toolgate", "http://127.0.0.1:8000", "--action", "coding")
    for event in tested["hooks"].values():
        for hook in event[0]["hooks"]:
            hook["command"] = hook["command"].replace(" --url http://127.0.0.1:8000", "")
    assert command == tested
    # No allow rules of Claude Code's own: toolgate's allow is the only permission.
    assert http["permissions"]["allow"] == command["permissions"]["allow"] == []



def deadline_default() -> float:
    """`toolgate hook`'s --deadline when none is given (seconds)."""
    import typer

    from app.cli.hook import hook

    command = typer.main.get_command(hook).commands["claude-code"]  # type: ignore[attr-defined]
    [option] = [p for p in command.params if p.name == "deadline"]
    return float(option.default)


def test_the_documented_timeouts_are_above_the_hooks_deadline() -> None:
    """The command hook ends itself (exit 2, blocked) before Claude Code's own timeout,
    which Claude Code would take as a non-blocking error (SPEC §20)."""
    deadline = deadline_default()
    assert deadline == 10
    timeouts = [hook["timeout"] for doc in _pasted() for event in doc["hooks"].values()
                for entry in event for hook in entry["hooks"]]
    assert timeouts and all(t > deadline for t in timeouts)  # Claude Code: seconds


def test_the_suites_gemini_settings_are_the_documented_ones() -> None:
    """Section 9's settings are the ones tests/hooks/test_gemini_cli.py runs the real CLI
    under (the key file's path aside), their timeouts in milliseconds above the deadline."""
    from tests.hooks.gemini_cli import command_hooks as gemini_hooks
    from tests.hooks.gemini_cli import hook_command

    [documented] = [json.loads(b.text) for b in blocks(PAGE)
                    if b.lang == "json" and '"BeforeTool"' in b.text]
    tested = gemini_hooks(hook_command("toolgate", "http://127.0.0.1:8000",
                                       "~/.config/toolgate/gemini-cli.key"))
    assert documented == tested
    timeouts = [hook["timeout"] for event in documented["hooks"].values()
                for entry in event for hook in entry["hooks"]]
    assert timeouts and all(t > deadline_default() * 1000 for t in timeouts)  # ms
