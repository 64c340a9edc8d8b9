"""`toolgate safety-test` against a real server (a `toolgate serve` subprocess on SQLite)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

TOOLGATE = str(Path(sys.executable).with_name("toolgate"))
TOKEN = "test-admin-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("cli")
    port = _free_port()
    env = {**os.environ, "TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'toolgate.db'}",
           "TOOLGATE_LOG_LEVEL": "warning", "TOOLGATE_ADMIN_TOKEN": TOKEN}
    env.pop("TOOLGATE_URL", None)
    env.pop("TOOLGATE_TOKEN", None)
    log = open(tmp / "server.log", "wb")  # closed in the finally below
    proc = subprocess.Popen([TOOLGATE, "serve", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {(tmp / 'server.log').read_text()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("server did not answer /healthz within 60 s")
            time.sleep(0.1)
        r = httpx.put(f"{url}/v1/skills/shell", headers={"Authorization": f"Bearer {TOKEN}"},
                      json={
            "unsafe_phrases": ["rm -rf", "delete all documents", "format the system"]})
        assert r.status_code == 201, r.text
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


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
    result = _run(str(file), "--skill", "shell", url=f"http://127.0.0.1:{_free_port()}")
    assert result.returncode == 2 and "cannot reach" in result.stderr
    result = _run(str(tmp_path / "missing.jsonl"), "--skill", "shell", url=server)
    assert result.returncode == 2
