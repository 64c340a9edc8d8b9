"""Real parts for the gateway's tests (SPEC §14): one `toolgate serve` per module on
SQLite and on Postgres, the gateway as a `toolgate gateway` process, the npm reference
servers (tests/gateway/package.json, installed by .ci/run) and the recording upstream.

tests/client/conftest.py's rule applies: this checkout's client goes first on sys.path."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import ADMIN_TOKEN, _pg_admin, _pg_url
from tests.serving import TOOLGATE, free_port, serve, stop

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
RECORDER = HERE / "recording_server.py"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# Reads, writes in a sandbox, no checkpoints (an MCP tool is not checkpointable).
PROFILE = {"safety": {"require_sandbox": True, "require_checkpoints": False,
                      "allow_unsafe_tools": False}}


def npm_bin(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} missing: run `npm ci --prefix tests/gateway` (`make test` does)")
    return str(path)


@dataclass
class Toolgate:
    url: str
    proc: subprocess.Popen
    env: dict[str, str]
    log: Path
    agent_token: str = ""
    project: str = ""
    action: str = ""
    extra: dict = field(default_factory=dict)

    def admin(self, method: str, path: str, body: object = None) -> httpx.Response:
        return httpx.request(method, self.url + path, json=body, headers=ADMIN, timeout=30)

    def decisions(self, **query: str) -> list[dict]:
        """Every decision of this module's project (newest first), with its outcome."""
        items: list[dict] = []
        params = {"limit": "1000", "project": self.project, **query}
        while True:
            page = self.admin("GET", "/v1/decisions?" + "&".join(
                f"{k}={v}" for k, v in params.items())).json()
            items.extend(page["items"])
            if not page.get("next_cursor"):
                return items
            params["cursor"] = page["next_cursor"]

    def decision(self, decision_id: str) -> dict:
        return self.admin("GET", f"/v1/decisions/{decision_id}").json()

    def restart(self) -> None:
        """Start it again on the same database and port."""
        port = self.url.rsplit(":", 1)[1]
        self.proc = _serve_on(self.env, self.log, port)


def _serve_on(env: dict[str, str], log: Path, port: str) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    full.update({"TOOLGATE_LOG_LEVEL": "warning", **env})
    with open(log, "ab") as out:
        proc = subprocess.Popen([TOOLGATE, "serve", "--port", port], env=full, stdout=out,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text()[-2000:])
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("toolgate did not come back")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def module_database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                    sqlite_template: Path) -> Iterator[str]:
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("gwdb") / "toolgate.db"
        shutil.copyfile(sqlite_template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    import asyncio

    template = request.getfixturevalue("pg_template")
    if template is None:
        pytest.skip("Postgres not reachable (set TOOLGATE_REQUIRE_POSTGRES=1 to fail)")
    name = f"toolgate_gw_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_admin(f"CREATE DATABASE {name} TEMPLATE {template}"))
    try:
        yield _pg_url(name)
    finally:
        asyncio.run(_pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def start_toolgate(database_url: str, folder: Path) -> Toolgate:
    env = {"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN}
    # Generous: on a shared 2-core machine a start can take over a minute.
    proc, url = serve(env, folder / "toolgate.log", timeout=240)
    tg = Toolgate(url, proc, env, folder / "toolgate.log")
    tg.project = "gw"
    tg.action = "gw-explore"
    assert tg.admin("PUT", "/v1/profiles/gateway", PROFILE).status_code in (200, 201)
    assert tg.admin("PUT", f"/v1/actions/{tg.action}",
                    {"project": tg.project, "automation_profile": "gateway"}
                    ).status_code in (200, 201)
    key = tg.admin("POST", "/v1/keys", {"name": "gateway", "role": "agent",
                                        "projects": [tg.project]})
    assert key.status_code == 201, key.text
    tg.agent_token = key.json()["key"]
    return tg


@pytest.fixture(scope="module")
def toolgate(module_database: str, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Toolgate]:
    tg = start_toolgate(module_database, tmp_path_factory.mktemp("toolgate"))
    yield tg
    stop(tg.proc)


def write_config(folder: Path, tg_url: str, servers: dict, *, listen: dict | None = None,
                 action: str = "gw-explore", **extra: object) -> Path:
    # timeout_seconds bounds a whole decision, retries included (SPEC §19): a first decision
    # after toolgate restarts on a loaded 2-core machine can take over 3 s.
    doc = {"version": 1, "toolgate": {"url": tg_url, "token_env": "GW_TOOLGATE_TOKEN",
                                      "timeout_seconds": 10},
           "listen": listen or {"stdio": True}, "plan": {"action": action},
           "servers": servers, **extra}
    path = folder / f"gateway-{secrets.token_hex(4)}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def gateway_env(tg: Toolgate, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update({"GW_TOOLGATE_TOKEN": tg.agent_token, **extra})
    return env


def recorder_command(record: Path) -> list[str]:
    return [sys.executable, str(RECORDER), str(record)]


def records(record: Path) -> list[dict]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def assert_all_forwarded_were_allowed(tg: Toolgate, record: Path, server: str) -> None:
    """Every call the upstream received has an allow recorded for exactly its tool and
    arguments (a multiset: one allow per received call)."""
    from app.gateway.calls import args_sha256

    allows: dict[tuple[str, str | None], int] = {}
    for item in tg.decisions(allowed="true"):
        args = ((item.get("detail") or {}).get("tool") or {}).get("args")
        key = (item["tool"], args_sha256(args) if isinstance(args, dict) else None)
        allows[key] = allows.get(key, 0) + 1
    for received in records(record):
        key = (f"{server}.{received['tool']}", args_sha256(received["arguments"]))
        assert allows.get(key, 0) > 0, f"forwarded without a recorded allow: {received}"
        allows[key] -= 1


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start_gateway_http(config: Path, env: dict[str, str], log: Path
                       ) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([TOOLGATE, "gateway", "-c", str(config)], env=env,
                                stdout=out, stderr=subprocess.STDOUT)


__all__ = ["ADMIN", "Toolgate", "free_port", "npm_bin", "start_toolgate", "write_config"]


@dataclass
class HttpGateway:
    url: str
    token: str
    proc: subprocess.Popen
    log: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def http_gateway(tg: Toolgate, folder: Path, servers: dict, **extra: object) -> HttpGateway:
    """A `toolgate gateway` on a Streamable HTTP listener (free loopback port, a token),
    returned once it answers."""
    port = free_port()
    token = secrets.token_urlsafe(16)
    config = write_config(folder, tg.url, servers, listen={"http": {
        "host": "127.0.0.1", "port": port, "path": "/mcp", "token_env": "GW_LISTEN_TOKEN"}},
        **extra)
    log = folder / f"gateway-{port}.log"
    proc = start_gateway_http(config, gateway_env(tg, GW_LISTEN_TOKEN=token), log)
    url = f"http://127.0.0.1:{port}/mcp"

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"gateway exited: {log.read_text()[-3000:]}")
        try:
            httpx.get(url, timeout=1)
            return True
        except httpx.HTTPError:
            return False

    wait_for(answers, 90, "the gateway's HTTP listener")
    return HttpGateway(url, token, proc, log)


def stop_gateway(gw: HttpGateway) -> None:
    stop(gw.proc)
