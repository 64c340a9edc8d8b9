"""Servers under test: start one on a free loopback port, wait until it answers, read its
workers' memory, stop it. Databases: a fresh SQLite file or a fresh Postgres database."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx

HOST = "127.0.0.1"
PG_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_DATABASE = "toolgate_bench"  # a scenario's database: toolgate_bench_<scenario>


def pg_url(database: str) -> str:
    return f"postgresql+asyncpg://postgres@127.0.0.1:5432/{database}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def clean_env(**settings: str) -> dict[str, str]:
    """The caller's environment without its TOOLGATE_* settings, plus ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(settings)
    return env


class Server:
    """One uvicorn server (bare or toolgate) in its own process group."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], *, port: int,
                 log: Path, cwd: Path, token: str) -> None:
        self.name, self.command, self.env, self.port = name, command, env, port
        self.log, self.cwd, self.token = log, cwd, token
        self.url = f"http://{HOST}:{port}"
        self.agent_token: str | None = None  # the load's key (toolgate), set once prepared
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command, env=self.env, cwd=self.cwd,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}; "
                                   f"see {self.log}:\n{self.tail()}")
            try:
                httpx.get(self.url + "/healthz", timeout=1.0,
                          headers={"Authorization": f"Bearer {self.token}"})
                if len(self.worker_pids()) >= self.expected_workers():
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {timeout}s; see {self.log}")

    def expected_workers(self) -> int:
        if "--workers" in self.command:
            count = int(self.command[self.command.index("--workers") + 1])
            return count if count > 1 else 1
        return 1

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def worker_pids(self) -> list[int]:
        """With one worker uvicorn serves in the process itself; with more, in spawned
        children (the parent only supervises)."""
        assert self.process is not None
        children = _descendants(self.process.pid)
        workers = [pid for pid in children if b"spawn_main" in _cmdline(pid)]
        return workers or [self.process.pid]

    def rss_mib(self) -> list[float]:
        return [round(_rss_kib(pid) / 1024, 1) for pid in self.worker_pids()]

    def stop(self, timeout: float = 20.0) -> None:
        """SIGINT, as Ctrl-C: uvicorn shuts down gracefully and the decision log drains."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# --- databases -------------------------------------------------------------------------

def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path.resolve()}"


def postgres_unreachable() -> str | None:
    """None when Postgres answers at 127.0.0.1:5432 as user postgres, else why not."""
    try:
        asyncio.run(_pg(lambda conn: conn.fetchval("SELECT 1")))
    except Exception as exc:  # any failure: the scenarios are skipped with this reason
        return f"{type(exc).__name__}: {exc}"
    return None


# What a Postgres log figure depends on beyond toolgate: whether a commit is durable at all,
# and the WAL settings behind its stalls (docs/deployment.md, docs/performance.md).
PG_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes", "wal_init_zero",
               "max_wal_size", "min_wal_size", "checkpoint_timeout", "shared_buffers",
               "autovacuum")
# The values under which a committed decision can be lost with the machine's power
# (synchronous_commit = local still flushes locally; only off answers before the flush).
PG_NOT_DURABLE = {"fsync": {"off"}, "synchronous_commit": {"off"},
                  "full_page_writes": {"off"}}


def postgres_settings() -> dict[str, str]:
    """The server's version and PG_SETTINGS, as `SHOW` gives them (units included)."""
    async def read(conn) -> dict[str, str]:  # type: ignore[no-untyped-def]
        found = {"server_version": await conn.fetchval("SHOW server_version")}
        for name in PG_SETTINGS:
            found[name] = await conn.fetchval(f"SHOW {name}")
        return found

    return asyncio.run(_pg(read))


def not_durable(settings: dict[str, str]) -> list[str]:
    """The settings under which the server's commits do not survive a power loss."""
    return [f"{name}={settings[name]}" for name, lost in PG_NOT_DURABLE.items()
            if settings.get(name) in lost]


def recreate_postgres(database: str) -> None:
    async def recreate(conn) -> None:  # type: ignore[no-untyped-def]
        await conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {database}")

    asyncio.run(_pg(recreate))


async def _pg(action, dsn: str = PG_ADMIN_DSN):  # type: ignore[no-untyped-def]
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        return await action(conn)
    finally:
        await conn.close()


def settle(postgres: bool) -> None:
    """Start a measured run from quiet disks: write out what earlier runs (of any server:
    the rounds alternate between them) left dirty in the page cache, so that its writeback
    does not stall this run's fsyncs, and, for Postgres, checkpoint. A checkpoint inside a
    short run weighs on its p99 out of all proportion: a run's p99 was 54 and 63 ms during
    a timed one (the server's log), ~10 ms otherwise. Under sustained load the log writes
    ~20 MB of WAL a second, so Postgres checkpoints every ~25 s on its own (max_wal_size);
    docs/performance.md gives the p99 over runs that span those."""
    os.sync()
    if postgres:
        asyncio.run(_pg(lambda conn: conn.execute("CHECKPOINT")))


def logged_decisions(database_url: str) -> int:
    """How many authorize records the log holds: the durable runs must have written each."""
    query = "SELECT count(*) FROM decision_log WHERE kind = 'authorize'"
    if database_url.startswith("sqlite"):
        path = database_url.split("///", 1)[1]
        with sqlite3.connect(path) as conn:
            return conn.execute(query).fetchone()[0]
    dsn = PG_ADMIN_DSN.rsplit("/", 1)[0] + "/" + database_url.rsplit("/", 1)[1]
    return asyncio.run(_pg(lambda conn: conn.fetchval(query), dsn))
