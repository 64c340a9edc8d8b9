"""`toolgate keys create|list|revoke`: API key management on a running service (an admin
key in --token / TOOLGATE_TOKEN)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

import typer

from app.auth.roles import Role
from app.cli.http import DEFAULT_URL, call

keys = typer.Typer(help="Create, list and revoke API keys (needs an admin key).",
                   no_args_is_help=True)

Url = Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
Token = Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="Admin API key")]
Json = Annotated[bool, typer.Option("--json", help="Print the service's JSON answer")]


def _json(value: Any) -> None:
    import orjson

    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def _projects(projects: list[str] | None) -> str:
    return "all" if projects is None else ",".join(projects)


@keys.command("create")
def create(
    name: Annotated[str, typer.Option(help="What the key is for (shown in lists)")],
    role: Annotated[Role, typer.Option(help="admin, agent, approver or auditor")],
    project: Annotated[list[str] | None, typer.Option(
        "--project", help="A project the key may act in; repeat for several. "
                          "Omit for every project")] = None,
    expires_at: Annotated[str | None, typer.Option(
        help="RFC 3339 expiry, e.g. 2027-01-01T00:00:00Z (default: never)")] = None,
    stateless: Annotated[bool, typer.Option(
        "--stateless", help="May send authorize requests without a plan_id (needs every "
                            "project: no --project)")] = False,
    principal: Annotated[str | None, typer.Option(
        help="The person or service behind the key (default: the key's own id)")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: Json = False,
) -> None:
    """Create a key. The secret goes to stdout (alone, so `KEY=$(toolgate keys create ...)`
    works) and is never shown again; the rest goes to stderr."""
    body: dict[str, Any] = {"name": name, "role": role.value, "projects": project or None}
    if expires_at is not None:
        body["expires_at"] = expires_at
    if stateless:
        body["stateless"] = True
    if principal is not None:
        body["principal"] = principal
    answer = call("POST", url, "/v1/keys", token=token, json=body)
    if as_json:
        _json(answer)
        return
    stateless_note = ", stateless" if answer.get("stateless") else ""
    typer.echo(f"created key {answer['id']} ({answer['role']}{stateless_note}, projects: "
               f"{_projects(answer['projects'])}, expires: {answer['expires_at'] or 'never'}); "
               "the secret below is shown only now:", err=True)
    typer.echo(answer["key"])


def _status(key: dict[str, Any]) -> str:
    if key["revoked_at"]:
        return "revoked"
    if key["expires_at"]:
        expires = datetime.fromisoformat(key["expires_at"].replace("Z", "+00:00"))
        if expires <= datetime.now(UTC):
            return "expired"
    return "active"


@keys.command("list")
def list_keys(url: Url = DEFAULT_URL, token: Token = None, as_json: Json = False) -> None:
    """Every key (secrets are never shown; `prefix` tells them apart)."""
    answer = call("GET", url, "/v1/keys", token=token)
    if as_json:
        _json(answer)
        return
    rows = [("ID", "NAME", "ROLE", "PROJECTS", "STATELESS", "PRINCIPAL", "PREFIX", "EXPIRES",
             "STATUS")]
    rows += [(k["id"], k["name"], k["role"], _projects(k["projects"]),
              "yes" if k.get("stateless") else "no", k.get("principal") or k["id"],
              k["prefix"], k["expires_at"] or "never", _status(k)) for k in answer["items"]]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        typer.echo("  ".join(cells).rstrip())


@keys.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="The key's id (from `list`)")],
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Revoke a key; every process refuses it at once (docs/auth.md)."""
    call("DELETE", url, f"/v1/keys/{quote(key_id, safe='')}", token=token)
    typer.echo(f"revoked {key_id}")


signing_key = typer.Typer(
    help="The decision log's checkpoint signing key (docs/checkpoints.md).",
    no_args_is_help=True)
keys.add_typer(signing_key, name="signing-key")


@signing_key.command("new")
def new_signing_key(
    file: Annotated[str, typer.Argument(metavar="FILE", help="Where to write the key "
                                        "(mode 0600; an existing file is never replaced)")],
    origin: Annotated[str, typer.Option(
        help="The log's name in its checkpoints and verifier key, e.g. "
             "toolgate.example.com/log (no spaces, no '+')")] = "toolgate",
) -> None:
    """Write a new Ed25519 key for TOOLGATE_LOG_SIGNING_KEY, in the signed-note format's
    signer key text (`PRIVATE+KEY+<origin>+<hash>+<key>`, as Go's note.NewSigner reads),
    and print its verifier key (public: give it to auditors and witnesses)."""
    import os

    from app.cli.http import fail
    from app.log.note import NoteError, Signer

    try:
        signer = Signer.generate(origin)
    except NoteError as exc:
        raise fail(f"--origin: {exc}") from None
    try:
        # O_EXCL: never overwrite a key (its checkpoints would no longer verify by it).
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise fail(f"{file} exists: a signing key is never overwritten (rotate by writing "
                   "a new file and pointing TOOLGATE_LOG_SIGNING_KEY at it)") from None
    except OSError as exc:
        raise fail(f"cannot write {file}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)  # whatever the umask
        handle.write(signer.key() + "\n")
    typer.echo(f"wrote the signing key to {file}; its verifier key:", err=True)
    typer.echo(signer.verifier().key())
