"""`toolgate hook claude-code|gemini-cli`: command hooks (SPEC §15), for hosts that run a
command per hook (stdin in, stdout out) rather than calling an HTTP hook.

Each reads the hook body on stdin, asks the running service's POST /v1/hooks/claude-code
(Gemini CLI's body translated first, app/hooks/gemini.py) and prints the answer. A deny, and
any failure to get an answer (no service, an error, a malformed answer), exits 2 with the
reason on stderr: both agents read exit code 2 as "blocked", where any other failure of a
hook lets the call run.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any
from urllib.parse import urlencode

import typer

from app.cli.http import DEFAULT_URL

hook = typer.Typer(help="Command hooks for coding agents (docs/coding-agents.md).",
                   no_args_is_help=True)

BLOCKED = 2
Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="An agent's API key")]
Action = Annotated[str | None, typer.Option(
    envvar="TOOLGATE_HOOK_ACTION", help="One plan per agent session, from this action")]
PlanId = Annotated[str | None, typer.Option(
    "--plan-id", envvar="TOOLGATE_HOOK_PLAN_ID", help="A fixed plan for every call")]
Timeout = Annotated[float, typer.Option(help="Seconds to wait for the service")]
Gateway = Annotated[list[str] | None, typer.Option(
    help="An MCP server (as the agent names it) that is a toolgate MCP gateway: it decides "
         "its calls itself (repeatable)")]


def _blocked(reason: str) -> typer.Exit:
    typer.echo(reason, err=True)
    return typer.Exit(BLOCKED)


def _ask(raw: bytes, *, url: str, token: str | None, action: str | None,
         plan_id: str | None, timeout: float, gateway: list[str] | None) -> dict[str, Any]:
    """The service's answer to one hook body; raises typer.Exit(2) when there is none."""
    import httpx
    import orjson

    query = [(k, v) for k, v in (("action", action), ("plan_id", plan_id)) if v is not None]
    query += [("gateway", name) for name in gateway or ()]
    target = url.rstrip("/") + "/v1/hooks/claude-code?" + urlencode(query)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    unavailable = "ToolgateUnavailableError: no decision could be had, so the call is blocked"
    try:
        response = httpx.post(target, content=raw, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise _blocked(f"{unavailable}: cannot reach {url}: {exc}") from None
    if response.status_code != 200:
        raise _blocked(f"{unavailable}: {url} answered {response.status_code}: "
                       f"{response.text[:500]}")
    try:
        answer = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        raise _blocked(f"{unavailable}: the answer is not a JSON object")
    return answer


def _print(answer: dict[str, Any]) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(answer).decode() + "\n")
    sys.stdout.flush()


@hook.command("claude-code")
def claude_code(url: Url = DEFAULT_URL, token: Token = None, action: Action = None,
                plan_id: PlanId = None, timeout: Timeout = 30.0,
                gateway: Gateway = None) -> None:
    """Claude Code's PreToolUse/PostToolUse command hook. Prints the answer; on a deny
    (or no answer) exits 2 with the reason on stderr."""
    answer = _ask(sys.stdin.buffer.read(), url=url, token=token, action=action,
                  plan_id=plan_id, timeout=timeout, gateway=gateway)
    specific = answer.get("hookSpecificOutput") or {}
    if specific.get("permissionDecision") == "deny" or answer.get("decision") == "block":
        raise _blocked(specific.get("permissionDecisionReason") or answer.get("reason")
                       or "denied by toolgate")
    _print(answer)


@hook.command("gemini-cli")
def gemini_cli(url: Url = DEFAULT_URL, token: Token = None, action: Action = None,
               plan_id: PlanId = None, timeout: Timeout = 30.0,
               gateway: Gateway = None) -> None:
    """Gemini CLI's BeforeTool/AfterTool command hook, on the same mapping. Prints Gemini
    CLI's answer; on a deny (or no answer) exits 2 with the reason on stderr."""
    import orjson

    from app.hooks import gemini

    raw = sys.stdin.buffer.read()
    try:
        body = orjson.dumps(gemini.to_claude(orjson.loads(raw)))
    except orjson.JSONDecodeError:
        body = raw  # not JSON: the service says so, as a deny
    answer = _ask(body, url=url, token=token, action=action, plan_id=plan_id,
                  timeout=timeout, gateway=gateway)
    out, blocked = gemini.from_claude(answer)
    if blocked is not None:
        _print(out)
        raise _blocked(blocked)
    _print(out)
