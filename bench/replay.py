"""Replay throughput and memory (docs/replay.md): POST /v1/replay over a large log.

    python -m bench.replay [--rows 1000000] [--sqlite-rows 200000]

For each database: a fresh one, migrated; the varied decisions of tests/replay/corpus.py
made through the real authorize routes (about 2,900 records: every decision case, knaif's
path and gate cases, stateless and on 13 plans of three projects); then the log is filled
to `rows` records by a bulk INSERT ... SELECT that copies those records (their details,
plans, tools and verdicts) round robin under new ids. A `toolgate serve` on it answers
POST /v1/replay over the whole log twice: an empty candidate (every plan's profile read
from its lock) and a candidate profile; the server's RSS is sampled every 0.2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import threading
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import asyncpg
import httpx

from app.config import Settings
from app.store import migrate
from bench.cpu import _cpu_seconds
from tests.conftest import ADMIN_TOKEN, app_client
from tests.replay import corpus
from tests.serving import serve, stop

ADMIN = ADMIN_TOKEN  # what app_client sends
PG_DB = "toolgate_replay_bench"
PG = "postgresql://postgres@127.0.0.1:5432"
MASKED = "password,token," + corpus.MASKED_PATH_ARG
COLUMNS = ("kind, created_at, project, plan_id, action_id, tool, allowed, code, error, "
           '"check", provenance, profile_name, profile_version, latency_ms, request_id, '
           "key_id, detail, prev_hash, hash")
CANDIDATES = {"unchanged": {}, "profile": {"profile": {"require_sandbox": False,
                                                       "allow_unsafe_tools": True}}}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _seed(url: str) -> int:
    settings = Settings(database_url=url, admin_token=ADMIN, masked_keys=MASKED.split(","))
    async with app_client(settings) as client:
        return await corpus.build(client)


async def prepare_pg(rows: int) -> str:
    admin = await asyncpg.connect(f"{PG}/postgres")
    await admin.execute(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {PG_DB}")
    await admin.close()
    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{PG_DB}"
    await asyncio.to_thread(migrate.upgrade, url)
    await _seed(url)
    conn = await asyncpg.connect(f"{PG}/{PG_DB}")
    try:
        await conn.execute(
            "CREATE TEMP TABLE seeds AS SELECT row_number() OVER (ORDER BY seq) - 1 AS n, * "
            "FROM decision_log WHERE kind = 'authorize'")
        seeds = await conn.fetchval("SELECT count(*) FROM seeds")
        top = await conn.fetchval("SELECT max(seq) FROM decision_log")
        started = time.monotonic()
        await conn.execute(
            f"INSERT INTO decision_log (seq, decision_id, {COLUMNS}) "
            f"SELECT $3 + g, md5(g::text)::uuid::text, {COLUMNS} "
            "FROM generate_series(1, $1::int) g JOIN seeds s ON s.n = g % $2",
            rows - seeds, seeds, top)
        await conn.execute("UPDATE chain_head SET seq = (SELECT max(seq) FROM decision_log)")
        await conn.execute("ANALYZE decision_log")
        print(f"postgres: filled {rows - seeds} copies of {seeds} records in "
              f"{time.monotonic() - started:.0f} s")
    finally:
        await conn.close()
    return url


def prepare_sqlite(rows: int, folder: Path) -> str:
    path = folder / "replay.db"
    url = f"sqlite+aiosqlite:///{path}"
    migrate.upgrade(url)
    asyncio.run(_seed(url))
    db = sqlite3.connect(path)
    db.execute("CREATE TEMP TABLE seeds AS SELECT row_number() OVER (ORDER BY seq) - 1 AS n, "
               "* FROM decision_log WHERE kind = 'authorize'")
    seeds = db.execute("SELECT count(*) FROM seeds").fetchone()[0]
    top = db.execute("SELECT max(seq) FROM decision_log").fetchone()[0]
    started = time.monotonic()
    db.execute(
        f"WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?) "
        f"INSERT INTO decision_log (seq, decision_id, {COLUMNS}) "
        f"SELECT ? + x, 'bench-' || x, {COLUMNS} FROM g JOIN seeds s ON s.n = x % ?",
        (rows - seeds, top, seeds))
    db.execute("UPDATE chain_head SET seq = (SELECT max(seq) FROM decision_log)")
    db.commit()
    db.close()
    print(f"sqlite: filled {rows - seeds} copies of {seeds} records in "
          f"{time.monotonic() - started:.0f} s")
    return url


def _sample(pid: int, samples: list[float], done: threading.Event) -> None:
    while not done.is_set():
        samples.append(rss_mib(pid))
        time.sleep(0.2)


def measure(name: str, url: str, log: Path) -> None:
    proc, base = serve({"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": ADMIN,
                        "TOOLGATE_MASKED_KEYS": MASKED}, log)
    try:
        for label, candidate in CANDIDATES.items():
            samples: list[float] = []
            done = threading.Event()
            before = rss_mib(proc.pid)
            cpu = _cpu_seconds(proc.pid)
            threading.Thread(target=_sample, args=(proc.pid, samples, done),
                             daemon=True).start()
            started = time.monotonic()
            r = httpx.post(f"{base}/v1/replay", timeout=None,
                           headers={"Authorization": f"Bearer {ADMIN}"},
                           json={"since": "2020-01-01T00:00:00Z", "candidate": candidate})
            seconds = time.monotonic() - started
            cpu = _cpu_seconds(proc.pid) - cpu
            done.set()
            r.raise_for_status()
            a = r.json()
            read = a["checked"] + a["unreplayable"]["masked"] + a["unreplayable"]["legacy"]
            print(f"{name} {label:>9}: {read} decisions in {seconds:.1f} s = "
                  f"{read / seconds:,.0f} decisions/s; checked {a['checked']}, changed "
                  f"{a['changed']}, masked {a['unreplayable']['masked']}, legacy "
                  f"{a['unreplayable']['legacy']}, truncated {a['truncated']}; server RSS "
                  f"{before:.0f} MiB before, max {max(samples or [before]):.0f} MiB; server "
                  f"CPU {cpu:.1f} s ({read / cpu:,.0f} decisions per CPU second)")
    finally:
        stop(proc)


def _cpu_us(call: Callable[[], object], *, repeat: int = 3, number: int = 20_000) -> float:
    """Best of `repeat` runs in CPU time (time.process_time): on a shared machine, wall
    time also counts the other processes' turns."""
    timer = timeit.Timer(call, timer=time.process_time)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def shadow_cost() -> None:
    """In-process: the hot path's decoding and decision (app/authorize/service.py
    decide_with) of bench/payload.py's body on a cached plan, without any shadow, with a
    shadow on another project (the one test taken), and with its own project shadowed.
    A served request costs more (HTTP, the key, the log writer), so these ratios are the
    upper bound of what a shadow adds to it."""
    from app.authorize.service import decide_with
    from app.plans.service import PlanLock
    from app.policy.profiles import SafetyProfile
    from app.registry.service import Shadow
    from bench.core import SUMMARY, decode, fresh_registry
    from bench.payload import ACTION_ID, BODY, PLAN_ID, SAFETY_PROFILE

    registry = fresh_registry()
    lock = PlanLock(plan_id=PLAN_ID, action_id=ACTION_ID, project="bench", read_only=False,
                    safety=SafetyProfile(**SAFETY_PROFILE), summary=SUMMARY)
    masked = frozenset({"password", "token", "secret"})

    def decision() -> object:
        return decide_with(decode(BODY), lock, registry=registry, masked=masked)

    stricter = SafetyProfile(**{**SAFETY_PROFILE, "allowed_skill_categories": ["code"]})
    settings = (("no shadow", {}),
                ("another project shadowed", {"other": Shadow("next", 1, stricter)}),
                ("this project, shadow allows", {"bench": Shadow("same", 1, lock.safety)}),
                ("this project, shadow denies", {"bench": Shadow("next", 1, stricter)}))
    timings: dict[str, float] = {}
    for _ in range(5):  # interleaved rounds, the best of each: a shared machine drifts
        for label, shadows in settings:
            registry.shadows = shadows
            us = _cpu_us(decision)
            timings[label] = min(timings.get(label, us), us)
    base = timings["no shadow"]
    for label, us in timings.items():
        print(f"decode + decide_with, {label:>27}: {us:6.2f} µs  (+{us - base:5.2f} µs, "
              f"{us / base:.3f}x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000, help="Postgres log size")
    parser.add_argument("--sqlite-rows", type=int, default=200_000, help="SQLite log size")
    parser.add_argument("--shadow-only", action="store_true",
                        help="only the shadow's in-process cost")
    args = parser.parse_args()
    shadow_cost()
    if args.shadow_only:
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.sqlite_rows:
            measure("sqlite  ", prepare_sqlite(args.sqlite_rows, folder), folder / "sqlite.log")
        if args.rows:
            measure("postgres", asyncio.run(prepare_pg(args.rows)), folder / "pg.log")


if __name__ == "__main__":
    main()
