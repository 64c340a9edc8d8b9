"""`toolgate approvals list|show|grant|reject|cancel`: the approvals queue of a running
service (SPEC §10), for an approver key in --token / TOOLGATE_TOKEN."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlencode

import typer

from app.cli.http import DEFAULT_URL, call

approvals = typer.Typer(help="List, show, grant, reject and cancel approvals (docs/approvals.md).",
                        no_args_is_help=True)

Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN",
                                           help="An approver's (or admin's) API key")]
Json = Annotated[bool, typer.Option("--json", help="Print the service's JSON answer")]
Id = Annotated[str, typer.Argument(help="The approval's id")]


def _json(value: Any) -> None:
    import orjson

    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def _line(a: dict[str, Any]) -> str:
    who = a["decided_by"] or a["requested_by"] or "-"
    return (f"{a['approval_id']}  {a['state']:<9}  {a['project'] or '-'}  {a['plan_id']}  "
            f"{a['tool']}  by {who}  expires {a['expires_at']}")


def _show(a: dict[str, Any]) -> None:
    import orjson

    for field in ("approval_id", "state", "project", "plan_id", "action_id", "tool",
                  "requested_by", "requested_at", "decided_by", "decided_at", "note",
                  "reason", "expires_at", "uses_left", "request_sha256"):
        typer.echo(f"{field:>15}: {a.get(field) if a.get(field) is not None else '-'}")
    typer.echo(f"{'request':>15}: "
               + orjson.dumps(a["request"], option=orjson.OPT_INDENT_2).decode()
               .replace("\n", "\n" + " " * 17))
    if a["decision_ids"]:
        typer.echo(f"{'decision_ids':>15}: {', '.join(a['decision_ids'])}")


def _path(approval_id: str, verb: str = "") -> str:
    return f"/v1/approvals/{quote(approval_id, safe='')}" + (f"/{verb}" if verb else "")


@approvals.command("list")
def list_(
    state: Annotated[str | None, typer.Option(
        help="pending, granted, rejected, cancelled, expired or used")] = "pending",
    project: Annotated[str | None, typer.Option(help="Only this project")] = None,
    plan_id: Annotated[str | None, typer.Option(help="Only this plan")] = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool")] = None,
    all_states: Annotated[bool, typer.Option("--all", help="Every state")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 100,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: Json = False,
) -> None:
    """Approvals newest first (pending ones unless --state or --all)."""
    query = {"state": None if all_states else state, "project": project, "plan_id": plan_id,
             "tool": tool, "limit": limit}
    path = "/v1/approvals?" + urlencode({k: v for k, v in query.items() if v is not None})
    answer = call("GET", url, path, token=token)
    if as_json:
        _json(answer)
        return
    for item in answer["items"]:
        typer.echo(_line(item))
    if not answer["items"]:
        typer.echo("no approvals", err=True)


@approvals.command("show")
def show(
    approval_id: Id,
    wait: Annotated[int | None, typer.Option(
        min=1, max=60, help="Wait up to this many seconds for a pending one to be decided")]
    = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: Json = False,
) -> None:
    """One approval, with the request it is bound to."""
    path = _path(approval_id) + (f"?wait={wait}" if wait else "")
    answer = call("GET", url, path, token=token, timeout=30.0 + (wait or 0))
    _json(answer) if as_json else _show(answer)


@approvals.command("grant")
def grant(
    approval_id: Id,
    note: Annotated[str | None, typer.Option(help="Why (kept in the audit record)")] = None,
    ttl_seconds: Annotated[int, typer.Option(min=1, max=86400,
                                             help="How long the grant lasts")] = 900,
    uses: Annotated[int, typer.Option(min=1, max=100,
                                      help="How many calls it allows")] = 1,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: Json = False,
) -> None:
    """Grant a pending approval: the agent's same request is then allowed."""
    body: dict[str, Any] = {"ttl_seconds": ttl_seconds, "uses": uses}
    if note is not None:
        body["note"] = note
    answer = call("POST", url, _path(approval_id, "grant"), token=token, json=body)
    _json(answer) if as_json else typer.echo(
        f"granted {answer['approval_id']}: {answer['uses_left']} use(s) until "
        f"{answer['expires_at']}")


@approvals.command("reject")
def reject(
    approval_id: Id,
    reason: Annotated[str, typer.Option(help="Why (the agent is told)")],
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: Json = False,
) -> None:
    """Reject a pending approval: the same request stays denied for the plan's life."""
    answer = call("POST", url, _path(approval_id, "reject"), token=token,
                  json={"reason": reason})
    _json(answer) if as_json else typer.echo(f"rejected {answer['approval_id']}")


@approvals.command("cancel")
def cancel(
    approval_id: Id,
    reason: Annotated[str | None, typer.Option(help="Why")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: Json = False,
) -> None:
    """Withdraw a pending or granted approval."""
    answer = call("POST", url, _path(approval_id, "cancel"), token=token,
                  json={"reason": reason} if reason else {})
    _json(answer) if as_json else typer.echo(f"cancelled {answer['approval_id']}")
