"""The load scenarios: each starts its own server on loopback, prepares it and warms it up;
then wrk measures them in turn, round after round, and the worker's memory is read before
and after.

Why rounds: on a shared virtual machine the same server's throughput drifts by 10-25 %
over minutes (two runs of one commit gave 12,100 and 16,800 req/s an hour apart). Measured
one after the other, each scenario once, a ratio against the bare app would carry that
drift. So every server stays up, the rounds alternate the order (forwards, then backwards),
and each ratio is the median over rounds of the ratio within a round."""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import cpu, wrk
from bench import server as srv
from bench.payload import (
    ACTION,
    ACTION_ID,
    AGENT_KEY,
    AUTHORIZE,
    BODY,
    PLAN,
    PLAN_LIMITS,
    headers,
)

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
AUTHORIZE_PATH = "/v1/authorize-tool"


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    database: str | None  # None (bare app), "sqlite" or "postgres"
    log: bool = True
    env: tuple[tuple[str, str], ...] = ()  # TOOLGATE_* settings of this scenario only
    # The plan's profile has cost limits: every decision reads the plan's and the project's
    # ledger totals (SPEC §11). False (the default): none, the memory-only decision.
    limits: bool = False
    # The log signs checkpoints (SPEC §16): a new key in TOOLGATE_LOG_SIGNING_KEY, at the
    # default TOOLGATE_CHECKPOINT_SECONDS (one signature per 10 s in which the log grew).
    signed: bool = False
    # The bare app's uvicorn --http (toolgate serves on its own TOOLGATE_HTTP_PROTOCOL).
    http: str = "httptools"


SCENARIOS = (
    Scenario("bare", "bare ASGI app (uvicorn's protocol)", None),
    # The same app on toolgate's HTTP protocol (app/edge/connection.py): what its own ASGI
    # cycle costs against uvicorn's, for every request it does not answer itself.
    Scenario("bare_toolgate", "bare ASGI app (toolgate's protocol)", None,
             http="app.edge.connection:HttpProtocol"),
    Scenario("sqlite_log", "toolgate SQLite, durable log", "sqlite"),
    Scenario("sqlite_nolog", "toolgate SQLite, log disabled", "sqlite", log=False),
    Scenario("pg_log", "toolgate Postgres, durable log", "postgres"),
    Scenario("pg_nolog", "toolgate Postgres, log disabled", "postgres", log=False),
    # The A/B of toolgate's HTTP protocol (the default): the same servers on uvicorn's own
    # protocol, guarded (TOOLGATE_HTTP_PROTOCOL=uvicorn).
    Scenario("sqlite_log_uvicorn", "toolgate SQLite, durable log, uvicorn's protocol",
             "sqlite", env=(("TOOLGATE_HTTP_PROTOCOL", "uvicorn"),)),
    Scenario("pg_log_uvicorn", "toolgate Postgres, durable log, uvicorn's protocol",
             "postgres", env=(("TOOLGATE_HTTP_PROTOCOL", "uvicorn"),)),
    # The A/B of metrics (docs/operations.md): the same servers counting nothing.
    Scenario("sqlite_log_nometrics", "toolgate SQLite, durable log, metrics off", "sqlite",
             env=(("TOOLGATE_METRICS_ENABLED", "false"),)),
    Scenario("sqlite_nolog_nometrics", "toolgate SQLite, log disabled, metrics off",
             "sqlite", log=False, env=(("TOOLGATE_METRICS_ENABLED", "false"),)),
    # The A/B of the ledger read: the same servers on a plan with cost limits.
    Scenario("sqlite_log_limits", "toolgate SQLite, durable log, cost-limited plan",
             "sqlite", limits=True),
    Scenario("pg_log_limits", "toolgate Postgres, durable log, cost-limited plan",
             "postgres", limits=True),
    # The A/B of signed checkpoints: the same servers with a signing key.
    Scenario("sqlite_log_signed", "toolgate SQLite, durable log, signed checkpoints",
             "sqlite", signed=True),
    Scenario("pg_log_signed", "toolgate Postgres, durable log, signed checkpoints",
             "postgres", signed=True),
)
BY_NAME = {s.name: s for s in SCENARIOS}


@dataclass
class Options:
    workers: int
    seconds: float
    warmup: float
    token: str
    log_level: str
    workdir: Path
    access_log: bool = False  # uvicorn's per-request log line, the same for every server
    settings: dict[str, str] = field(default_factory=dict)  # extra TOOLGATE_* for toolgate
    threads: int = 2
    connections: int = 64
    wrk_path: str = "wrk"
    rounds: int = 1


def launch(scenario: Scenario, opts: Options) -> tuple[srv.Server, str | None]:
    """A started, prepared server (the plan exists and one authorize answered allow) and
    the database URL it uses."""
    port = srv.free_port()
    log = opts.workdir / f"{scenario.name}-w{opts.workers}.log"
    if scenario.database is None:
        command = [str(BIN / "uvicorn"), "bench.bare_app:app", "--host", srv.HOST,
                   "--port", str(port), "--workers", str(opts.workers),
                   "--log-level", opts.log_level, "--no-proxy-headers",
                   # uvicorn's own protocol: the reference (or, as bare_toolgate, ours)
                   "--http", scenario.http,
                   "--access-log" if opts.access_log else "--no-access-log"]
        server = srv.Server(scenario.name, command, srv.clean_env(), port=port, log=log,
                            cwd=ROOT, token=opts.token)
        server.start()
        return server, None
    if scenario.database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix=f"{scenario.name}-", dir=opts.workdir))
        url = srv.sqlite_url(folder / "toolgate.db")
    else:
        database = f"{srv.PG_DATABASE}_{scenario.name}"
        srv.recreate_postgres(database)
        url = srv.pg_url(database)
    env = srv.clean_env(
        TOOLGATE_DATABASE_URL=url,
        TOOLGATE_ADMIN_TOKEN=opts.token,
        TOOLGATE_DECISION_LOG_ENABLED="true" if scenario.log else "false",
        TOOLGATE_LOG_LEVEL=opts.log_level,
        TOOLGATE_ACCESS_LOG="true" if opts.access_log else "false",
        **opts.settings,
        **dict(scenario.env),
        **({"TOOLGATE_LOG_SIGNING_KEY": _signing_key(opts.workdir, scenario.name)}
           if scenario.signed else {}),
    )
    if scenario.database == "postgres":
        _migrate(env, log)
    command = [str(BIN / "toolgate"), "serve", "--host", srv.HOST, "--port", str(port),
               "--workers", str(opts.workers)]
    server = srv.Server(scenario.name, command, env, port=port, log=log, cwd=ROOT,
                        token=opts.token)
    server.start()
    try:
        server.agent_token = prepare(server.url, opts.token,
                                     plan=PLAN_LIMITS if scenario.limits else PLAN)
    except Exception:
        server.stop()
        raise
    return server, url


def _signing_key(workdir: Path, name: str) -> str:
    from app.log.note import Signer

    path = workdir / f"{name}.key"
    path.write_text(Signer.generate(f"bench/{name}").key() + "\n")
    path.chmod(0o600)
    return str(path)


def _migrate(env: dict[str, str], log: Path) -> None:
    import subprocess

    with open(log, "ab") as out:
        done = subprocess.run([str(BIN / "toolgate"), "migrate"], env=env, cwd=ROOT,
                              stdout=out, stderr=subprocess.STDOUT, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"`toolgate migrate` failed ({done.returncode}); see {log}")


def prepare(url: str, token: str, plan: dict[str, Any] = PLAN) -> str:
    """Create the action, the plan and an agent key scoped to the plan's project through the
    API, then check the benchmark body is answered 200 allow with that key: wrk only counts
    statuses, so a deny would go unnoticed. Returns the agent key, which the load uses, as
    an agent would (key cache, role and project checks on every request)."""
    with httpx.Client(base_url=url, headers=headers(token), timeout=10) as client:
        for method, path, body in (("PUT", f"/v1/actions/{ACTION_ID}", ACTION),
                                   ("POST", "/v1/plans", plan),
                                   ("POST", "/v1/keys", AGENT_KEY)):
            answer = client.request(method, path, json=body)
            if answer.status_code not in (200, 201):
                raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text}")
        agent = answer.json()["key"]
        answer = client.post(AUTHORIZE_PATH, content=BODY, headers=headers(agent))
        if answer.status_code != 200 or answer.json().get("allowed") is not True:
            raise RuntimeError(f"the benchmark request is not allowed: "
                               f"{answer.status_code} {answer.text}")
        assert answer.json()["plan_id"] == AUTHORIZE["plan_id"]
    return agent


def body_file(workdir: Path) -> Path:
    path = workdir / "authorize.json"
    path.write_bytes(BODY)
    return path


def load(server: srv.Server, opts: Options, seconds: float) -> wrk.WrkResult:
    path = "/" if server.name.startswith("bare") else AUTHORIZE_PATH
    return wrk.run(opts.wrk_path, server.url + path, body_file(opts.workdir),
                   token=server.agent_token or opts.token, seconds=seconds, threads=opts.threads,
                   connections=opts.connections)


def measure(names: list[str], opts: Options) -> dict[str, dict[str, Any]]:
    """Every scenario in `names` up at once, measured in `opts.rounds` alternating rounds of
    `opts.seconds` each; one row per scenario (an "error" row for one that fails)."""
    rows: dict[str, dict[str, Any]] = {}
    running: dict[str, tuple[Scenario, srv.Server, str | None, list[float]]] = {}
    runs: dict[str, list[tuple[wrk.WrkResult, dict[str, Any]]]] = {}
    warmed: dict[str, int] = {}
    try:
        for name in names:
            scenario = BY_NAME[name]
            try:
                server, url = launch(scenario, opts)
            except Exception as exc:  # report and go on: one broken scenario is a finding
                rows[name] = _failed(scenario, exc)
                continue
            running[name] = (scenario, server, url, server.rss_mib())
            runs[name] = []
            if opts.warmup > 0:
                warmed[name] = load(server, opts, opts.warmup).requests
        for round_ in range(opts.rounds):
            for name in (list(running) if round_ % 2 == 0 else list(running)[::-1]):
                scenario, server = running[name][:2]
                postgres = scenario.database == "postgres"
                srv.settle(postgres=postgres)
                meter = cpu.Meter(server, postgres=postgres)
                result = load(server, opts, opts.seconds)
                runs[name].append((result, meter.per_request(result.requests)))
        rss_after = {name: entry[1].rss_mib() for name, entry in running.items()}
    finally:
        for _, server, _, _ in running.values():
            server.stop()  # the servers drain their logs before they exit
    for name, (scenario, _, url, rss_ready) in running.items():
        rows[name] = {"scenario": name, "label": scenario.label, "workers": opts.workers,
                      **_combined(runs[name]), "rss_mib_ready": rss_ready,
                      "rss_mib_after": rss_after[name]}
        if scenario.database is not None and scenario.log:
            # Every answered decision must be in the log (the server drained it on stop).
            answered = rows[name]["requests"] + warmed.get(name, 0)
            rows[name]["logged"] = srv.logged_decisions(url or "")
            rows[name]["logged_ok"] = rows[name]["logged"] >= answered
    return {name: rows[name] for name in names}


def _failed(scenario: Scenario, exc: Exception) -> dict[str, Any]:
    return {"scenario": scenario.name, "label": scenario.label,
            "error": f"{type(exc).__name__}: {exc}"[:2000]}


def _combined(runs: list[tuple[wrk.WrkResult, dict[str, Any]]]) -> dict[str, Any]:
    """One scenario's rounds: medians of the rates and latencies, totals of the counts, CPU
    per request over all of them; `rounds` keeps each round's own figures."""
    results = [result for result, _ in runs]
    requests = sum(r.requests for r in results)
    cpu_us: dict[str, float] = {}
    for result, spent in runs:
        for group, us in spent["cpu_us_per_request"].items():
            cpu_us[group] = cpu_us.get(group, 0.0) + us * result.requests / requests
    idle = [spent["machine_idle_pct"] for _, spent in runs
            if spent["machine_idle_pct"] is not None]
    errors: dict[str, int] = {}
    for r in results:
        for kind, count in r.socket_errors.items():
            errors[kind] = errors.get(kind, 0) + count
    return {
        "requests": requests, "seconds": round(sum(r.seconds for r in results), 2),
        "rps": statistics.median(r.rps for r in results),
        **{f"{q}_ms": statistics.median(getattr(r, f"{q}_ms") for r in results)
           for q in ("p50", "p75", "p90", "p99")},
        "non_2xx": sum(r.non_2xx for r in results), "socket_errors": errors,
        "cpu_us_per_request": {group: round(us, 1) for group, us in cpu_us.items()},
        "machine_idle_pct": round(statistics.mean(idle), 1) if idle else None,
        "rounds": [{"rps": r.rps, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms} for r in results],
    }
