"""The operators' page's reads on a large log (docs/ui.md "At scale"): one decision, a page
of 100, and the overview's stats, against a real `toolgate serve`, on SQLite and Postgres.

    .venv/bin/python bench/ui_reads.py [--records 1000000] [--backend sqlite|postgres|both]

The log is filled by bulk insert (SQL, 30 days, 50 projects, 200 tools, a quarter denied;
the hash chain is not valid: nothing here verifies it). Each figure is the median of
sequential requests on one keep-alive connection, printed beside `GET /healthz` on the
same server in the same run (the HTTP floor), as a ratio."""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.serving import serve, stop  # noqa: E402

TOKEN = "bench-ui-token"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"

SQLITE_FILL = """
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < :n)
INSERT INTO decision_log (seq, decision_id, kind, created_at, project, plan_id, action_id,
  tool, allowed, code, error, "check", provenance, latency_ms, detail, prev_hash, hash)
SELECT n, printf('%08x-0000-4000-8000-%012x', n, n), 'authorize',
  strftime('%Y-%m-%d %H:%M:%f', 'now', printf('-%d seconds', (:n - n) * 2592000 / :n)),
  'project-' || (n % 50), 'plan-' || (n % 20000), 'action-' || (n % 500), 'tool-' || (n % 200),
  (n % 4) <> 0,
  CASE WHEN n % 4 = 0 THEN (CASE (n / 4) % 4 WHEN 0 THEN 'read_only'
    WHEN 1 THEN 'sandbox_required' WHEN 2 THEN 'unsafe_tool' ELSE 'retry_limit_exceeded' END) END,
  CASE WHEN n % 4 = 0 THEN 'ToolSandboxRequiredError' END,
  CASE WHEN n % 4 = 0 THEN 'sandbox' END,
  'project', 0.05, '{"layer":"runtime"}', printf('%064d', 0), printf('%064d', 0)
FROM g
"""

PG_FILL = """
INSERT INTO decision_log (seq, decision_id, kind, created_at, project, plan_id, action_id, tool,
  allowed, code, error, "check", provenance, latency_ms, detail, prev_hash, hash)
SELECT g, md5(g::text)::uuid::text, 'authorize',
  now() - interval '30 days' + (g * (interval '30 days' / $1)),
  'project-' || (g % 50), 'plan-' || (g % 20000), 'action-' || (g % 500), 'tool-' || (g % 200),
  (g % 4) <> 0,
  CASE WHEN g % 4 = 0 THEN (ARRAY['read_only', 'sandbox_required', 'unsafe_tool',
    'retry_limit_exceeded'])[1 + (g/4) % 4] END,
  CASE WHEN g % 4 = 0 THEN 'ToolSandboxRequiredError' END, CASE WHEN g % 4 = 0 THEN 'sandbox' END,
  'project', 0.05, '{"layer":"runtime"}', repeat('0', 64), repeat('0', 64)
FROM generate_series(1, $1::int) g
"""


def fill_sqlite(path: Path, records: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute(SQLITE_FILL.replace(":n", str(records)))
    conn.execute("UPDATE chain_head SET seq = ? WHERE id = 1", (records,))
    conn.commit()
    conn.execute("ANALYZE")
    conn.close()


async def fill_postgres(url: str, records: int) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(PG_FILL, records)
        await conn.execute("UPDATE chain_head SET seq = $1 WHERE id = 1", records)
        await conn.execute("SELECT brin_summarize_new_values('ix_decision_log_created_at')")
        await conn.execute("VACUUM ANALYZE decision_log")
    finally:
        await conn.close()


def median_ms(client: httpx.Client, path: str, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        r = client.get(path)
        times.append(time.perf_counter() - started)
        assert r.status_code == 200, (path, r.status_code, r.text[:200])
    return statistics.median(times) * 1000


def measure(url: str, records: int) -> list[tuple[str, float, int]]:
    one = f"{records // 2:08x}-0000-4000-8000-{records // 2:012x}"
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                      timeout=60) as c:
        items = c.get("/v1/decisions?limit=1").json()["items"]
        one = items[0]["decision_id"] if items else one
        day = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 86400))
        week = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 7 * 86400))
        cases = [
            ("GET /healthz (the floor)", "/healthz", 200),
            ("one decision", f"/v1/decisions/{one}", 200),
            ("a page of 100", "/v1/decisions?limit=100", 100),
            ("a page of 100, one code", "/v1/decisions?limit=100&code=unsafe_tool", 100),
            ("overview: day series by hour", f"/v1/decisions/stats?since={day}&bucket=hour", 10),
            ("overview: day by code", f"/v1/decisions/stats?since={day}&group_by=code", 10),
            ("overview: week series by hour", f"/v1/decisions/stats?since={week}&bucket=hour",
             5),
            ("whole log by code and hour",
             "/v1/decisions/stats?group_by=code&bucket=hour", 5),
        ]
        for _, path, _ in cases[:4]:
            c.get(path)  # warm
        # The first stats request counts every hour of the log (app/decisions/rollups.py):
        # timed once, apart; the figures below are what every later request costs.
        started = time.perf_counter()
        c.get(cases[-1][1]).raise_for_status()
        cold = ("first stats request (counts the hours)", (time.perf_counter() - started) * 1000, 1)
        for _, path, _ in cases[4:]:
            c.get(path)
        return [(name, median_ms(c, path, n), n) for name, path, n in cases] + [cold]


def report(backend: str, records: int, rows: list[tuple[str, float, int]]) -> None:
    floor = rows[0][1]
    print(f"\n{backend}, {records:,} decisions")
    print(f"{'read':34} {'p50 ms':>10} {'x floor':>8} {'n':>5}")
    for name, ms, n in rows:
        print(f"{name:34} {ms:10.2f} {ms / floor:8.1f} {n:5}")


def run_sqlite(records: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ui.db"
        url = f"sqlite+aiosqlite:///{db}"
        env = {"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": TOKEN}
        proc, base = serve(env, Path(tmp) / "serve.log")  # migrates the new file
        stop(proc)
        started = time.perf_counter()
        fill_sqlite(db, records)
        print(f"sqlite: filled {records:,} in {time.perf_counter() - started:.1f} s")
        proc, base = serve(env, Path(tmp) / "serve.log")
        try:
            report("SQLite", records, measure(base, records))
        finally:
            stop(proc)


def run_postgres(records: int) -> None:
    import asyncpg

    from app.store import migrate

    name = "toolgate_bench_ui"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(PG_ADMIN)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    asyncio.run(admin(f"CREATE DATABASE {name}"))
    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    try:
        migrate.upgrade(url)
        started = time.perf_counter()
        asyncio.run(fill_postgres(f"postgresql://postgres@127.0.0.1:5432/{name}", records))
        print(f"postgres: filled {records:,} in {time.perf_counter() - started:.1f} s")
        with tempfile.TemporaryDirectory() as tmp:
            proc, base = serve({"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": TOKEN},
                               Path(tmp) / "serve.log")
            try:
                report("PostgreSQL", records, measure(base, records))
            finally:
                stop(proc)
    finally:
        asyncio.run(admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        run_sqlite(args.records)
    if args.backend in ("postgres", "both"):
        run_postgres(args.records)


if __name__ == "__main__":
    main()
