"""`toolgate apply` and `toolgate export` (issue 7): configuration as code over the HTTP API.

The file is read and validated whole first (app/policyfile/document.py), then the service's state
is read (GETs only), then the plan is made and checked against that state; only then is
anything sent, one request per change, in the plan's order. A refusal midway stops at once
and says exactly which changes were applied.

Exit codes: 0 done (or nothing to do), 1 the file is invalid (nothing was sent),
2 the service could not be read or refused a change.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import ValidationError

from app.cli.http import DEFAULT_URL, UNAVAILABLE
from app.policy.rules import RuleError
from app.policyfile.document import (
    SECTIONS,
    Change,
    Policy,
    PolicyFileError,
    State,
    dump_yaml,
    export_document,
    from_answer,
    load_policy,
    make_plan,
)

INVALID = 1
LISTS = {"profiles": "/v1/profiles", "projects": "/v1/projects", "actions": "/v1/actions",
         "tools": "/v1/tools", "skills": "/v1/skills", "rules": "/v1/rules",
         "settings": "/v1/project-settings"}
# The sections a service may be unable to list (an older one): read one by one instead.
ONE_BY_ONE = ("projects", "actions", "settings", "rules")
KEYS = {"projects": "project", "actions": "action_id", "settings": "project",
        "rules": "rule_id"}
EXPORT_HEADER = ("# toolgate configuration (`toolgate export`). Apply it with\n"
                 "#   toolgate apply -f FILE [--dry-run] [--prune]\n"
                 "# Format: docs/config-as-code.md\n")

Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="API key")]


class ServiceError(Exception):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # None: no answer, so the outcome of a change is unknown


class Service:
    """One connection pool to the service; every request carries the token."""

    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def send(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        try:
            response = self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ServiceError(f"{method} {path}: no answer from {self.url} ({exc})") from None
        if response.is_success:
            try:
                return response.status_code, response.json() if response.content else None
            except ValueError:
                raise ServiceError(f"{method} {path}: the answer is not JSON",
                                   status=response.status_code) from None
        try:
            error = response.json()["error"]
            detail = f"{error['code']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            detail = response.text[:500]
        raise ServiceError(f"{method} {path} answered {response.status_code} ({detail})",
                           status=response.status_code)


def read_state(service: Service, policy: Policy | None = None) -> State:
    """The service's configuration in normal form. A service without a list route for a
    section (404/405) is read one resource at a time for the names the file has."""
    sections: dict[str, Any] = {}
    partial = set()
    for section, path in LISTS.items():
        try:
            items = service.send("GET", path)[1]["items"]
        except ServiceError as exc:
            if exc.status not in (404, 405) or section not in ONE_BY_ONE:
                raise
            partial.add(section)
            items = _one_by_one(service, section,
                                (policy.sections.get(section) or {}) if policy else {})
        key = KEYS.get(section, "name")
        sections[section] = {item[key]: _normal(section, item) for item in items}
    sections["config"] = _normal("config", service.send("GET", "/v1/config")[1])
    return State(sections, frozenset(partial))


def _one_by_one(service: Service, section: str, names: Any) -> list[dict[str, Any]]:
    key = KEYS[section]
    found = []
    for name in names:
        change = Change("create", section, name)
        try:
            item = service.send("GET", change.path)[1]
        except ServiceError as exc:
            if exc.status == 404:
                continue
            raise
        found.append({key: name, **item})
    return found


def _normal(section: str, item: Any) -> dict[str, Any]:
    try:
        return from_answer(section, item)
    except (ValidationError, KeyError, TypeError, RuleError) as exc:
        raise ServiceError(f"unexpected {section} answer from the service: {exc}") from None


def _say(lines: list[str], *, err: bool = False) -> None:
    for line in lines:
        typer.echo(line, err=err)


def _fail(message: str, code: int = UNAVAILABLE) -> typer.Exit:
    typer.echo(f"toolgate: {message}", err=True)
    return typer.Exit(code)


def _read(file: str) -> tuple[str, str]:
    if file == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return Path(file).read_text(encoding="utf-8"), file
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"cannot read {file}: {exc}", INVALID) from None


def apply(
    file: Annotated[str, typer.Option("--file", "-f", metavar="FILE",
                                      help="Policy file (YAML); - reads standard input")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the changes, make none")]
        = False,
    prune: Annotated[bool, typer.Option(
        "--prune",
        help="Delete profiles, tools, skills and rules the file's sections no longer name")]
        = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Make the service's configuration what FILE says: profiles, config, projects, actions,
    tools, skills and project settings (docs/config-as-code.md). Idempotent: a second run
    changes nothing."""
    text, source = _read(file)
    try:
        policy = load_policy(text, source)
    except PolicyFileError as exc:
        _say([p.render(source) for p in exc.problems], err=True)
        raise _fail(f"{source} is invalid ({len(exc.problems)} problem(s)); nothing was sent",
                    INVALID) from None
    service = Service(url, token)
    try:
        try:
            state = read_state(service, policy)
            plan = make_plan(policy, state, prune=prune, source=source)
        except ServiceError as exc:
            raise _fail(f"{exc}; nothing was changed") from None
        except PolicyFileError as exc:
            _say([p.render(source) for p in exc.problems], err=True)
            raise _fail(f"{source} does not fit the service's configuration; nothing was sent",
                        INVALID) from None
        for section in sorted(state.partial):
            typer.echo(f"note: the service cannot list {section}: only those in the file were "
                       "compared" + (", none pruned" if prune else ""), err=True)
        _say(plan.render())
        if dry_run:
            typer.echo("Dry run: nothing was changed.")
            return
        _send(service, plan.changes)
    finally:
        service.close()


def _send(service: Service, changes: list[Change]) -> None:
    for index, change in enumerate(changes):
        try:
            _, answer = service.send(change.method, change.path, change.body)
        except ServiceError as exc:
            typer.echo(f"toolgate: {exc}", err=True)
            outcome = "refused" if exc.status is not None else "outcome unknown: no answer"
            done = changes[:index]
            lines = [f"Applied {len(done)} of {len(changes)} changes before the failure:"]
            lines += [f"  {c.render()[0]}" for c in done] or ["  (none)"]
            lines += ["Not applied:", f"  {change.render()[0]} ({outcome})"]
            lines += [f"  {c.render()[0]}" for c in changes[index + 1:]]
            _say(lines, err=True)
            raise typer.Exit(UNAVAILABLE) from None
        if change.section == "skills" and isinstance(answer, dict):
            for warning in answer.get("warnings", []):
                typer.echo(f"warning: skill '{change.name}': {warning}", err=True)
    if changes:
        typer.echo(f"Applied {len(changes)} change(s).")


def export(
    output: Annotated[str | None, typer.Option("--output", "-o", metavar="FILE",
                                               help="Write here instead of standard output")]
        = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Write the service's configuration as a policy file: `apply` of it changes nothing."""
    service = Service(url, token)
    try:
        state = read_state(service)
    except ServiceError as exc:
        raise _fail(str(exc)) from None
    finally:
        service.close()
    for section in sorted(state.partial):
        typer.echo(f"note: the service cannot list {section}: they are not in the export "
                   "(applying it leaves them alone)", err=True)
    text = dump_yaml(export_document(state), EXPORT_HEADER)
    if output is None or output == "-":
        typer.echo(text, nl=False)
        return
    target = Path(output)
    partial_file = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        partial_file.write_text(text, encoding="utf-8")
        partial_file.replace(target)  # never leave a half-written policy file behind
    except OSError as exc:
        partial_file.unlink(missing_ok=True)
        raise _fail(f"cannot write {output}: {exc}") from None
    counts = ", ".join(f"{len(state.sections.get(s) or {})} {s}" for s in SECTIONS
                       if s != "config" and s not in state.partial)
    typer.echo(f"wrote {output} ({counts})", err=True)
