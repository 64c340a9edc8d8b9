"""`toolgate hook <agent>`: command hooks (SPEC §15, §20), for agents that run a command
per hook (stdin in, stdout out); one command per agent of app/hooks/agents.py.

Each reads the hook body on stdin, asks the running service's POST /v1/hooks/claude-code
(the agent's body translated first) and prints the agent's form of the answer. It exits 0
only when it holds a well-formed allow (or ask, or a PostToolUse's `{}`) from the service
(app/hooks/command.py); a deny, and any failure to get such an answer (no service, an
error, a malformed, slow or dripping answer, a key file it cannot use) exits 2 with the
reason on stderr: every agent reads 2 as "blocked", where any other failure of a hook, a
timeout included, lets the call run. So the whole command is bounded by `--deadline`,
which the documented settings keep below the agent's own hook timeout.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, NoReturn
from urllib.parse import urlencode

import orjson
import typer

from app.cli.http import DEFAULT_URL
from app.hooks import command
from app.hooks.agents import AGENTS, Agent
from app.hooks.command import Verdict

hook = typer.Typer(help="Command hooks for coding agents (docs/coding-agents.md).",
                   no_args_is_help=True)

BLOCKED = 2
MAX_ANSWER = 1 << 20  # a hook answer is a few hundred bytes
UNAVAILABLE = "ToolgateUnavailableError: no decision could be had, so the call is blocked"

Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="An agent's API key")]
KeyFile = Annotated[Path | None, typer.Option(
    envvar="TOOLGATE_KEY_FILE",
    help="A file holding the agent's API key (mode 600), for agents that strip variables "
         "named like `*TOKEN*` from a hook's environment; used instead of --token")]
Action = Annotated[str | None, typer.Option(
    envvar="TOOLGATE_HOOK_ACTION", help="One plan per agent session, from this action")]
PlanId = Annotated[str | None, typer.Option(
    "--plan-id", envvar="TOOLGATE_HOOK_PLAN_ID", help="A fixed plan for every call")]
Deadline = Annotated[float, typer.Option(
    envvar="TOOLGATE_HOOK_DEADLINE", min=0.1, max=600,
    help="Seconds for the whole hook (connect, send, every byte of the answer); past it "
         "the call is blocked. Keep it below the agent's hook timeout")]
Gateway = Annotated[list[str] | None, typer.Option(
    help="An MCP server (as the agent names it) that is a toolgate MCP gateway: it decides "
         "its calls itself (repeatable)")]
Root = Annotated[list[str] | None, typer.Option(
    help="Another absolute directory the agent may write in besides its cwd (Gemini CLI's "
         "--include-directories, its temp dir); repeatable")]


class Blocked(Exception):
    """The call is blocked, for this reason."""


def _block(reason: str) -> NoReturn:
    typer.echo(reason, err=True)
    raise typer.Exit(BLOCKED)


def _watchdog(seconds: float, agent: Agent) -> threading.Timer:
    """A hard wall-clock guard: whatever the main thread is doing (reading stdin, a
    connect, a read that gets a byte every second), at the deadline the process writes the
    agent's block and exits 2 at once. What it writes is made now, so the timer's thread
    does nothing but write and exit."""
    reason = f"{UNAVAILABLE}: no answer within the hook's deadline of {seconds:g} s"
    out = agent.output(Verdict("blocked", reason))
    stdout = orjson.dumps(out) + b"\n" if out is not None else b""

    def expire() -> None:
        try:
            if stdout:
                os.write(1, stdout)
            os.write(2, reason.encode() + b"\n")
        finally:
            os._exit(BLOCKED)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def read_key(path: Path) -> str:
    """The key in `path`: one line, in a regular file only its owner can read."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise Blocked(f"the key file {path} is not a regular file")
        if info.st_mode & 0o077:
            raise Blocked(f"the key file {path} can be read or changed by others (mode "
                          f"{stat.S_IMODE(info.st_mode):o}): run chmod 600 {path}")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise Blocked(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise Blocked(f"the key file {path} is not UTF-8 text") from None
    key = text.strip()
    if not key or any(c.isspace() for c in key) or len(key) > 4096:
        raise Blocked(f"the key file {path} does not hold one key on one line")
    return key


def ask(raw: bytes, *, url: str, key: str | None, query: list[tuple[str, str]],
        ends: float) -> bytes:
    """The service's answer (its body) to one Claude Code hook body, read by `ends` (a
    time.monotonic() value); Blocked when there is none."""
    import httpx

    target = url.rstrip("/") + "/v1/hooks/claude-code?" + urlencode(query)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"

    def left() -> float:
        remaining = ends - time.monotonic()
        if remaining <= 0:
            raise Blocked(f"{UNAVAILABLE}: no answer from {url} within the hook's deadline")
        return remaining

    try:
        with httpx.Client(timeout=left()) as client, \
                client.stream("POST", target, content=raw, headers=headers) as response:
            chunks, size = [], 0
            for chunk in response.iter_raw():  # per read bounded by left(); the total too
                size += len(chunk)
                if size > MAX_ANSWER:
                    raise Blocked(f"{UNAVAILABLE}: {url} answered more than "
                                  f"{MAX_ANSWER} bytes")
                chunks.append(chunk)
                left()
            status = response.status_code
    except Blocked:
        raise
    except Exception as exc:  # httpx's errors, and a URL it cannot use (InvalidURL)
        raise Blocked(f"{UNAVAILABLE}: cannot reach {url}: "
                      f"{str(exc) or type(exc).__name__}") from None
    body = b"".join(chunks)
    if status != 200:
        raise Blocked(f"{UNAVAILABLE}: {url} answered {status}: "
                      f"{body[:500].decode('utf-8', 'replace')}")
    return body


def run(agent: Agent, *, url: str, token: str | None, key_file: Path | None,
        action: str | None, plan_id: str | None, deadline: float,
        gateway: list[str] | None, root: list[str] | None) -> None:
    """One hook call of `agent`, start to exit."""
    ends = time.monotonic() + deadline
    guard = _watchdog(deadline, agent)
    raw = sys.stdin.buffer.read()
    try:
        body = agent.to_claude(command.strict(raw))
        sent = orjson.dumps(body)
    except (ValueError, TypeError):
        body, sent = None, raw  # not JSON, or a key twice: the service says so, as a deny
    event = command.event_of(body)
    query = [(k, v) for k, v in (("action", action), ("plan_id", plan_id)) if v is not None]
    query += [("agent", agent.name)]
    query += [("gateway", name) for name in gateway or ()]
    query += [("root", path) for path in root or ()]
    home = os.environ.get("HOME", "").rstrip("/")
    if home.startswith("/"):  # the agent's user's home: call rules resolve `~` with it
        query += [("home", home)]
    try:
        if (action is None) == (plan_id is None):  # in the command's words, not the URL's
            raise Blocked(f"{UNAVAILABLE}: toolgate hook {agent.name} needs exactly one of "
                          "--action NAME (TOOLGATE_HOOK_ACTION: one plan per session) or "
                          "--plan-id ID (TOOLGATE_HOOK_PLAN_ID: a fixed plan)")
        key = read_key(key_file.expanduser()) if key_file is not None else token
        verdict = command.verdict(ask(sent, url=url, key=key, query=query, ends=ends), event)
    except Blocked as exc:
        verdict = Verdict("blocked", str(exc))
    if verdict.outcome == "ask" and not agent.asks:  # it would run: the agent cannot ask
        verdict = Verdict("blocked", f"{verdict.reason} ({agent.name} cannot ask its user "
                                     "from a hook, so the call is blocked)")
    out = agent.output(verdict)
    guard.cancel()  # from here on, one answer is printed whole
    if out is not None:
        sys.stdout.write(orjson.dumps(out).decode() + "\n")
        sys.stdout.flush()
    if verdict.outcome == "blocked":
        _block(verdict.reason)


def _command(agent: Agent) -> None:
    def hook_command(url: Url = DEFAULT_URL, token: Token = None, key_file: KeyFile = None,
                     action: Action = None, plan_id: PlanId = None,
                     deadline: Deadline = 10.0, gateway: Gateway = None,
                     root: Root = None) -> None:
        try:
            run(agent, url=url, token=token, key_file=key_file, action=action,
                plan_id=plan_id, deadline=deadline, gateway=gateway, root=root)
        except typer.Exit:
            raise
        except BaseException as exc:  # exit 1 would let the call run: nothing escapes
            _block(f"{UNAVAILABLE}: the hook failed: {type(exc).__name__}: {exc}")

    hook_command.__doc__ = (f"{agent.help} Prints the agent's answer; exits 2 with the "
                            "reason on stderr unless it holds a well-formed allow from the "
                            "service.")
    hook.command(agent.name)(hook_command)


for _agent in AGENTS.values():
    _command(_agent)
