"""The page's sign-in with a real OpenID Provider, end to end in Chromium (SPEC §21): sign
in on the provider's form, see only what the role allows, grant an approval, the record
names the person, sign out; a cookie without a session shows the sign-in page. A real
`toolgate serve` on SQLite and on Postgres, one provider (tests/oidc) per module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.approvals.test_approvals import authorize, call, new_key, setup
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN
from tests.gateway.conftest import _serve_on, module_database  # noqa: F401 (a fixture)
from tests.oidc.provider import Provider, provider
from tests.serving import free_port, stop
from tests.ui.browser import chrome

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(module_database: str, tmp_path_factory) -> Iterator[tuple[str, Provider]]:  # noqa: F811
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with provider([url + "/ui/callback"]) as idp:
        env = {"TOOLGATE_DATABASE_URL": module_database, "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN,
               "TOOLGATE_OIDC_ISSUER": idp.issuer, "TOOLGATE_OIDC_CLIENT_ID": "toolgate-page",
               "TOOLGATE_OIDC_CLIENT_SECRET": "toolgate-page-secret",
               "TOOLGATE_OIDC_SCOPES": "openid email profile groups",
               "TOOLGATE_OIDC_ROLE_MAP": '{"toolgate-approvers": {"role": "approver", '
                                         '"projects": ["payments"]}}'}
        folder: Path = tmp_path_factory.mktemp("oidc-browser")
        proc = _serve_on(env, folder / "toolgate.log", str(port))
        try:
            yield url, idp
        finally:
            stop(proc)


@pytest.fixture(scope="module")
def driver():  # type: ignore[no-untyped-def]
    d = chrome()
    yield d
    d.quit()


def pending_approval(url: str) -> str:
    async def make() -> str:
        async with httpx.AsyncClient(base_url=url, headers=ADMIN_HEADERS, timeout=30) as c:
            plan = await setup(c, project="payments")
            agent = await new_key(c, "agent", principal="build-bot")
            answer = await authorize(c, agent, call(plan))
            return answer["deny"]["details"]["approval"]["approval_id"]
    return asyncio.run(make())


def test_a_person_signs_in_grants_and_signs_out(world, driver):
    url, idp = world
    approval_id = pending_approval(url)
    # The page re-renders what it shows (a grant re-draws the approval): an element read
    # between two renders is stale, and the wait reads it again.
    wait = WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,))
    driver.delete_all_cookies()
    driver.get(url + "/ui")
    wait.until(lambda d: d.find_elements(By.ID, "oidc-signin"))[0].click()
    # The provider's own sign-in form, then its consent.
    wait.until(lambda d: d.find_elements(By.NAME, "login"))[0].send_keys("alice")
    driver.find_element(By.NAME, "password").send_keys("any password")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: d.current_url.startswith(url)
               or d.find_elements(By.CSS_SELECTOR, "button[autofocus], button[type=submit]"))
    if not driver.current_url.startswith(url):
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: "Alice Approver" in d.find_element(By.ID, "who").text)
    assert "approver" in driver.find_element(By.ID, "who").text
    # Only what an approver of project payments may open.
    assert driver.find_elements(By.ID, "nav-approvals")
    assert not driver.find_elements(By.ID, "nav-audit")
    driver.get(f"{url}/ui#approval/{approval_id}")
    wait.until(lambda d: d.find_elements(By.ID, "grant"))[0].click()
    wait.until(lambda d: d.find_elements(By.ID, "grant-dialog-confirm"))[0].click()
    wait.until(lambda d: d.find_element(By.ID, "approval-state").text == "granted")
    wait.until(lambda d: "user:alice" in d.find_element(By.ID, "decided-by").text)
    shown = httpx.get(f"{url}/v1/approvals/{approval_id}", headers=ADMIN_HEADERS).json()
    assert shown["decided_by"] == "user:alice"
    records = httpx.get(f"{url}/v1/decisions?kind=approval&limit=50",
                        headers=ADMIN_HEADERS).json()["items"]
    assert any(r.get("key_id") == "user:alice" for r in records), records
    # Sign out: the session is gone; the page is the sign-in page again.
    cookie = driver.get_cookie("toolgate_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    driver.find_element(By.ID, "signout").click()
    old = httpx.Client(base_url=url, cookies={"toolgate_session": cookie["value"]})
    with old:  # the session is ended server-side: the old cookie is refused
        wait.until(lambda d: old.get("/v1/whoami").status_code == 401)
    driver.get(url + "/ui")
    wait.until(lambda d: d.find_elements(By.ID, "signin"))


def test_a_cookie_without_a_session_shows_the_sign_in_page(world, driver):
    url, _ = world
    driver.get(url + "/ui/favicon.svg")
    driver.delete_all_cookies()
    driver.add_cookie({"name": "toolgate_session", "value": "no-such-session", "path": "/"})
    driver.get(url + "/ui")
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "oidc-signin"))
    assert driver.find_elements(By.ID, "signin")
