"""Start a real `toolgate serve` on a free loopback port, for tests that need a process
(crash, CLI, client). Waits are bounded; the caller stops the process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

TOOLGATE = str(Path(sys.executable).with_name("toolgate"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(env: dict[str, str], log: Path, *, workers: int = 1,
          timeout: float = 180, cwd: Path | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    # Only the settings the test gives: nothing TOOLGATE_* leaks in from the environment.
    full = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    full.update({"TOOLGATE_LOG_LEVEL": "warning", **env})
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [TOOLGATE, "serve", "--port", str(port), "--workers", str(workers)],
            env=full, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"toolgate exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"toolgate not ready within {timeout}s")
        time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def decision_log_writers(root: int) -> dict[int, list[str]]:
    """The decision log writer processes below `root`: pid -> command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if stat:
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(
                int(entry.name))
    found: dict[int, list[str]] = {}
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            todo.append(pid)
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"app.log.writer" in argv:
                found[pid] = [a.decode() for a in argv if a]
    return found


@contextmanager
def replicas(env: dict[str, str], folder: Path) -> Iterator[tuple[str, str]]:
    """Two `toolgate serve` processes on one database (its URL in env): their base URLs.
    Both are stopped on the way out, and the first when the second does not start."""
    first = serve(env, folder / "a.log")
    try:
        second = serve(env, folder / "b.log")
    except BaseException:
        stop(first[0])
        raise
    try:
        yield first[1], second[1]
    finally:
        stop(first[0])
        stop(second[0])
