"""The load scenarios: each starts its own server on loopback, prepares it, warms it up,
measures it with wrk, and reads the worker's memory before and after."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import cpu, wrk
from bench import server as srv
from bench.payload import ACTION, ACTION_ID, AGENT_KEY, AUTHORIZE, BODY, PLAN, headers

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
AUTHORIZE_PATH = "/v1/authorize-tool"


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    database: str | None  # None (bare app), "sqlite" or "postgres"
    log: bool = True


SCENARIOS = (
    Scenario("bare", "bare ASGI app (uvicorn)", None),
    Scenario("sqlite_log", "toolgate SQLite, durable log", "sqlite"),
    Scenario("sqlite_nolog", "toolgate SQLite, log disabled", "sqlite", log=False),
    Scenario("pg_log", "toolgate Postgres, durable log", "postgres"),
    Scenario("pg_nolog", "toolgate Postgres, log disabled", "postgres", log=False),
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


def launch(scenario: Scenario, opts: Options) -> tuple[srv.Server, str | None]:
    """A started, prepared server (the plan exists and one authorize answered allow) and
    the database URL it uses."""
    port = srv.free_port()
    log = opts.workdir / f"{scenario.name}-w{opts.workers}.log"
    if scenario.database is None:
        command = [str(BIN / "uvicorn"), "bench.bare_app:app", "--host", srv.HOST,
                   "--port", str(port), "--workers", str(opts.workers),
                   "--log-level", opts.log_level, "--no-proxy-headers",
                   "--access-log" if opts.access_log else "--no-access-log"]
        server = srv.Server(scenario.name, command, srv.clean_env(), port=port, log=log,
                            cwd=ROOT, token=opts.token)
        server.start()
        return server, None
    if scenario.database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix=f"{scenario.name}-", dir=opts.workdir))
        url = srv.sqlite_url(folder / "toolgate.db")
    else:
        srv.recreate_postgres()
        url = srv.PG_URL
    env = srv.clean_env(
        TOOLGATE_DATABASE_URL=url,
        TOOLGATE_ADMIN_TOKEN=opts.token,
        TOOLGATE_DECISION_LOG_ENABLED="true" if scenario.log else "false",
        TOOLGATE_LOG_LEVEL=opts.log_level,
        TOOLGATE_ACCESS_LOG="true" if opts.access_log else "false",
        **opts.settings,
    )
    if scenario.database == "postgres":
        _migrate(env, log)
    command = [str(BIN / "toolgate"), "serve", "--host", srv.HOST, "--port", str(port),
               "--workers", str(opts.workers)]
    server = srv.Server(scenario.name, command, env, port=port, log=log, cwd=ROOT,
                        token=opts.token)
    server.start()
    try:
        server.agent_token = prepare(server.url, opts.token)
    except Exception:
        server.stop()
        raise
    return server, url


def _migrate(env: dict[str, str], log: Path) -> None:
    import subprocess

    with open(log, "ab") as out:
        done = subprocess.run([str(BIN / "toolgate"), "migrate"], env=env, cwd=ROOT,
                              stdout=out, stderr=subprocess.STDOUT, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"`toolgate migrate` failed ({done.returncode}); see {log}")


def prepare(url: str, token: str) -> str:
    """Create the action, the plan and an agent key scoped to the plan's project through the
    API, then check the benchmark body is answered 200 allow with that key: wrk only counts
    statuses, so a deny would go unnoticed. Returns the agent key, which the load uses, as
    an agent would (key cache, role and project checks on every request)."""
    with httpx.Client(base_url=url, headers=headers(token), timeout=10) as client:
        for method, path, body in (("PUT", f"/v1/actions/{ACTION_ID}", ACTION),
                                   ("POST", "/v1/plans", PLAN),
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
    path = "/" if server.name == "bare" else AUTHORIZE_PATH
    return wrk.run(opts.wrk_path, server.url + path, body_file(opts.workdir),
                   token=server.agent_token or opts.token, seconds=seconds, threads=opts.threads,
                   connections=opts.connections)


def measure(scenario: Scenario, opts: Options) -> dict[str, Any]:
    started = time.monotonic()
    server, url = launch(scenario, opts)
    try:
        rss_ready = server.rss_mib()
        warm = load(server, opts, opts.warmup) if opts.warmup > 0 else None
        srv.settle(postgres=scenario.database == "postgres")
        meter = cpu.Meter(server, postgres=scenario.database == "postgres")
        result = load(server, opts, opts.seconds)
        spent = meter.per_request(result.requests)
        rss_after = server.rss_mib()
    finally:
        server.stop()
    out: dict[str, Any] = {"scenario": scenario.name, "label": scenario.label,
                           "workers": opts.workers, **result.as_dict(),
                           "rss_mib_ready": rss_ready, "rss_mib_after": rss_after, **spent}
    if scenario.database is not None and scenario.log:
        # Every answered decision must be in the log (the server drained it on stop).
        answered = result.requests + (warm.requests if warm else 0)
        out["logged"] = srv.logged_decisions(url or "")
        out["logged_ok"] = out["logged"] >= answered
    out["wall_seconds"] = round(time.monotonic() - started, 1)
    return out
