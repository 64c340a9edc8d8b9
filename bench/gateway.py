"""The MCP gateway's cost (SPEC §14, docs/gateway.md): the latency a `tools/call` gains
through `toolgate gateway` against calling the same Python upstream directly, a bare
`POST /v1/authorize-tool` round trip measured in the same run (goal: added p50 <= 2x it),
and the throughput with 16 concurrent clients, direct and through the gateway.

    .venv/bin/python bench/gateway.py                 # 500 calls each, 10 s of throughput
    .venv/bin/python bench/gateway.py --calls 2000 --seconds 20
    .venv/bin/python bench/gateway.py --profile       # and where the gateway's CPU goes

A real `toolgate serve` (SQLite, one worker), the recording upstream of tests/gateway over
Streamable HTTP (recording off), the gateway on a Streamable HTTP listener; every client is
the SDK's `Client`, one session each. Beside the bare authorize: the same with each allow's
outcome reported as the gateway reports it (not awaited), and the pairs (authorize, then
its outcome) toolgate serves per second to 16 concurrent HTTP clients: what any client that
reports its outcomes costs toolgate, gateway or not. Prints the table and writes
bench/results/gateway.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.gateway.clients import http_client  # noqa: E402
from tests.gateway.conftest import (  # noqa: E402
    RECORDER,
    http_gateway,
    start_toolgate,
    stop_gateway,
    wait_for,
)
from tests.serving import free_port, stop  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TOOL, ARGS = "read_note", {"key": "bench"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def latencies(url: str, token: str | None, name: str, calls: int,
                    what: str = "call") -> list[float]:
    """`what`: a tools/call, a resources/read of note://first, or a call of `steps` whose
    10 progress notifications all arrive (a relayed progress stream)."""
    async def once(client) -> None:
        if what == "read":
            assert (await client.read_resource("note://first")).contents
            return
        if what == "progress":
            seen: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(value)
            steps = name.replace(TOOL, "steps")
            result = await client.call_tool(steps, {"n": 10}, progress_callback=progress)
            assert not result.is_error and len(seen) == 10, (result, seen)
            return
        result = await client.call_tool(name, ARGS)
        assert not result.is_error, result

    async with http_client(url, token or "-") as client:
        for _ in range(20):  # warm: connection, caches
            await once(client)
        out = []
        for _ in range(calls):
            start = time.perf_counter()
            await once(client)
            out.append(time.perf_counter() - start)
        return out


async def throughput(url: str, token: str | None, name: str, seconds: float,
                     clients: int = 16, mode: str = "auto",
                     cpu_of: int | None = None) -> float | tuple[float, float]:
    """Calls/s of `clients` concurrent sessions, timed once every one is connected and
    has made a first call. `mode` legacy: each client a 2025-11-25 session, with upstream
    sessions of its own through the gateway; auto: 2026-07-28 stateless requests on the
    shared ones. `cpu_of`: also the CPU ms that process spent per call (less sensitive to
    other load on the machine than the rate)."""
    done = 0
    ready = 0
    go = anyio.Event()
    start = stop_at = cpu_start = 0.0

    async def one() -> None:
        nonlocal done, ready, start, stop_at, cpu_start
        async with http_client(url, token or "-", mode=mode) as client:
            await client.call_tool(name, ARGS)
            ready += 1
            if ready == clients:  # the last one in starts the clock
                start, cpu_start = time.monotonic(), _cpu_seconds(cpu_of)
                stop_at = start + seconds
                go.set()
            await go.wait()
            while time.monotonic() < stop_at:
                await client.call_tool(name, ARGS)
                done += 1

    async with anyio.create_task_group() as tasks:
        for _ in range(clients):
            tasks.start_soon(one)
    elapsed = time.monotonic() - start
    rate = done / elapsed
    if cpu_of is None:
        return rate
    return rate, (_cpu_seconds(cpu_of) - cpu_start) * 1000 / max(done, 1)


def _cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def idle_memory(gw, sessions: int) -> dict[str, float]:
    """The gateway's RSS before and with `sessions` idle 2025-11-25 client sessions open
    (each with its own upstream session)."""
    from contextlib import AsyncExitStack

    before = _rss_mib(gw.proc.pid)
    async with AsyncExitStack() as stack:
        for _ in range(sessions):
            client = await stack.enter_async_context(http_client(gw.url, gw.token,
                                                                 mode="legacy"))
            await client.list_tools()  # its own upstream sessions are open
        await anyio.sleep(1)
        return {"before": before, "with_100": _rss_mib(gw.proc.pid)}


async def authorize(url: str, token: str, plan_id: str, calls: int,
                    report: bool = False) -> list[float]:
    """A bare authorize round trip; with `report`, each allow's outcome is then reported
    as the gateway reports it (sent, not awaited before the next call)."""
    body = {"plan_id": plan_id, "tool": {"name": f"rec.{TOOL}", "args": ARGS, "capability": {
        "writes": False, "checkpointable": False, "unsafe": False}, "safety_category": "safe"},
        "context": {"sandbox_id": "rec", "sandbox_root": "/tmp"}}
    async with httpx.AsyncClient(base_url=url, headers={
            "Authorization": f"Bearer {token}"}) as http:
        for _ in range(20):
            (await http.post("/v1/authorize-tool", json=body)).raise_for_status()
        out = []
        async with anyio.create_task_group() as reports:
            for _ in range(calls):
                start = time.perf_counter()
                answer = await http.post("/v1/authorize-tool", json=body)
                out.append(time.perf_counter() - start)
                assert answer.json()["allowed"] is True, answer.text
                if report:
                    reports.start_soon(functools.partial(
                        http.post, f"/v1/decisions/{answer.json()['decision_id']}/outcome",
                        json={"status": "succeeded"}))
        return out


async def pairs(url: str, token: str, plan_id: str, seconds: float,
                clients: int = 16) -> float:
    """Authorize, then report its outcome, in a loop on each of `clients` connections:
    pairs per second."""
    body = {"plan_id": plan_id, "tool": {"name": f"rec.{TOOL}", "args": ARGS, "capability": {
        "writes": False, "checkpointable": False, "unsafe": False}, "safety_category": "safe"},
        "context": {"sandbox_id": "rec", "sandbox_root": "/tmp"}}
    done = 0

    async def one(http: httpx.AsyncClient) -> None:
        nonlocal done
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            answer = (await http.post("/v1/authorize-tool", json=body)).json()
            (await http.post(f"/v1/decisions/{answer['decision_id']}/outcome",
                             json={"status": "succeeded"})).raise_for_status()
            done += 1

    start = time.monotonic()
    async with httpx.AsyncClient(base_url=url, headers={
            "Authorization": f"Bearer {token}"}) as http, anyio.create_task_group() as tasks:
        for _ in range(clients):
            tasks.start_soon(one, http)
    return done / (time.monotonic() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--profile", action="store_true",
                        help="sample the gateway with py-spy (bench group) during one more "
                             "run of --calls calls through it, and print where its CPU goes")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="toolgate-bench-gateway-"))
    from app.store import migrate

    db = folder / "toolgate.db"
    migrate.upgrade(f"sqlite+aiosqlite:///{db}")
    tg = start_toolgate(f"sqlite+aiosqlite:///{db}", folder)
    port = free_port()
    upstream = subprocess.Popen([sys.executable, str(RECORDER), "-", "--http", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    direct_url = f"http://127.0.0.1:{port}/mcp"
    gw = None
    try:
        wait_for(lambda: _answers(direct_url), 60, "the upstream")
        gw = http_gateway(tg, folder, {"rec": {"url": direct_url, "trust_annotations": True,
                                               "sandbox": {"id": "rec", "root": "/tmp"}}})
        plan_id = tg.admin("POST", "/v1/plans", {"action_id": tg.action}).json()["plan_id"]
        load_start = os.getloadavg()[0]
        print(f"== gateway bench: {args.calls} calls each, {os.cpu_count()} cores, "
              f"load {load_start:.2f}")
        direct = anyio.run(latencies, direct_url, None, TOOL, args.calls)
        through = anyio.run(latencies, gw.url, gw.token, f"rec.{TOOL}", args.calls)
        reads = {"direct": anyio.run(latencies, direct_url, None, TOOL, args.calls, "read"),
                 "gateway": anyio.run(latencies, gw.url, gw.token, f"rec.{TOOL}", args.calls,
                                      "read")}
        steps = {"direct": anyio.run(latencies, direct_url, None, TOOL, args.calls // 5,
                                     "progress"),
                 "gateway": anyio.run(latencies, gw.url, gw.token, f"rec.{TOOL}",
                                      args.calls // 5, "progress")}
        bare = anyio.run(authorize, tg.url, tg.agent_token, plan_id, args.calls)
        reported = anyio.run(authorize, tg.url, tg.agent_token, plan_id, args.calls, True)
        direct_rps = anyio.run(throughput, direct_url, None, TOOL, args.seconds)
        gateway_rps, stateless_cpu = anyio.run(throughput, gw.url, gw.token, f"rec.{TOOL}",
                                               args.seconds, 16, "auto", gw.proc.pid)
        own_rps, own_cpu = anyio.run(throughput, gw.url, gw.token, f"rec.{TOOL}",
                                     args.seconds, 16, "legacy", gw.proc.pid)
        idle = anyio.run(idle_memory, gw, 100)
        pairs_rps = anyio.run(pairs, tg.url, tg.agent_token, plan_id, args.seconds)
        load_end = os.getloadavg()[0]
        profile = _profile(gw, args.calls, folder) if args.profile else None
    finally:
        if gw is not None:
            stop_gateway(gw)
        upstream.terminate()
        stop(tg.proc)
    out = {
        "direct_ms": {"p50": pct(direct, .5), "p99": pct(direct, .99)},
        "gateway_ms": {"p50": pct(through, .5), "p99": pct(through, .99)},
        "added_ms": {"p50": pct(through, .5) - pct(direct, .5),
                     "p99": pct(through, .99) - pct(direct, .99)},
        "authorize_ms": {"p50": pct(bare, .5), "p99": pct(bare, .99)},
        "authorize_with_outcomes_ms": {"p50": pct(reported, .5), "p99": pct(reported, .99)},
        "throughput_16_clients": {"direct": direct_rps, "gateway": gateway_rps,
                                  "authorize_and_outcome_pairs": pairs_rps},
        "loadavg": load_start, "loadavg_end": load_end, "calls": args.calls,
        "resource_read_ms": {k: {"p50": pct(v, .5), "p99": pct(v, .99)}
                             for k, v in reads.items()},
        "progress_10_steps_ms": {k: {"p50": pct(v, .5), "p99": pct(v, .99)}
                                 for k, v in steps.items()},
        "throughput_16_own_sessions": own_rps,
        "gateway_cpu_ms_per_call": {"stateless": stateless_cpu, "own_sessions": own_cpu},
        "gateway_rss_mib": idle,
    }
    if profile is not None:
        out["gateway_profile"] = profile
    out["added_p50_over_authorize_p50"] = out["added_ms"]["p50"] / out["authorize_ms"]["p50"]
    print(f"{'':28}{'p50 ms':>10}{'p99 ms':>10}")
    for label, key in (("direct call", "direct_ms"), ("through the gateway", "gateway_ms"),
                       ("added by the gateway", "added_ms"),
                       ("bare POST /v1/authorize-tool", "authorize_ms"),
                       ("  each followed by an outcome", "authorize_with_outcomes_ms")):
        print(f"{label:28}{out[key]['p50']:>10.2f}{out[key]['p99']:>10.2f}")
    ratio = out["added_p50_over_authorize_p50"]
    print(f"added p50 / authorize p50: {ratio:.2f} (goal <= 2)")
    print(f"16 clients: direct {direct_rps:.0f} calls/s, through the gateway "
          f"{gateway_rps:.0f} calls/s; toolgate alone: {pairs_rps:.0f} authorize+outcome "
          f"pairs/s")
    for label, key in (("resources/read", "resource_read_ms"),
                       ("call with 10 progress", "progress_10_steps_ms")):
        d, g = out[key]["direct"], out[key]["gateway"]
        print(f"{label:28}direct p50 {d['p50']:.2f} p99 {d['p99']:.2f}; through the gateway "
              f"p50 {g['p50']:.2f} p99 {g['p99']:.2f} ms")
    print(f"16 clients with upstream sessions of their own (2025-11-25): {own_rps:.0f} "
          f"calls/s ({own_rps / gateway_rps:.2f}x the stateless clients'); gateway CPU per "
          f"call {own_cpu:.2f} ms (stateless {stateless_cpu:.2f} ms)")
    print(f"gateway memory (RSS): {idle['before']:.0f} MiB, with 100 idle client sessions "
          f"{idle['with_100']:.0f} MiB ({(idle['with_100'] - idle['before']) * 1024 / 100:.0f}"
          f" KiB each)")
    print(f"load average {load_start:.2f} at the start, {load_end:.2f} at the end")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gateway.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _profile(gw, calls: int, folder: Path) -> dict:
    """py-spy on the gateway process (Python CPU, GIL holders) while `calls` calls go
    through it: where one call's time in the gateway goes (bench/profile.py's summary)."""
    import threading

    from bench import profile

    if (why := profile.ensure_py_spy()) is not None:
        raise SystemExit(why)
    out = folder / "gateway-profile.txt"
    seconds = max(5.0, calls * 0.05)
    sampler = threading.Thread(target=profile.record, args=(gw.proc.pid, seconds, out))
    sampler.start()
    time.sleep(1.0)  # py-spy attaches
    end = time.monotonic() + seconds - 1.5

    async def drive() -> int:
        done = 0
        async with http_client(gw.url, gw.token) as client:
            while time.monotonic() < end:
                await client.call_tool(f"rec.{TOOL}", ARGS)
                done += 1
        return done

    done = anyio.run(drive)
    sampler.join()
    summary = profile.summarise(out.read_text())
    summary["calls"] = done
    print(f"== the gateway's CPU over {done} calls (one client, py-spy):")
    profile.print_summary(summary)
    return summary


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
        return True
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
