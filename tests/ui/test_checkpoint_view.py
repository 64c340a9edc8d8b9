"""The audit view's checkpoint panel (SPEC §16): in a headless Chromium against a real
`toolgate serve` whose log is signed, the latest checkpoint shows with its seq, its age and
that it verifies; the same page on an unsigned log says there is none."""

from __future__ import annotations

import time

import httpx
import pytest

from app.log.note import Signer
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
