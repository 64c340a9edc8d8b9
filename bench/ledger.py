"""The ledger's cost (SPEC §11): a cost-limited plan whose every decision holds an
estimate and is followed by one outcome report, against the bare ASGI app and a plan
without limits, all measured in one run by the same closed-loop client.

    .venv/bin/python bench/ledger.py                       # Postgres, 8 s per scenario
    .venv/bin/python bench/ledger.py --database sqlite --seconds 5

Each scenario runs `--concurrency` loops for `--seconds`; a loop sends one request (bare,
plain) or one authorize plus its outcome report (ledger). Prints requests per second,
decisions per second and the ratio of each to the bare app. A Python client drives the
load (not wrk: a report needs the decision's id), so the absolute figures are the
client's as much as the server's; the ratios are what to read. Postgres: a scratch
database on 127.0.0.1:5432, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
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

from tests.serving import free_port, serve, stop  # noqa: E402

READER = {"writes": False, "checkpointable": True, "unsafe": False}
HOST = "127.0.0.1"


def _psql(sql: str) -> None:
    subprocess.run(["psql", "-h", HOST, "-U", "postgres", "-qc", sql], check=True,
                   capture_output=True)


def _call(plan: str, **context: object) -> dict:
    return {"plan_id": plan, "tool": {"name": "llm.ask", "capability": READER,
                                      "args": {"q": "x"}}, "context": context}


async def _loop(client: httpx.AsyncClient, url: str, body: dict, report: bool,
                until: float, counts: list[int]) -> None:
    while time.perf_counter() < until:
        r = await client.post(url + "/v1/authorize-tool", json=body)
        counts[0] += 1
        if report:
            decision = r.json()
            assert decision["allowed"], decision
            o = await client.post(f"{url}/v1/decisions/{decision['decision_id']}/outcome",
                                  json={"status": "succeeded", "cost": 0.000001})
            assert o.status_code == 201, o.text
            counts[0] += 1
        counts[1] += 1


async def _measure(url: str, headers: dict, body: dict, *, report: bool, seconds: float,
                   concurrency: int) -> tuple[float, float]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(headers=headers, timeout=30, limits=limits) as client:
        await _loop(client, url, body, report, time.perf_counter() + 0.5, [0, 0])  # warm
        counts = [0, 0]  # requests, decisions
        start = time.perf_counter()
        until = start + seconds
        await asyncio.gather(*(_loop(client, url, body, report, until, counts)
                               for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return counts[0] / elapsed, counts[1] / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="toolgate-ledger-"))
    name = f"bench_ledger_{secrets.token_hex(4)}"
    if args.database == "postgres":
        _psql(f"CREATE DATABASE {name}")
        url = f"postgresql+asyncpg://postgres@{HOST}:5432/{name}"
    else:
        url = f"sqlite+aiosqlite:///{work}/bench.db"
    token = secrets.token_urlsafe(24)
    subprocess.run([str(Path(sys.executable).with_name("toolgate")), "migrate"], check=True,
                   env={"PATH": "/usr/bin:/bin", "TOOLGATE_DATABASE_URL": url},
                   capture_output=True)
    port = free_port()
    bare = subprocess.Popen(
        [str(Path(sys.executable).with_name("uvicorn")), "bench.bare_app:app", "--host", HOST,
         "--port", str(port), "--log-level", "warning",
         "--http", "httptools"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc, base = serve({"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": token},
                       work / "server.log")
    results: dict[str, tuple[float, float]] = {}
    steps: dict[str, float] = {}
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as admin:
            for action, limits in (("plain", {}), ("metered", {"max_cost_per_plan": 1e9})):
                admin.put(f"/v1/actions/{action}", json={"project": "ops", "safety_profile": {
                    "require_sandbox": False, "require_checkpoints": False, **limits}}
                ).raise_for_status()
            plain = admin.post("/v1/plans", json={"action_id": "plain"}).json()["plan_id"]
            metered = admin.post("/v1/plans", json={"action_id": "metered"}).json()["plan_id"]
        bare_url = f"http://{HOST}:{port}"
        for _ in range(50):  # the bare app's start
            try:
                httpx.post(bare_url, json={})
                break
            except httpx.TransportError:
                time.sleep(0.1)
        for label, target, body, report in (
                ("bare ASGI app", bare_url, _call(plain), False),
                ("plain plan (memory only)", base, _call(plain), False),
                ("cost-limited plan + outcome", base, _call(metered, estimated_cost=0.5),
                 True)):
            results[label] = asyncio.run(_measure(
                target, headers, body, report=report, seconds=args.seconds,
                concurrency=args.concurrency))
        steps = _steps(base, headers, plain, metered, args.steps)
    finally:
        stop(proc)
        bare.terminate()
        bare.wait(10)
        if args.database == "postgres":
            _psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    bare_rps = results["bare ASGI app"][0]
    print(f"== ledger, {args.database}, {args.concurrency} loops x {args.seconds:g} s, "
          "one serve worker")
    print(f"{'scenario':<30} {'req/s':>8} {'decisions/s':>12} {'req ratio':>10} "
          f"{'dec ratio':>10}")
    for label, (rps, dps) in results.items():
        print(f"{label:<30} {rps:8.0f} {dps:12.0f} {rps / bare_rps:10.3f} "
              f"{dps / bare_rps:10.3f}")
    print(f"== where the time goes: median of {args.steps} calls one at a time (ms)")
    for step, ms in steps.items():
        print(f"{step:<44} {ms:8.2f}")
    return 0


def _steps(base: str, headers: dict, plain: str, metered: str, n: int) -> dict[str, float]:
    """One call at a time: the plain decision, the metered one (ledger read + hold), the
    metered one without an estimate (ledger read only), and the outcome report."""
    times: dict[str, list[float]] = {
        "authorize, plain plan": [], "authorize, cost-limited, no estimate (read)": [],
        "authorize, cost-limited, estimate (read+hold)": [], "outcome report": []}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as c:
        for _ in range(n):
            for label, body in (
                    ("authorize, plain plan", _call(plain)),
                    ("authorize, cost-limited, no estimate (read)", _call(metered)),
                    ("authorize, cost-limited, estimate (read+hold)",
                     _call(metered, estimated_cost=0.5))):
                t0 = time.perf_counter()
                decision = c.post("/v1/authorize-tool", json=body).json()
                times[label].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            c.post(f"/v1/decisions/{decision['decision_id']}/outcome",
                   json={"status": "succeeded", "cost": 0.000001}).raise_for_status()
            times["outcome report"].append((time.perf_counter() - t0) * 1000)
    return {label: statistics.median(values) for label, values in times.items()}


if __name__ == "__main__":
    raise SystemExit(main())
