"""The approval round trip (SPEC §10): deny -> grant -> allowed retry, timed over N
approvals against a real `toolgate serve` on Postgres (or SQLite), one after another.

    .venv/bin/python bench/approvals.py                  # 1,000 approvals on Postgres
    .venv/bin/python bench/approvals.py --count 200 --database sqlite

Prints p50/p99 of each step (ms) and of the whole round trip; docs/approvals.md quotes it.
Postgres: a scratch database on 127.0.0.1:5432 (user postgres), dropped afterwards.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.serving import serve, stop  # noqa: E402

WRITER = {"writes": True, "checkpointable": True, "unsafe": False}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _psql(sql: str) -> None:
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", sql], check=True,
                   capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="toolgate-approvals-"))
    name = f"bench_approvals_{secrets.token_hex(4)}"
    if args.database == "postgres":
        _psql(f"CREATE DATABASE {name}")
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    else:
        url = f"sqlite+aiosqlite:///{work}/bench.db"
    token = secrets.token_urlsafe(24)
    subprocess.run([str(Path(sys.executable).with_name("toolgate")), "migrate"], check=True,
                   env={"PATH": "/usr/bin:/bin", "TOOLGATE_DATABASE_URL": url},
                   capture_output=True)
    proc, base = serve({"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": token},
                       work / "server.log")
    steps: dict[str, list[float]] = {"deny": [], "grant": [], "retry": [], "total": []}
    try:
        admin = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                             timeout=30)
        admin.put("/v1/projects/ops/settings", json={"approval_mode": "server"})
        admin.put("/v1/actions/deploy", json={"project": "ops", "safety_profile": {
            "require_human_approval": True, "require_sandbox": False,
            "require_checkpoints": False}}).raise_for_status()
        plan = admin.post("/v1/plans", json={"action_id": "deploy"}).json()["plan_id"]
        keys = {}
        for role in ("agent", "approver"):
            keys[role] = admin.post("/v1/keys", json={
                "name": role, "role": role, "projects": None,
                "principal": role}).json()["key"]
        agent = httpx.Client(base_url=base, timeout=30,
                             headers={"Authorization": f"Bearer {keys['agent']}"})
        approver = httpx.Client(base_url=base, timeout=30,
                                headers={"Authorization": f"Bearer {keys['approver']}"})
        for n in range(args.count):
            body = {"plan_id": plan, "tool": {"name": "deploy", "capability": WRITER,
                                              "args": {"n": n}}}
            t0 = time.perf_counter()
            denied = agent.post("/v1/authorize-tool", json=body).json()
            t1 = time.perf_counter()
            approval = denied["deny"]["details"]["approval"]["approval_id"]
            approver.post(f"/v1/approvals/{approval}/grant", json={}).raise_for_status()
            t2 = time.perf_counter()
            allowed = agent.post("/v1/authorize-tool", json=body).json()
            t3 = time.perf_counter()
            assert allowed["allowed"] is True, allowed
            for step, seconds in (("deny", t1 - t0), ("grant", t2 - t1), ("retry", t3 - t2),
                                  ("total", t3 - t0)):
                steps[step].append(seconds * 1000)
    finally:
        stop(proc)
        if args.database == "postgres":
            _psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    print(f"== approval round trip, {args.count} approvals, {args.database}, one at a time")
    print(f"{'step':<8} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for step, values in steps.items():
        print(f"{step:<8} {percentile(values, 0.5):8.2f} {percentile(values, 0.99):8.2f} "
              f"{statistics.fmean(values):8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
