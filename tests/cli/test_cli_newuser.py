"""The command as a new user meets it (issue 35 items 10 and 11): a database it cannot reach
is one line and exit 2, out-of-range --port/--workers are refused, every help line reads as
written (no markup eaten, no jargon, no per-command completion options), and the commands
that need little import little (timings are bench's; here, what gets imported)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import _run
from tests.serving import TOOLGATE

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/toolgate"


@pytest.mark.parametrize(("args", "says"), [
    (("migrate",), "toolgate: cannot migrate the database: ConnectionRefusedError"),
    (("audit", "prune", "--before", "2020-01-01", "--yes"),
     "toolgate: cannot prune the decision log: ConnectionRefusedError"),
])
def test_an_unreachable_database_is_one_line_and_exit_2(args, says):
    r = _run(*args, env={"TOOLGATE_DATABASE_URL": UNREACHABLE})
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith(says), r.stderr


@pytest.mark.parametrize(("args", "env", "says"), [
    (("--port", "99999"), {}, "Invalid value for '--port'"),
    (("--port", "0"), {}, "Invalid value for '--port'"),
    (("--workers", "0"), {}, "Invalid value for '--workers'"),
    (("--workers", "65"), {}, "Invalid value for '--workers'"),
    ((), {"TOOLGATE_PORT": "99999"}, "toolgate: TOOLGATE_PORT: Input should be less than"),
])
def test_serve_refuses_a_port_or_worker_count_out_of_range(tmp_path, args, env, says):
    r = _run("serve", *args, env={
        "TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db", **env})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert says in r.stderr, r.stderr
    assert not (tmp_path / "x.db").exists()  # refused before anything was done


def _help_texts():  # type: ignore[no-untyped-def]
    """(command path, what, text) of every command's and option's help, lazy ones loaded."""
    import typer

    from app.cli.main import cli

    def walk(command, path):  # type: ignore[no-untyped-def]
        yield path, "help", command.help or ""
        for param in command.params:
            yield path, param.name, getattr(param, "help", None) or ""
        if hasattr(command, "list_commands"):  # typer carries its own click
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), f"{path} {name}")

    yield from walk(typer.main.get_command(cli), "toolgate")


def test_no_help_text_loses_words_to_markdown_or_names_the_spec():
    """Help is rendered as markdown (so a docstring's line breaks do not break a line
    mid-sentence): an `<origin>` outside backticks is an HTML tag there and vanishes, and
    readers of --help have no SPEC to look up."""
    bad = []
    for path, what, text in _help_texts():
        bare = re.sub(r"`[^`]*`", "", text)
        if re.search(r"<[A-Za-z_][^>]*>", bare) or "SPEC" in bare or "§" in bare:
            bad.append(f"{path} {what}: {text}")
    assert not bad, bad
    r = _run("audit", "verify", "--help", env={"COLUMNS": "200"})
    assert "(<origin>+<id>+<key>, or a file holding it)" in r.stdout, r.stdout


@pytest.mark.parametrize("command", ["apply", "export", "replay"])
def test_a_lazy_command_has_no_completion_options_of_its_own(command):
    r = _run(command, "--help", env={"COLUMNS": "200"})
    assert r.returncode == 0 and "--url" in r.stdout, r.stderr
    assert "--install-completion" not in r.stdout and "--show-completion" not in r.stdout


IMPORTS = """
import atexit, sys
HEAVY = ("sqlalchemy", "fastapi", "starlette", "uvicorn", "alembic", "asyncpg", "yaml",
         "app.main", "app.config", "app.store", "app.policy")
atexit.register(lambda: print(sorted(m for m in HEAVY if m in sys.modules), file=sys.stderr))
from app.cli.main import main
sys.argv = ["toolgate", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(("args", "allowed"), [
    (("--version",), []),
    (("approvals", "list", "--url", "http://127.0.0.1:1", "--token", "x"), []),
    (("keys", "list", "--url", "http://127.0.0.1:1", "--token", "x"), []),
])
def test_a_command_imports_only_what_it_needs(args, allowed):
    """--version and the read commands start in a fraction of a second because they load
    neither the service nor its database layer (app/cli/lazy.py)."""
    r = subprocess.run([sys.executable, "-c", IMPORTS, *args], capture_output=True,
                       text=True, timeout=60)
    assert r.stderr.strip().splitlines()[-1] == str(allowed), r.stderr


# --- item 1: `toolgate` on the PATH of a new shell (deploy/link-cli.sh, run by `make`) -------

LINK_CLI = Path(__file__).resolve().parents[2] / "deploy" / "link-cli.sh"


def _link(home: Path, path: str, **env: str) -> subprocess.CompletedProcess:
    target = Path(sys.executable).with_name("toolgate")
    return subprocess.run(["sh", str(LINK_CLI), str(target)], capture_output=True, text=True,
                          timeout=30, env={"HOME": str(home), "PATH": path, **env})


def test_make_links_the_command_into_a_folder_of_the_path(tmp_path):
    bin_ = tmp_path / ".local" / "bin"
    bin_.mkdir(parents=True)
    path = f"{bin_}:/usr/bin:/bin"
    r = _link(tmp_path, path)
    assert r.returncode == 0 and "linked" in r.stdout, r.stderr
    assert (bin_ / "toolgate").resolve() == Path(sys.executable).with_name("toolgate").resolve()
    # A new shell finds it and it runs.
    shell = subprocess.run(["sh", "-c", "command -v toolgate && toolgate --version"],
                           capture_output=True, text=True, timeout=60,
                           env={"HOME": str(tmp_path), "PATH": path})
    found, version = shell.stdout.splitlines()
    assert found == str(bin_ / "toolgate") and version.startswith("toolgate "), shell
    assert _link(tmp_path, path).stdout == ""  # again: nothing to do


def test_the_link_leaves_a_foreign_command_alone_and_says_what_to_do_without_one(tmp_path):
    bin_ = tmp_path / ".local" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "toolgate").symlink_to("/opt/toolgate-release/bin/toolgate")
    r = _link(tmp_path, f"{bin_}:/usr/bin:/bin")
    assert "is not a checkout's; not replaced" in r.stderr
    assert str((bin_ / "toolgate").readlink()) == "/opt/toolgate-release/bin/toolgate"
    r = _link(tmp_path / "nowhere", "/usr/bin:/bin")  # no writable folder of the PATH
    assert "export PATH=" in r.stdout
    r = _link(tmp_path, f"{bin_}:/usr/bin:/bin", LINK="0")
    assert r.stdout == r.stderr == ""


def test_flags_show_no_value_and_serve_shows_its_defaults():
    """Issue 45 item 10: a flag takes no value, so its help shows none (`--dry-run <bool>`
    did); `serve --help` says the host and port it binds when neither is given."""
    from app.config import Settings

    for command in (["apply"], ["audit", "prune"], ["serve"]):
        r = _run(*command, "--help", env={"COLUMNS": "200"})
        assert r.returncode == 0 and "<bool>" not in r.stdout, r.stdout
    r = _run("serve", "--help", env={"COLUMNS": "200"})
    defaults = Settings.model_fields
    assert f"[TOOLGATE_HOST; default {defaults['host'].default}]" in r.stdout, r.stdout
    assert f"[TOOLGATE_PORT; default {defaults['port'].default}]" in r.stdout, r.stdout


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/"])
def test_a_url_ending_in_v1_is_named_as_such(url):
    """Issue 45 item 11: `--url .../v1` made every call a 404 on /v1/v1/...; the command
    says so before it sends anything, and which address to give."""
    r = _run("approvals", "list", "--url", url, "--token", "tg_x")
    assert r.returncode == 2
    assert f"--url {url} ends in /v1: give the service's own address, http://127.0.0.1:9" \
        in r.stderr, r.stderr


def test_verifying_a_csv_export_says_to_export_jsonl(tmp_path):
    """Issue 45 item 11: `audit verify --file` of the CSV export said BROKEN (its header is
    not a JSON record); it says the file is CSV and which export to verify instead."""
    from app.decisions.routes import CSV_COLUMNS

    export = tmp_path / "log.csv"
    export.write_text(",".join(CSV_COLUMNS) + "\n1,d1,authorize\n")
    r = _run("audit", "verify", "--file", str(export))
    assert r.returncode == 2 and "BROKEN" not in r.stdout + r.stderr, r
    assert f"{export} is CSV" in r.stderr and "toolgate audit export -o FILE.jsonl" in r.stderr


def test_prune_without_a_database_creates_none(tmp_path):
    """Issue 45 item 11: `audit prune` on a SQLite URL whose file is not there made an
    empty database (and then failed on its missing tables); it names the path, exit 2."""
    database = tmp_path / "none.db"
    r = _run("audit", "prune", "--before", "2026-01-01T00:00:00Z", "--yes",
             env={"TOOLGATE_DATABASE_URL": f"sqlite:///{database}"})
    assert r.returncode == 2 and f"no database at {database}" in r.stderr, r.stderr
    assert not database.exists()


def test_serve_names_a_missing_sqlite_folder(tmp_path):
    """Issue 45 item 11: a SQLite URL in a folder that does not exist stops `serve` naming
    the folder (SQLite says "unable to open database file")."""
    folder = tmp_path / "not-made"
    r = _run("serve", "--port", "9", env={"TOOLGATE_DATABASE_URL": f"sqlite:///{folder}/t.db"})
    assert r.returncode == 2, r
    assert f"the folder {folder} of the SQLite database t.db does not exist" in r.stderr


def test_serve_on_a_port_in_use_says_so_in_one_line_and_writes_nothing(tmp_path):
    """Issue 45 item 11: a port in use is one line naming it, exit 2, before the database is
    made or a first admin key written (uvicorn said so only after both)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([TOOLGATE, "serve", "--port", str(port)], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path, env={
                               **os.environ, "TOOLGATE_DATABASE_URL": f"sqlite:///{tmp_path}/t.db"})
    assert r.returncode == 2, r
    assert r.stderr.strip() == (f"toolgate: port {port} on 127.0.0.1 is in use (another "
                                "server?): stop it, or serve on another with --port or "
                                "TOOLGATE_PORT"), r.stderr
    assert list(tmp_path.iterdir()) == []  # no database, no toolgate.admin-key
