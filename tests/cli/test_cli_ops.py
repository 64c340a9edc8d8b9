"""CLI conventions (docs/operations.md): --version, shell completion, and the audit
export's progress on a terminal (nothing extra when not on one)."""

from __future__ import annotations

import io
import os
import pty
import subprocess
from importlib.metadata import version

import httpx
import pytest

from app.cli.progress import Progress
from tests.cli.test_cli import TOOLGATE, _run

CAP = {"writes": False, "checkpointable": True, "unsafe": False}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_version():
    result = _run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"toolgate {version('toolgate')}"


def test_shell_completion_script():
    # typer takes the shell from the command line only with its detection off (under
    # pytest the parent process is Python, which it cannot detect)
    result = _run("--show-completion", "bash",
                  env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert result.returncode == 0
    assert "_toolgate_completion" in result.stdout and "complete " in result.stdout


def test_progress_counts_records_bytes_and_summarises_on_a_terminal():
    out = Terminal()
    progress = Progress(stream=out, live=True, interval=0)
    for chunk in (b'{"seq": 1}\n{"seq"', b': 2}\n', b'{"seq": 3}\n'):
        progress(chunk)
    progress.done()
    text = out.getvalue()
    assert "\r" in text  # redrawn in place while it runs
    summary = text.rsplit("\r\x1b[K", 1)[-1]
    assert summary.startswith("exported 3 records, 33 B in ")
    assert "records/s" in summary and summary.endswith("/s)\n")


def test_progress_csv_header_is_not_a_record():
    out = Terminal()
    progress = Progress(stream=out, live=False, header_lines=1)
    progress(b"seq,decision_id\n1,a\n2,b\n")
    progress.done()
    assert out.getvalue().startswith("exported 2 records")


def test_progress_says_nothing_off_a_terminal():
    out = io.StringIO()  # a pipe, a file, a CI log
    progress = Progress(stream=out, interval=0)
    progress(b"a\nb\n")
    progress.done()
    assert out.getvalue() == ""


@pytest.mark.slow
def test_audit_export_progress_only_on_a_terminal(tmp_path):
    from tests.serving import serve, stop

    token = "test-admin-token-for-export"
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
                       "TOOLGATE_ADMIN_TOKEN": token}, tmp_path / "serve.log")
    try:
        for _ in range(3):
            r = httpx.post(f"{url}/v1/authorize-tool", json={"tool": {"name": "t",
                           "capability": CAP}}, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200
        args = [TOOLGATE, "audit", "export", "--url", url, "--token", token]
        piped = subprocess.run([*args, "-o", str(tmp_path / "a.jsonl")], capture_output=True,
                               timeout=60)
        assert piped.returncode == 0 and piped.stderr == b""  # not a terminal: nothing
        lines = (tmp_path / "a.jsonl").read_bytes().count(b"\n")
        assert lines >= 3
        main, child = pty.openpty()
        try:
            done = subprocess.run([*args, "-o", str(tmp_path / "b.jsonl")], stderr=child,
                                  stdout=subprocess.DEVNULL, timeout=60)
            os.close(child)
            child = -1
            shown = b""
            while True:
                try:
                    data = os.read(main, 4096)
                except OSError:
                    break
                if not data:
                    break
                shown += data
        finally:
            os.close(main)
            if child >= 0:
                os.close(child)
        assert done.returncode == 0
        assert f"exported {lines} records".encode() in shown, shown
    finally:
        stop(proc)
