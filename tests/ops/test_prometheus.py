"""Debian's Prometheus scrapes a `toolgate serve --workers 2` and its PromQL API counts
the decisions the test made: every worker's counts in the one scrape (SPEC §13). Bounded
in time, 127.0.0.1 only; skipped where the prometheus binary is not installed (.ci/run
installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.serving import free_port, serve, stop

pytestmark = pytest.mark.slow
PROMETHEUS = shutil.which("prometheus")
TOKEN = "test-admin-token-for-prometheus"
CAP = {"writes": False, "checkpointable": True, "unsafe": False}


def _query(base: str, promql: str) -> float | None:
    r = httpx.get(f"{base}/api/v1/query", params={"query": promql}, timeout=5)
    r.raise_for_status()
    result = r.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


# CI (TOOLGATE_REQUIRE_PROMETHEUS=1, .ci/run) runs it, and a missing binary fails it.
@pytest.mark.skipif(PROMETHEUS is None
                    and os.environ.get("TOOLGATE_REQUIRE_PROMETHEUS") != "1",
                    reason="prometheus is not installed "
                    "(apt-get install prometheus; .ci/run does)")
def test_prometheus_counts_every_workers_decisions(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"  # where serve makes its metrics folder
    temp.mkdir()
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
                       "TOOLGATE_ADMIN_TOKEN": TOKEN, "TMPDIR": str(temp)},
                      tmp_path / "serve.log", workers=2, timeout=120)
    port = free_port()
    target = url.removeprefix("http://")
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: toolgate\n    scrape_interval: 1s\n"
        f"    static_configs:\n      - targets: ['{target}']\n")
    assert PROMETHEUS is not None
    prometheus = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"))  # noqa: SIM115
    base = f"http://127.0.0.1:{port}"
    try:
        allowed, denied = 30, 12
        headers = {"Authorization": f"Bearer {TOKEN}", "Connection": "close"}
        prefixes = set()
        for i in range(allowed + denied):
            body = {"tool": {"name": "t", "capability": {**CAP, "writes": i >= allowed}},
                    "context": {"plan_read_only": True}}
            # A new connection each time: the two workers share the listening socket.
            r = httpx.post(f"{url}/v1/authorize-tool", json=body, headers=headers, timeout=30)
            assert r.status_code == 200 and r.json()["allowed"] is (i < allowed)
            prefixes.add(r.headers["x-request-id"].split("-")[0])
        deadline = time.monotonic() + 90
        seen: tuple = ()
        while time.monotonic() < deadline:
            try:
                seen = (_query(base, 'sum(toolgate_decisions_total{allowed="true"})'),
                        _query(base, 'sum(toolgate_decisions_total{code="read_only"})'),
                        _query(base, "sum(toolgate_decision_seconds_count)"))
            except httpx.HTTPError:
                seen = ()
            if seen == (allowed, denied, allowed + denied):
                break
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            time.sleep(1)
        assert seen == (allowed, denied, allowed + denied), (
            seen, (tmp_path / "prometheus.log").read_text()[-1500:])
        up = _query(base, 'up{job="toolgate"}')
        assert up == 1
        # the commit histograms come from the shared writer process, in the same scrape
        commits = _query(base, "sum(toolgate_log_batch_records_sum)")
        assert commits == allowed + denied
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prometheus.kill()
        assert [p.name for p in temp.iterdir() if p.name.startswith("toolgate-metrics-")]
        stop(proc)
    assert not list(temp.iterdir())  # the metrics folder is removed at the end
