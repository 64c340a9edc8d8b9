"""The `toolgate` command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.lazy import MARKUP, LazyGroup
from app.cli.settings import settings_or_exit, sqlite_folder_or_exit

if TYPE_CHECKING:
    from app.config import Settings

# Subcommands other than the ones below are imported on first use (app/cli/lazy.py).
cli = typer.Typer(help="toolgate: policy decisions for AI agents.", no_args_is_help=True,
                  cls=LazyGroup, rich_markup_mode=MARKUP)


def _version(value: bool) -> None:
    if value:
        from app import __version__

        typer.echo(f"toolgate {__version__}")
        raise typer.Exit()


@cli.callback()
def _main(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the version and exit")] = False,
) -> None:
    """toolgate: policy decisions for AI agents. Shell completion: `toolgate
    --install-completion` (bash, zsh, fish, PowerShell), or `--show-completion` to see it."""


@cli.command()
def migrate() -> None:
    """Bring the database schema to head (TOOLGATE_DATABASE_URL, default ./toolgate.db)."""
    from app.store import migrate as migrations

    settings = settings_or_exit()
    try:
        migrations.upgrade(settings.database_url)
        head = migrations.head(settings.database_url)
    except Exception as exc:  # unreachable or refusing database: one line, as `serve` says it
        typer.echo(f"toolgate: cannot migrate the database: {_one_line(exc)}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"schema at {head}")


def _port_free_or_exit(host: str, port: int) -> None:
    """Stops (exit 2) in one line when the port is taken, before the database is touched
    or a first admin key written: uvicorn would say so only after all that, in a log."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return  # a host uvicorn will refuse in its own words
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return
            typer.echo(f"toolgate: port {port} on {host} is in use (another server?): stop "
                       "it, or serve on another with --port or TOOLGATE_PORT", err=True)
            raise typer.Exit(2) from None


def signing_line(path: str | None, seconds: float) -> str:
    """The one line `serve` says about checkpoint signing (SPEC §16): on, with the origin
    and key id an auditor's verifier key must show, or off."""
    if path is None:
        return ("checkpoint signing is off (no TOOLGATE_LOG_SIGNING_KEY): the decision log "
                "is hash-chained, not signed")
    from app.log.checkpoints import load_signer

    verifier = load_signer(path).verifier()
    return (f"checkpoint signing is on: origin {verifier.name}, key id {verifier.hash:08x}, "
            f"every {seconds:g} s in which the log grew (key {path})")


def signing_key_problem(path: str | None) -> str | None:
    """Why the checkpoint signing key at `path` cannot be used (None: it can, or none is
    set): read once at start, so a missing or malformed key stops `serve` naming the
    variable instead of a writer that cannot sign."""
    if path is None:
        return None
    from app.log.checkpoints import load_signer
    from app.log.note import NoteError

    try:
        load_signer(path)
    except OSError as exc:
        return f"cannot read the signing key {path}: {exc.strerror}"
    except NoteError as exc:
        return (f"{path} is not a signing key ({exc}); write one with "
                "`toolgate keys signing-key new FILE`")
    return None


def _one_line(exc: BaseException) -> str:
    """An exception as one line: the innermost cause's type and message (a driver's
    "Connect call failed" rather than SQLAlchemy's wrapper and its traceback)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


@cli.command()
def serve(
    # The defaults are Settings' (app/config.py, not imported for --help: a test keeps them
    # the same), shown because the options' own default is "from the environment".
    host: Annotated[str | None, typer.Option(
        help="Bind address [TOOLGATE_HOST; default 127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="Port, 1-65535 [TOOLGATE_PORT; default 8000]")] = None,
    workers: Annotated[int | None, typer.Option(
        min=1, max=64, help="Worker processes, 1-64 [TOOLGATE_WORKERS]")] = None,
) -> None:
    """Serve the API. On the SQLite default the schema is migrated first; on PostgreSQL the
    schema must already be at head (run `toolgate migrate`), or ahead of it by migrations
    marked as served by this release (a rolling upgrade: docs/deployment.md)."""
    import uvicorn

    from app.store import migrate as migrations

    settings = settings_or_exit()
    sqlite_folder_or_exit(settings)
    _port_free_or_exit(host or settings.host, port or settings.port)
    problem = signing_key_problem(settings.log_signing_key)
    if problem is not None:  # a writer that cannot sign must not start
        typer.echo(f"toolgate: TOOLGATE_LOG_SIGNING_KEY: {problem}", err=True)
        raise typer.Exit(2)
    try:
        verdict = migrations.verdict(settings.database_url)
    except Exception as exc:  # unreachable database: say so plainly, do not start
        typer.echo(f"toolgate: cannot reach the database: {_one_line(exc)}", err=True)
        raise typer.Exit(2) from None
    if settings.is_sqlite and not verdict.ahead:
        migrations.upgrade(settings.database_url)
    elif not verdict.serves:
        typer.echo(f"toolgate: {verdict.message}", err=True)
        raise typer.Exit(2)
    elif verdict.ahead:
        typer.echo(f"toolgate: {verdict.message}", err=True)
    if settings.is_sqlite:
        _bootstrap_admin_key(settings)
    typer.echo(f"toolgate: {signing_line(settings.log_signing_key, settings.checkpoint_seconds)}",
               err=True)
    workers = workers or settings.workers
    from app.edge.limits import raise_open_file_limit
    from app.edge.logs import log_config

    raise_open_file_limit()  # the workers inherit it; the connection cap is fitted to it
    with _metrics_folder(settings), _shared_writer(settings, workers):
        uvicorn.run(
            "app.main:create_app",
            factory=True,
            host=host or settings.host,
            port=port or settings.port,
            workers=workers,
            log_level=settings.log_level,
            log_config=log_config(settings.log_format, settings.log_level),
            access_log=False,  # toolgate writes its own line (TOOLGATE_ACCESS_LOG)
            proxy_headers=False,
            **_edge_options(settings),
        )


@contextmanager
def _metrics_folder(settings: Settings) -> Iterator[None]:
    """GET /metrics sums every process's values (prometheus-client's multiprocess mode):
    the workers and the decision log's writers, which inherit the variable, each write
    theirs into a file of this private folder, removed at the end. A folder the
    environment names already (PROMETHEUS_MULTIPROC_DIR) is used as it is, and kept."""
    from app.kit.metrics import MULTIPROC_ENV

    if not settings.metrics_enabled or os.environ.get(MULTIPROC_ENV):
        yield
        return
    folder = tempfile.mkdtemp(prefix="toolgate-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


# toolgate's own HTTP protocol (app/edge/connection.py: the hot route answered in it, the
# edge's limits on every request), and uvicorn's own httptools protocol inside the edge's
# guard (app/edge/guard.py: the same deadlines, idle first wait and connection cap).
PROTOCOL = "app.edge.connection:HttpProtocol"
GUARDED = "app.edge.guard:Guarded"


def _edge_options(settings: Settings) -> dict[str, object]:
    """The HTTP protocol and the edge's settings uvicorn applies itself: the keep-alive
    wait, and under uvicorn's own protocol the connection cap as its `limit_concurrency`
    (toolgate's protocol enforces the cap and the other limits itself, the guard around
    uvicorn's protocol the deadlines and the cap: app/edge/limits.py)."""
    from app.edge.limits import connection_cap

    http = _http_protocol(settings)
    options: dict[str, object] = {"http": http,
                                  "timeout_keep_alive": settings.keep_alive_seconds}
    if http == GUARDED:
        options["limit_concurrency"] = connection_cap(settings)
    return options


def _http_protocol(settings: Settings) -> str:
    """toolgate's HTTP protocol (TOOLGATE_HTTP_PROTOCOL=toolgate, the default), or
    uvicorn's own httptools protocol, guarded (=uvicorn: for compatibility)."""
    return GUARDED if settings.http_protocol == "uvicorn" else PROTOCOL


@contextmanager
def _shared_writer(settings: Settings, workers: int) -> Iterator[None]:
    """With several workers, one decision log writer process for all of them: their
    records share commits instead of queueing for the chain head (on SQLite, for the
    database's write lock, whose busy-wait sleeps up to 100 ms). It stops after uvicorn
    returns, i.e. once every worker has drained its decisions into it."""
    if workers <= 1 or not settings.decision_log_enabled:
        yield
        return
    from app.log.writer.start import (
        WRITER_SOCKET_ENV,
        checkpoint_config,
        start_shared_writer,
    )

    folder = tempfile.mkdtemp(prefix="toolgate-")  # mode 0700: only this user connects
    socket_path = os.path.join(folder, "decision-log.sock")
    writer = start_shared_writer(
        settings.database_url, max_batch=settings.decision_log_max_batch,
        timeout=settings.decision_log_timeout_seconds,
        sqlite_synchronous=settings.sqlite_synchronous, socket_path=socket_path,
        db_timeout=settings.db_timeout_seconds,
        checkpoint=checkpoint_config(settings.log_signing_key, settings.checkpoint_seconds))
    os.environ[WRITER_SOCKET_ENV] = socket_path  # the workers inherit it
    try:
        yield
    finally:
        os.environ.pop(WRITER_SOCKET_ENV, None)
        assert writer.stdin is not None
        writer.stdin.close()
        try:
            writer.wait(timeout=settings.decision_log_timeout_seconds + 30)
        except subprocess.TimeoutExpired:
            writer.kill()
        shutil.rmtree(folder, ignore_errors=True)


def _bootstrap_admin_key(settings: Settings) -> None:
    """The first admin key: shown once on a terminal (`make run`); where standard output is
    not one (a container's log, a service manager's journal), only the file that holds it is
    named, so the secret never lands in a log."""
    from app.auth.bootstrap import bootstrap_admin_key

    made = bootstrap_admin_key(settings)
    if made is None:
        return
    if sys.stdout.isatty():
        typer.echo(f"toolgate: created the first admin key ({made.key_id}); it is printed only "
                   f"this once:\n\n    {made.secret}\n\nand saved to {made.path} (mode 0600). "
                   "Send it as 'Authorization: Bearer <key>' (docs/auth.md).\n")
    else:
        typer.echo(f"toolgate: created the first admin key ({made.key_id}) and saved it to "
                   f"{made.path} (mode 0600); not printed, as standard output is not a "
                   "terminal. Send it as 'Authorization: Bearer <key>' (docs/auth.md).")


@cli.command("safety-test")
def safety_test(
    file: Annotated[str, typer.Argument(
        metavar="FILE",
        help='Utterances that must be rejected: JSONL (a string or {"text": ...} per line) '
             "or a JSON list")],
    skill: Annotated[str, typer.Option(help="The skill whose phrases must reject them")],
    url: Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
        = "http://127.0.0.1:8000",
    token: Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="API key")] = None,
) -> None:
    """Check that a skill rejects every utterance of a safety-test file. Prints each utterance
    that was not rejected; exit 1 on any miss, 2 when the service cannot answer."""
    from urllib.parse import quote

    from app.cli.http import post_items

    report = post_items(url, f"/v1/skills/{quote(skill, safe='')}/safety-test", file,
                        token=token, key="utterances")
    for miss in report["missed"]:
        typer.echo(f"MISSED line {miss['line']}: {miss['text']}")
    typer.echo(f"skill '{report['skill']}': {report['rejected']}/{report['total']} rejected, "
               f"{len(report['missed'])} missed")
    if not report["ok"]:
        raise typer.Exit(1)


@cli.command("test")
def test_cases(
    file: Annotated[str, typer.Argument(metavar="CASES", help="Decision cases: JSONL (one "
                                        "{\"request\", \"expect\"} per line) or a JSON list")],
    url: Annotated[str, typer.Option(envvar="TOOLGATE_URL", help="Service URL")]
        = "http://127.0.0.1:8000",
    token: Annotated[str | None, typer.Option(envvar="TOOLGATE_TOKEN", help="API key")] = None,
) -> None:
    """Replay decision cases against the service's current configuration, like `opa test`
    (nothing is recorded). Exit 1 when a case fails, 2 when the service cannot answer."""
    from app.cli.http import post_items

    report = post_items(url, "/v1/test", file, token=token, key="cases")
    for result in report["results"]:
        label = result["name"] or f"line {result['line']}"
        if result["ok"]:
            typer.echo(f"PASS {label}")
            continue
        actual = result["actual"] or {}
        why = result["problem"] or (f"expected {result['expected']}, got allowed="
                                    f"{actual.get('allowed')} code={actual.get('code')}")
        typer.echo(f"FAIL {label}: {why}")
    typer.echo(f"{report['passed']} passed, {report['failed']} failed")
    if not report["ok"]:
        raise typer.Exit(1)



def main() -> None:
    cli(prog_name="toolgate")


if __name__ == "__main__":
    sys.exit(main())
