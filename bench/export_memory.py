"""Server memory while streaming a large audit export (docs/decision-log.md).

    python bench/export_memory.py [--rows 1000000]

Creates the Postgres database toolgate_export_bench on 127.0.0.1:5432, fills it with
synthetic records (as bench/explain_queries.py does), starts `toolgate serve`, streams
GET /v1/audit/export to nowhere and samples the server's RSS every 0.2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path

import asyncpg
import httpx

from app.store import migrate
from bench.explain_queries import FILL
from tests.serving import serve, stop

ADMIN = "bench-export-token"
DB = "toolgate_export_bench"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def prepare(rows: int) -> str:
    admin = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {DB}")
    await admin.close()
    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{DB}"
    await asyncio.to_thread(migrate.upgrade, url)  # Alembic runs its own event loop
    conn = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:5432/{DB}")
    await conn.execute(FILL, rows)
    await conn.execute("UPDATE chain_head SET seq = $1", rows)
    await conn.close()
    return url


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    url = asyncio.run(prepare(args.rows))
    log = Path("/tmp/toolgate-export-bench.log")
    proc, base = serve({"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": ADMIN}, log)
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(rss_mib(proc.pid))
            time.sleep(0.2)

    try:
        before = rss_mib(proc.pid)
        threading.Thread(target=sample, daemon=True).start()
        started, lines, size = time.monotonic(), 0, 0
        with httpx.stream("GET", f"{base}/v1/audit/export",
                          headers={"Authorization": f"Bearer {ADMIN}"}, timeout=None) as r:
            r.raise_for_status()
            for chunk in r.iter_bytes():
                lines += chunk.count(b"\n")
                size += len(chunk)
        seconds = time.monotonic() - started
        done.set()
        print(f"exported {lines} records ({size / 2**20:.0f} MiB) in {seconds:.1f} s")
        print(f"server RSS: {before:.1f} MiB before, max {max(samples):.1f} MiB during, "
              f"{samples[-1]:.1f} MiB at the end ({len(samples)} samples)")
    finally:
        done.set()
        stop(proc)


if __name__ == "__main__":
    main()
