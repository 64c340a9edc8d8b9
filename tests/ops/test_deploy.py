"""The monitoring profile of compose.yaml, its Prometheus scrape config and the Grafana
dashboard (deploy/): the dashboard asks only for metrics toolgate exports, in PromQL that
Prometheus's own promtool parses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from app.kit.metrics import _definitions

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "toolgate.json"


def _exported() -> set[str]:
    names = set()
    for metric in _definitions().values():
        for family in metric.describe():
            kind, name = family.type, family.name
            names |= ({f"{name}_total"} if kind == "counter" else
                      {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
                      if kind == "histogram" else {name})
    return names


def _expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p["targets"]]


def test_dashboard_asks_only_for_exported_metrics() -> None:
    exported = _exported()
    used = {name for expr in _expressions() for name in re.findall(r"toolgate_\w+", expr)}
    assert used and used <= exported, used - exported
    # every metric of SPEC §13 is on the dashboard
    for name in ("toolgate_decisions_total", "toolgate_decision_seconds_bucket",
                 "toolgate_log_commit_seconds_bucket", "toolgate_log_batch_records_sum",
                 "toolgate_log_queue_depth", "toolgate_approvals_pending",
                 "toolgate_http_requests_total", "toolgate_storage_errors_total"):
        assert name in used, name


def test_compose_monitoring_profile_scrapes_both_replicas() -> None:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    monitoring = {n: s for n, s in services.items() if "monitoring" in s.get("profiles", ())}
    assert set(monitoring) == {"prometheus", "grafana"}
    for service in monitoring.values():
        assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", service["image"]), service["image"]
        for volume in service.get("volumes", ()):
            assert (ROOT / volume.split(":")[0]).exists(), volume
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    targets = config["scrape_configs"][0]["static_configs"][0]["targets"]
    replicas = {n for n, s in services.items() if s.get("ports") and "build" not in s
                and s.get("image") == "toolgate:local"}
    assert {t.split(":")[0] for t in targets} == replicas


@pytest.mark.skipif(shutil.which("promtool") is None
                    and os.environ.get("TOOLGATE_REQUIRE_PROMETHEUS") != "1",
                    reason="promtool not installed "
                    "(Debian's prometheus package; .ci/run installs it)")
def test_promtool_parses_the_config_and_every_dashboard_query(tmp_path: Path) -> None:
    checked = subprocess.run(["promtool", "check", "config", "--syntax-only",
                              str(ROOT / "deploy/prometheus/prometheus.yml")],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = [{"record": f"toolgate:panel_{i}",
              "expr": e.replace("$__rate_interval", "1m").replace("$job", ".*")}
             for i, e in enumerate(_expressions())]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard",
                                                                    "rules": rules}]}))
    checked = subprocess.run(["promtool", "check", "rules", str(tmp_path / "rules.yml")],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
