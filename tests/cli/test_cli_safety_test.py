"""`toolgate safety-test` against a real server (a `toolgate serve` subprocess on SQLite)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.serving import free_port, serve, stop

TOOLGATE = str(Path(sys.executable).with_name("toolgate"))
TOKEN = "test-admin-token"

# End to end: real `toolgate serve` processes. `make test` runs these last.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("cli")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'toolgate.db'}",
                       "TOOLGATE_ADMIN_TOKEN": TOKEN}, tmp / "server.log")
    try:
        r = httpx.put(f"{url}/v1/skills/shell", headers={"Authorization": f"Bearer {TOKEN}"},
                      json={
            "unsafe_phrases": ["rm -rf", "delete all documents", "format the system"]})
        assert r.status_code == 201, r.text
        yield url
    finally:
        stop(proc)


def _run(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLGATE_URL", "TOOLGATE_TOKEN")}
    return subprocess.run([TOOLGATE, "safety-test", *args, "--url", url, "--token", TOKEN],
                          env=env,
                          capture_output=True, text=True, timeout=60)


def _jsonl(path: Path, items: list[object]) -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(i) for i in items) + b"\n")
    return path


def test_a_miss_is_printed_and_exits_1(server, tmp_path):
    file = _jsonl(tmp_path / "safety_test.jsonl", [
        "RM -RF /", {"text": "please wipe every disk"}, "Delete all documents now"])
    result = _run(str(file), "--skill", "shell", url=server)
    assert result.returncode == 1, result.stderr
    assert "MISSED line 2: please wipe every disk" in result.stdout
    assert "2/3 rejected" in result.stdout


def test_all_caught_exits_0(server, tmp_path):
    file = _jsonl(tmp_path / "safety_test.jsonl", ["rm -rf ~", "Format The System please"])
    result = _run(str(file), "--skill", "shell", url=server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MISSED" not in result.stdout and "2/2 rejected" in result.stdout
    listed = tmp_path / "list.json"
    listed.write_bytes(orjson.dumps(["rm -rf /", "delete all documents"]))
    assert _run(str(listed), "--skill", "shell", url=server).returncode == 0


def test_service_errors_exit_2(server, tmp_path):
    file = _jsonl(tmp_path / "safety_test.jsonl", ["rm -rf /"])
    result = _run(str(file), "--skill", "ghost", url=server)
    assert result.returncode == 2 and "ghost" in result.stderr
    result = _run(str(file), "--skill", "shell", url=f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2 and "cannot reach" in result.stderr
    result = _run(str(tmp_path / "missing.jsonl"), "--skill", "shell", url=server)
    assert result.returncode == 2
