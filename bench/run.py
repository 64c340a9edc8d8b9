"""`make bench`: toolgate's throughput against a bare ASGI app on the same uvicorn, the
cost of the durable decision log on SQLite and Postgres, the policy core's time per
decision against cedarpy, worker memory, and a py-spy profile under load.

    .venv/bin/python bench/run.py                    # the default run, under 5 minutes
    .venv/bin/python bench/run.py --workers 1 2      # also with two workers
    .venv/bin/python bench/run.py --memory 1000000   # RSS growth over a million decisions

Results: printed, and written to bench/results/latest.json (memory mode: memory.json).
docs/performance.md explains each figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import core, profile, scenarios, server, wrk  # noqa: E402
from bench import writer as log_writer  # noqa: E402
from bench.report import print_table, ratios  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    try:
        wrk_path = wrk.ensure_wrk()
    except wrk.WrkMissing as missing:
        print(f"bench: {missing}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="toolgate-bench-"))
    token = secrets.token_urlsafe(24)  # the servers' TOOLGATE_ADMIN_TOKEN; sent on every call
    started = time.monotonic()
    busy = os.getloadavg()[0]
    # Figures move with the CPU model more than with most changes (docs/performance.md):
    # say which one this is, so that a table is never compared with another machine's.
    print(f"== machine: {cpu_model()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    if busy > 0.5:
        print(f"note: load average is {busy:.2f} before the run: other work on this "
              f"{os.cpu_count()}-core machine will lower and scatter every figure")
    try:
        if args.memory:
            out = run_memory(args, workdir, token, wrk_path)
            path = RESULTS / "memory.json"
        else:
            out = run_all(args, workdir, token, wrk_path)
            path = args.out
        out["meta"] = meta(args, wrk_path, time.monotonic() - started)
        out["meta"]["loadavg_before"] = round(busy, 2)
        path.write_text(json.dumps(out, indent=2) + "\n")
        print(f"\nwritten: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
              f" ({out['meta']['wall_seconds']:.0f} s)")
    finally:
        if args.keep:
            print(f"kept: {workdir} (server logs, databases)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4, help="measured seconds per "
                        "scenario and round (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds: every scenario is "
                        "measured once a round, the order alternating (default 5)")
    parser.add_argument("--warmup", type=float, default=2, help="warm-up seconds per "
                        "scenario, not measured (default 2)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="uvicorn worker "
                        "counts to run every scenario with (default 1; e.g. --workers 1 2)")
    parser.add_argument("--scenarios", nargs="+", choices=list(scenarios.BY_NAME),
                        default=list(scenarios.BY_NAME))
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections "
                        "(default 64)")
    parser.add_argument("--log-level", default="info", help="uvicorn log level of every "
                        "server (default info, toolgate's default)")
    parser.add_argument("--access-log", action="store_true", help="turn uvicorn's access "
                        "log on for every server (default off, as TOOLGATE_ACCESS_LOG)")
    parser.add_argument("--env", action="append", default=[], metavar="TOOLGATE_X=VALUE",
                        help="extra setting for every toolgate server, e.g. "
                        "--env TOOLGATE_FAST_PATH=false (repeatable)")
    parser.add_argument("--profile", default="sqlite_log",
                        choices=[*scenarios.BY_NAME, "none"], help="scenario to profile "
                        "with py-spy under load (default sqlite_log; none to skip)")
    parser.add_argument("--profile-seconds", type=float, default=10)
    parser.add_argument("--no-core", action="store_true", help="skip in-process timings")
    parser.add_argument("--no-writer", action="store_true", help="skip the decision log "
                        "writer's capacity (records/s fed as fast as it takes them)")
    parser.add_argument("--memory", type=int, metavar="N", help="memory mode only: send N "
                        "decisions and report the worker's RSS growth")
    parser.add_argument("--memory-scenario", default="sqlite_log",
                        choices=[n for n, s in scenarios.BY_NAME.items() if s.database])
    parser.add_argument("--memory-max-seconds", type=float, default=3600,
                        help="memory mode stops after this long even short of N")
    parser.add_argument("--out", type=Path, default=RESULTS / "latest.json")
    parser.add_argument("--keep", action="store_true", help="keep server logs and databases")
    return parser.parse_args(argv)


def options(args: argparse.Namespace, workers: int, workdir: Path, token: str,
            wrk_path: str) -> scenarios.Options:
    return scenarios.Options(workers=workers, seconds=args.seconds, warmup=args.warmup,
                             token=token, log_level=args.log_level, workdir=workdir,
                             access_log=args.access_log, settings=extra_settings(args),
                             threads=args.threads, connections=args.connections,
                             wrk_path=wrk_path, rounds=args.rounds)


def extra_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("TOOLGATE_"):
            raise SystemExit(f"bench: --env wants TOOLGATE_NAME=VALUE, not {item!r}")
        settings[name] = value
    return settings


def check_access_log_setting() -> None:
    """The bare app and toolgate must log (or not log) every request alike."""
    from app.config import Settings

    if "access_log" not in Settings.model_fields:
        print("warning: this toolgate has no TOOLGATE_ACCESS_LOG setting; at log level "
              "info it writes an access line per request and the bare app may not: pass "
              "--access-log (or --log-level warning) for a like-for-like comparison")


def run_all(args: argparse.Namespace, workdir: Path, token: str,
            wrk_path: str) -> dict[str, Any]:
    check_access_log_setting()
    pg_down = server.postgres_unreachable()
    pg_settings: dict[str, str] | None = None
    if pg_down:
        print(f"Postgres scenarios skipped: 127.0.0.1:5432 unreachable ({pg_down})")
    else:
        pg_settings = server.postgres_settings()
        print(f"== postgres {pg_settings['server_version']}: "
              + " ".join(f"{k}={v}" for k, v in pg_settings.items() if k != "server_version"))
        if lost := server.not_durable(pg_settings):
            print(f"WARNING: this Postgres server's commits do not survive a power loss "
                  f"({', '.join(lost)}): the Postgres log figures are not durable decisions")
    synchronous = extra_settings(args).get("TOOLGATE_SQLITE_SYNCHRONOUS", "FULL")
    if synchronous.upper() != "FULL":
        print(f"WARNING: TOOLGATE_SQLITE_SYNCHRONOUS={synchronous}: the SQLite log figures "
              f"survive a crash of toolgate, not a power loss")
    load: dict[str, dict[str, Any]] = {}
    for workers in args.workers:
        opts = options(args, workers, workdir, token, wrk_path)
        rows: dict[str, Any] = {}
        print(f"\n== load: {workers} worker(s), wrk -t{args.threads} -c{args.connections}, "
              f"{args.warmup:g} s warm-up, then {args.rounds} rounds of {args.seconds:g} s "
              f"each (order alternating; medians), log level "
              f"{args.log_level}, access log {'on' if args.access_log else 'off'}"
              + "".join(f", {k}={v}" for k, v in opts.settings.items()))
        runnable = []
        for name in args.scenarios:
            scenario = scenarios.BY_NAME[name]
            if scenario.database == "postgres" and pg_down:
                rows[name] = {"scenario": name, "label": scenario.label,
                              "skipped": f"Postgres unreachable: {pg_down}"}
            else:
                runnable.append(name)
        rows.update(scenarios.measure(runnable, opts))
        for name in runnable:
            row = rows[name]
            if "error" in row:
                print(f"  {name}: FAILED {row['error'][:600]}")
                continue
            print(f"  {name:13s} {row['rps']:9.0f} req/s  p50 {row['p50_ms']:7.2f} ms  "
                  f"p99 {row['p99_ms']:7.2f} ms  non-2xx {row['non_2xx']}"
                  + (f"  logged {row['logged']}" if "logged" in row else "")
                  + "  rounds " + " ".join(f"{r['rps']:.0f}" for r in row["rounds"]))
        rows = {name: rows[name] for name in args.scenarios}
        load[str(workers)] = rows

    out: dict[str, Any] = {"load": load, "postgres": pg_settings}
    if not args.no_core:
        print("\n== in-process core timings (best of 5)")
        out["core"] = core.run()
    if not args.no_writer:
        print("\n== decision log writer capacity: one writer process, 600 frames of 32 "
              "records sent at once (the ceiling of a server's durable decisions/s)")
        out["writer"] = log_writer.run()
    out["ratios"] = {w: ratios(rows, out.get("core")) for w, rows in load.items()}
    if args.profile != "none":
        out["profile"] = run_profile(args, workdir, token, wrk_path)
    print_table(out)
    return out


def run_profile(args: argparse.Namespace, workdir: Path, token: str,
                wrk_path: str) -> dict[str, Any]:
    scenario = scenarios.BY_NAME[args.profile]
    print(f"\n== py-spy profile: {scenario.label}, 1 worker, {args.profile_seconds:g} s "
          "under wrk load")
    why_not = profile.ensure_py_spy()
    if why_not:
        print(f"  skipped: {why_not}")
        return {"skipped": why_not}
    opts = options(args, 1, workdir, token, wrk_path)
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw = RESULTS / f"profile-{scenario.name}.txt"
    try:
        srv, _ = scenarios.launch(scenario, opts)
    except Exception as exc:  # the same failure the load run reported
        print(f"  skipped: {exc}")
        return {"skipped": str(exc)[:2000]}
    try:
        body = scenarios.body_file(workdir)
        path = "/" if scenario.database is None else scenarios.AUTHORIZE_PATH
        load = subprocess.Popen(
            [wrk_path, f"-t{args.threads}", f"-c{args.connections}",
             f"-d{round(args.profile_seconds) + 3}s", "--latency", "-s", str(wrk.LUA),
             # the agent key, as the measured load sends it (the bare app has none)
             "-H", f"Authorization: Bearer {srv.agent_token or token}", srv.url + path,
             "--", str(body)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        try:
            profile.record(srv.worker_pids()[0], args.profile_seconds, raw)
        finally:
            stdout, _ = load.communicate(timeout=args.profile_seconds + 30)
    finally:
        srv.stop()
    summary = profile.summarise(raw.read_text())
    summary["raw_file"] = str(raw.relative_to(ROOT))
    try:
        summary["rps_while_sampled"] = wrk.parse(stdout).rps
    except ValueError:
        pass
    profile.print_summary(summary)
    return summary


def run_memory(args: argparse.Namespace, workdir: Path, token: str,
               wrk_path: str) -> dict[str, Any]:
    """Send N decisions in wrk runs of up to 10 s and read the worker's RSS after each."""
    scenario = scenarios.BY_NAME[args.memory_scenario]
    opts = options(args, args.workers[0], workdir, token, wrk_path)
    print(f"== memory: {args.memory} decisions, {scenario.label}, {opts.workers} worker(s)")
    srv, _ = scenarios.launch(scenario, opts)
    samples: list[dict[str, Any]] = []
    sent, started = 0, time.monotonic()
    try:
        samples.append({"decisions": 0, "seconds": 0.0, "rss_mib": srv.rss_mib()})
        while sent < args.memory and time.monotonic() - started < args.memory_max_seconds:
            # Whole seconds (wrk's unit), the last run sized to land near N.
            rate = samples[-1].get("rps") or 0
            seconds = min(10, max(1, math.ceil((args.memory - sent) / rate))) if rate else 10
            result = scenarios.load(srv, opts, seconds)
            if result.non_2xx:
                raise RuntimeError(f"{result.non_2xx} non-2xx answers during the memory run")
            sent += result.requests
            samples.append({"decisions": sent,
                            "seconds": round(time.monotonic() - started, 1),
                            "rss_mib": srv.rss_mib(), "rps": result.rps})
            print(f"  {sent:>9} decisions  {samples[-1]['seconds']:7.0f} s  "
                  f"RSS {samples[-1]['rss_mib']} MiB  ({result.rps:.0f} req/s)", flush=True)
    finally:
        srv.stop()
    first, warm, last = samples[0], samples[min(1, len(samples) - 1)], samples[-1]
    growth = sum(last["rss_mib"]) - sum(warm["rss_mib"])
    out = {"memory": {
        "scenario": scenario.name, "workers": opts.workers, "requested": args.memory,
        "decisions": sent, "samples": samples,
        "rss_mib_start": first["rss_mib"], "rss_mib_end": last["rss_mib"],
        "growth_mib_after_first_chunk": round(growth, 1),
        "growth_bytes_per_decision": round(growth * 2**20 / max(1, sent - warm["decisions"]),
                                           2),
    }}
    print(f"  RSS {first['rss_mib']} → {last['rss_mib']} MiB; after the first 10 s: "
          f"{growth:+.1f} MiB over {sent - warm['decisions']} decisions")
    return out


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    return next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("model name")), platform.processor())


def meta(args: argparse.Namespace, wrk_path: str, wall: float) -> dict[str, Any]:
    def text(command: list[str]) -> str | None:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=10,
                                  cwd=ROOT)
        except OSError:
            return None
        return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode in (
            0, 1) and (done.stdout or done.stderr) else None

    import uvicorn

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": text(["git", "rev-parse", "--short", "HEAD"]),
        "dirty": bool(text(["git", "status", "--porcelain", "--", "app"])),
        "cpu": cpu_model(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "uvicorn": uvicorn.__version__, "wrk": text([wrk_path, "--version"]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "wall_seconds": round(wall, 1),
        "loadavg_after": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    sys.exit(main())
