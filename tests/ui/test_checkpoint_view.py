"""The audit view's checkpoint panel (SPEC §16): in a headless Chromium against a real
`toolgate serve` whose log is signed, the latest checkpoint shows with its seq, its age and
that it verifies; the same page on an unsigned log says there is none."""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import pytest

from app.log.note import Signer
from tests.decisions.test_checkpoints import forge
from tests.decisions.test_forged_log import _rewrite as rewrite
from tests.serving import serve, stop
from tests.ui.browser import chrome
from tests.ui.scenario import Page

pytestmark = pytest.mark.slow
ADMIN = "checkpoint-ui-admin"
TOOL = {"name": "t", "capability": {"writes": False, "checkpointable": True, "unsafe": False}}


@pytest.fixture
def browser():
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


def _latest(url: str) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/v1/audit/checkpoint", timeout=30,
                           headers={"Authorization": f"Bearer {ADMIN}"})
        if answer.status_code == 200:
            return answer.json()
        time.sleep(0.1)
    raise AssertionError("no checkpoint within 120 s")


def test_the_audit_view_shows_the_latest_checkpoint(browser, database_url, tmp_path):
    key = tmp_path / "log.key"
    key.write_text(Signer.generate("toolgate.ui/log").key() + "\n")
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": ADMIN,
                       "TOOLGATE_LOG_SIGNING_KEY": str(key),
                       "TOOLGATE_CHECKPOINT_SECONDS": "0.2",
                       "TOOLGATE_DECISION_LOG_TIMEOUT_SECONDS": "60"},
                      tmp_path / "serve.log", timeout=240)
    try:
        answer = httpx.post(f"{url}/v1/authorize-tool", json={"tool": TOOL}, timeout=60,
                            headers={"Authorization": f"Bearer {ADMIN}"})
        assert answer.status_code == 200, answer.text
        point = _latest(url)
        page = Page(browser, url)
        page.sign_in(ADMIN)
        page.go("audit")
        state = page.find("#checkpoint-state")
        page.wait.until(lambda d: "verifies" in d.find_element("id", "checkpoint-state").text)
        assert state.text == "The latest checkpoint verifies."
        panel = page.find("#checkpoint").text
        assert point["head_hash"] in panel and "toolgate.ui/log" in panel and " ago)" in panel
        assert page.errors() == []
    finally:
        stop(proc)


def test_the_audit_view_says_signing_stopped_over_a_rewritten_log(browser, database_url,
                                                                  tmp_path):
    """Issue 45 item 5: the log rewritten with recomputed hashes under the service; the
    panel says the latest checkpoint does not verify and that signing stopped."""
    key = tmp_path / "log.key"
    key.write_text(Signer.generate("toolgate.ui/log").key() + "\n")
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": ADMIN,
                       "TOOLGATE_LOG_SIGNING_KEY": str(key),
                       "TOOLGATE_CHECKPOINT_SECONDS": "0.2",
                       "TOOLGATE_DECISION_LOG_TIMEOUT_SECONDS": "60"},
                      tmp_path / "serve.log", timeout=240)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    try:
        answer = httpx.post(f"{url}/v1/authorize-tool", json={"tool": TOOL}, timeout=60,
                            headers=admin)
        assert answer.status_code == 200, answer.text
        _latest(url)
        records = [orjson.loads(line) for line in httpx.get(
            f"{url}/v1/audit/export", headers=admin, timeout=60).text.splitlines()]
        asyncio.run(rewrite(database_url, forge(records, 0)))
        page = Page(browser, url)
        page.sign_in(ADMIN)
        page.go("audit")
        stopped = page.find("#checkpoint-stopped")
        assert "Signing has stopped" in stopped.text and "degraded" in stopped.text
        assert "does NOT verify" in page.text("#checkpoint-state")
        assert page.errors() == []
    finally:
        stop(proc)


def test_an_unsigned_log_has_no_checkpoint_to_show(browser, tmp_path):
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite:///{tmp_path / 'u.db'}",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN}, tmp_path / "serve.log", timeout=240)
    try:
        page = Page(browser, url)
        page.sign_in(ADMIN)
        page.go("audit")
        page.wait.until(lambda d: "No checkpoint" in d.find_element("id",
                                                                     "checkpoint-state").text)
    finally:
        stop(proc)
