"""`toolgate rules import claude-code SETTINGS.json [--project P] [--dry-run]`: Claude
Code's permission rules (`permissions.deny` / `ask` / `allow` of a settings.json) as
toolgate call rules (SPEC §18, docs/rules.md), sent with an admin key. What cannot be
mapped is printed and changes nothing."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

import typer

from app.cli.http import DEFAULT_URL, call, fail

rules = typer.Typer(help="Call rules: import an agent's permission rules (docs/rules.md).",
                    no_args_is_help=True)

Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="An admin's API key")]


class Agent(StrEnum):
    CLAUDE_CODE = "claude-code"


def _read(path: str) -> dict[str, Any]:
    import orjson

    try:
        with open(path, "rb") as handle:
            data = orjson.loads(handle.read())
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise fail(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise fail(f"{path}: expected a JSON object (Claude Code's settings.json)")
    return data


@rules.command("import")
def import_(
    agent: Annotated[Agent, typer.Argument(help="Whose rules: claude-code")],
    settings: Annotated[str, typer.Argument(metavar="SETTINGS.json",
                                            help="The agent's settings file")],
    project: Annotated[str | None, typer.Option(
        help="Make them this project's rules (default: global)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the rules, send none")]
        = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Turn `permissions.deny`, `ask` and `allow` into deny, ask and classify rules (allow:
    `{unsafe: false, safety_category: safe}`). Each rule is PUT as
    `claude-code-<list>-NNN`; an entry that cannot be mapped is printed and left
    out."""
    import orjson

    from app.policy.rules.claude_import import import_claude_code

    bodies, unmappable = import_claude_code(_read(settings), project=project)
    sent = 0
    for rule_id, body in bodies.items():
        typer.echo(f"{'would put' if dry_run else 'put'} rule {rule_id}: "
                   + orjson.dumps(body).decode())
        if not dry_run:
            call("PUT", url, f"/v1/rules/{quote(rule_id, safe='')}", token=token, json=body)
            sent += 1
    for entry in unmappable:
        what = f"permissions.{entry['list']}" + (f" {entry['entry']}" if entry["entry"] else "")
        typer.echo(f"cannot map {what}: {entry['reason']}")
    typer.echo(f"{sent} rule(s) sent" if not dry_run else "dry run: nothing sent")
