"""`toolgate replay`: what a candidate policy (profile, tools, skills, rules in a YAML file) would
have answered to a window of stored decisions (SPEC §12), as a table of transitions; exit 1
on the transition named by --fail-on, so a policy repository's CI can gate a change on last
week's real traffic."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from app.cli.http import DEFAULT_URL, call, fail

CANDIDATE_KEYS = ("profile", "tools", "skills", "rules")


class FailOn(StrEnum):
    DENY_TO_ALLOW = "deny_to_allow"
    ALLOW_TO_DENY = "allow_to_deny"
    ANY = "any"


def read_candidate(file: str) -> dict[str, Any]:
    """The candidate in `file` (YAML: profile:, tools:, skills:, rules:); exit 2 naming the
    problem."""
    from app.policyfile.yamlfile import PolicyFileError, read_yaml

    try:
        with open(file, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read {file}: {exc}") from None
    try:
        data, lines = read_yaml(text, file)
    except PolicyFileError as exc:
        raise fail(str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise fail(f"{file}: a candidate is a mapping with {', '.join(CANDIDATE_KEYS)}")
    unknown = [key for key in data if key not in CANDIDATE_KEYS]
    if unknown:
        line = lines.get((unknown[0],))
        raise fail(f"{file}:{line or 1}: unknown key '{unknown[0]}' (a candidate has "
                   f"{', '.join(CANDIDATE_KEYS)})")
    return data


def failed(answer: dict[str, Any], fail_on: FailOn | None) -> bool:
    if fail_on is None:
        return False
    if fail_on is FailOn.ANY:
        return answer["changed"] > 0
    return answer[fail_on.value] > 0


def render(answer: dict[str, Any]) -> list[str]:
    """The answer as lines a person reads in a CI log."""
    lost = answer["unreplayable"]
    lines = [f"replayed {answer['checked']} decisions from {answer['from']} "
             f"to {answer['to'] or '-'}"
             + (" (TRUNCATED: TOOLGATE_REPLAY_MAX_RECORDS reached)"
                if answer["truncated"] else ""),
             f"unreplayable: {lost['masked']} masked, {lost['legacy']} legacy"
             + (f", {lost['ledger']} ledger" if lost.get("ledger") else ""),
             f"changed: {answer['changed']} (allow -> deny {answer['allow_to_deny']}, "
             f"deny -> allow {answer['deny_to_allow']}, deny code changed "
             f"{answer['code_changed']})"]
    if answer["transitions"]:
        width = max(len(t["from"]) for t in answer["transitions"]) + 2
        width_to = max(len(t["to"]) for t in answer["transitions"]) + 2
        lines += ["", f"  {'from':<{width}}{'to':<{width_to}}count"]
        lines += [f"  {t['from']:<{width}}{t['to']:<{width_to}}{t['count']}"
                  for t in answer["transitions"]]
    if answer["examples"]:
        lines += ["", "examples:"]
        for e in answer["examples"]:
            before = "allow" if e["before"]["allowed"] else e["before"]["code"]
            after = "allow" if e["after"]["allowed"] else e["after"]["code"]
            lines.append(f"  {e['decision_id']}  {e['tool']}  plan {e['plan_id'] or '-'}: "
                         f"{before} -> {after}")
    return lines


def replay(
    file: Annotated[str, typer.Option("-f", "--file",
                                      help="candidate.yaml: profile:, tools:, skills:, rules:")],
    since: Annotated[str, typer.Option(help="Start of the window (RFC 3339)")],
    until: Annotated[str | None, typer.Option(help="End of the window (default: now)")] = None,
    project: Annotated[str | None, typer.Option(help="Only this project")] = None,
    plan_id: Annotated[str | None, typer.Option(help="Only this plan")] = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool")] = None,
    fail_on: Annotated[FailOn | None, typer.Option(
        help="Exit 1 when this transition occurs")] = None,
    examples: Annotated[int, typer.Option(min=0, max=1000,
                                          help="Changed decisions to show")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON answer")] = False,
    url: Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")] = DEFAULT_URL,
    token: Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN",
                                              help="An auditor's (or admin's) API key")] = None,
) -> None:
    """Replay stored decisions under a candidate policy (POST /v1/replay). Exit 1 when
    --fail-on's transition occurs, 2 when the service cannot answer or the file is bad."""
    body: dict[str, Any] = {"since": since, "until": until, "project": project,
                            "plan_id": plan_id, "tool": tool,
                            "candidate": read_candidate(file), "examples": examples}
    answer = call("POST", url, "/v1/replay", token=token, timeout=300.0,
                  json={k: v for k, v in body.items() if v is not None})
    if as_json:
        import orjson

        typer.echo(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode())
    else:
        for line in render(answer):
            typer.echo(line)
    if failed(answer, fail_on):
        typer.echo(f"toolgate: {fail_on} transitions occur (--fail-on {fail_on})", err=True)
        raise typer.Exit(1)
