"""The page's call-rule views (SPEC §18, docs/ui.md): in a headless Chromium against a real
`toolgate serve` with examples/claude-code.yaml applied, the Rules view lists the shipped
rules; one rule shows the decisions it matched (GET /v1/decisions?rule=); a decision a rule
denied names it in its Rules panel, with a link back to the rule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.serving import TOOLGATE, serve, stop
from tests.ui.browser import chrome
from tests.ui.scenario import Page

pytestmark = pytest.mark.slow
ADMIN = "rules-ui-admin"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def browser():
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


def test_the_rules_views(browser, tmp_path):
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/t.db",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN}, tmp_path / "serve.log", timeout=240)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(TOOLGATE_URL=url, TOOLGATE_TOKEN=ADMIN)
        applied = subprocess.run([TOOLGATE, "apply", "-f", "examples/claude-code.yaml"],
                                 cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=120)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        plan = httpx.post(f"{url}/v1/plans", json={"action_id": "coding"}, headers=admin,
                          timeout=60).json()["plan_id"]
        denied = httpx.post(f"{url}/v1/authorize-tool", headers=admin, timeout=60, json={
            "plan_id": plan, "tool": {"name": "Bash", "args": {"command": "cat .env"}},
            "context": {"sandbox_root": "/work/repo", "variables": {"HOME": "/home/dev"}}}
        ).json()
        assert denied["deny"]["code"] == "rule_denied", denied
        page = Page(browser, url)
        page.sign_in(ADMIN)
        page.go("rules")
        listed = page.find("#rules").text
        for rule_id in ("deny-secrets", "ask-git-push", "classify-reads"):
            assert rule_id in listed
        page.go("rule/deny-secrets")
        page.wait.until(lambda d: d.find_elements("id", "rule-decisions"))
        assert denied["decision_id"][:8] in page.find("#rule-decisions").text
        page.go(f"decision/{denied['decision_id']}")
        page.wait.until(lambda d: d.find_elements("id", "decision-rules"))
        panel = page.find("#decision-rules").text
        assert "deny-secrets" in panel and "deny" in panel
        assert page.errors() == []
    finally:
        stop(proc)
