"""The operators' page's review of a changed tool (SPEC §19 "Tool pinning"), in a headless
Chromium against a real `toolgate serve` (SQLite; the routes' storage runs on both
databases in test_pins_api.py): the pinned and the new definition side by side, the
changed fields marked, text never run as HTML; an auditor sees it without an Accept
button; an admin's Accept pins the new definition and the review goes away."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.test_pins_api import definition
from tests.serving import serve, stop
from tests.ui.browser import chrome
from tests.ui.scenario import HOSTILE, Page

pytestmark = pytest.mark.slow
ADMIN = "pins-page-admin"
OLD, NEW = "Read a file", "Read a file, then " + HOSTILE


def _key(client: httpx.Client, role: str) -> str:
    r = client.post("/v1/keys", json={"name": f"pins-{role}", "role": role,
                                          "projects": None})
    assert r.status_code == 201, r.text
    return r.json()["key"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
         ) -> Iterator[tuple[str, dict[str, str]]]:
    folder = tmp_path_factory.mktemp("pins-page")
    shutil.copyfile(sqlite_template, folder / "toolgate.db")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{folder}/toolgate.db",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN}, folder / "serve.log", timeout=240)
    try:
        with httpx.Client(base_url=url, timeout=30,
                          headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
            keys = {role: _key(admin, role) for role in ("agent", "auditor")}
        yield url, keys
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def driver():  # type: ignore[no-untyped-def]
    browser = chrome()
    try:
        yield browser
    finally:
        browser.quit()


def _report(url: str, agent: str, description: str) -> dict:
    r = httpx.post(f"{url}/v1/gateway/pins/fs/read/seen", timeout=30,
                   json={"definition": {**definition(description),
                                        "inputSchema": {"type": "object", "properties": {
                                            "path": {"type": "string"}}, "required": (
                                            ["path"] if description == NEW else [])}}},
                   headers={"Authorization": f"Bearer {agent}"})
    assert r.status_code == 200, r.text
    return r.json()


def _errors(page: Page) -> list[str]:
    # The sign-in page asks /v1/whoami without a key first (401, by design): not the view's.
    return [e for e in page.errors() if "whoami" not in e]


def test_a_changed_tool_is_reviewed_side_by_side_and_accepted(site, driver) -> None:
    url, keys = site
    old_digest = _report(url, keys["agent"], OLD)["digest"]
    new_digest = _report(url, keys["agent"], NEW)["digest"]
    page = Page(driver, url)

    # An auditor sees the change, and may not accept it.
    page.sign_in(keys["auditor"])
    page.go("pins")
    review = page.visible("#pin-reviews .pin-review")
    assert "fs.read" in review.text and "changed" in review.text
    assert not page.all(".pin-accept")
    assert "An admin can accept it" in review.text

    page.sign_in(ADMIN)
    page.go("pins")
    pinned = page.visible(".pin-side.pinned")
    seen = page.find(".pin-side.seen")
    assert pinned.find_element("css selector", "[data-field=description]").text == OLD
    # The upstream's text is shown as text: the <img onerror> never runs.
    assert seen.find_element("css selector", "[data-field=description]").text == NEW
    assert driver.title == "toolgate"
    changed = [dd.find_element("css selector", "[data-field]").get_attribute("data-field")
               for dd in seen.find_elements("css selector", "dd.pin-changed")]
    assert changed == ["description", "inputSchema"]
    assert old_digest[:12] in pinned.text and new_digest[:12] in seen.text
    assert page.rows("pins")[0][:2] == ["fs.read", "changed"]

    page.find(".pin-accept").click()
    page.visible("#no-pin-changes")
    assert page.rows("pins")[0][:3] == ["fs.read", "pinned", new_digest[:12]]
    pin = httpx.get(f"{url}/v1/gateway/pins/fs/read", timeout=30,
                    headers={"Authorization": f"Bearer {ADMIN}"}).json()
    assert (pin["status"], pin["digest"], pin["seen"]) == ("pinned", new_digest, None)
    assert pin["definition"]["description"] == NEW
    assert _errors(page) == []
