"""The operators' page walked through in a real browser against a real `toolgate serve`:
what tests/ui/test_page.py asserts and what tests/ui/screenshots.py photographs
(docs/images/ui-*.png), one walk for both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import WebDriverWait

ADMIN_TOKEN = "ui-test-admin-token"
READER = {"writes": False, "checkpointable": True, "unsafe": False}
WRITER = {"writes": True, "checkpointable": True, "unsafe": False}
UNSAFE = {"writes": True, "checkpointable": True, "unsafe": True}
# A value from the log that would run if the page wrote it as HTML.
HOSTILE = 'rm -rf build <img src=x onerror="document.title=1">'


@dataclass
class World:
    url: str
    admin: str  # an admin key (the page signs in with it)
    agent: str
    approver: str
    plan: str
    deploy: dict  # the call that needs an approval


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def setup(url: str) -> World:
    """Project ops (server approvals), a named profile, a plan, three keys; then the agent
    makes decisions: reads allowed, unsafe calls denied, one deploy held for approval."""
    with httpx.Client(base_url=url, headers=_bearer(ADMIN_TOKEN), timeout=10) as c:
        c.put("/v1/profiles/ops-guard", json={"safety": {
            "require_human_approval": True, "require_sandbox": False,
            "require_checkpoints": False}}).raise_for_status()
        c.put("/v1/projects/ops", json={}).raise_for_status()
        c.put("/v1/projects/ops/settings", json={"approval_mode": "server"}).raise_for_status()
        c.put("/v1/profiles/ops-read", json={"safety": {
            "require_sandbox": False, "require_checkpoints": False}}).raise_for_status()
        c.put("/v1/actions/release", json={"project": "ops", "automation_profile": "ops-guard"}
              ).raise_for_status()
        c.put("/v1/actions/inspect", json={"project": "ops", "automation_profile": "ops-read"}
              ).raise_for_status()
        plan = c.post("/v1/plans", json={"action_id": "release"}).json()["plan_id"]
        reads = c.post("/v1/plans", json={"action_id": "inspect"}).json()["plan_id"]
        keys = {}
        for role in ("admin", "agent", "approver"):
            keys[role] = c.post("/v1/keys", json={
                "name": f"ui-{role}", "role": role, "projects": None,
                "principal": {"admin": "ops-lead", "agent": "release-bot",
                              "approver": "alice"}[role]}).json()["key"]
    deploy = {"plan_id": plan, "tool": {"name": "deploy", "capability": WRITER,
                                        "args": {"service": "web", "version": "1.4.2"}},
              "context": {"metadata": {"token": "s3cret"}}}
    with httpx.Client(base_url=url, headers=_bearer(keys["agent"]), timeout=10) as c:
        for path in ("README.md", "setup.cfg", "src/app.py"):
            c.post("/v1/authorize-tool", json={"plan_id": reads, "tool": {
                "name": "read_file", "capability": READER, "args": {"path": path}}}
                   ).raise_for_status()
        for _ in range(2):
            c.post("/v1/authorize-tool", json={"plan_id": reads, "tool": {
                "name": "shell", "capability": UNSAFE, "args": {"cmd": HOSTILE}}}
                   ).raise_for_status()
        held = c.post("/v1/authorize-tool", json=deploy).json()
        assert held["deny"]["code"] == "human_approval_required", held
    return World(url, keys["admin"], keys["agent"], keys["approver"], plan, deploy)


class Page:
    def __init__(self, driver, url: str) -> None:  # type: ignore[no-untyped-def]
        self.driver, self.url = driver, url
        self.wait = WebDriverWait(driver, 40)  # a shared, loaded CI machine

    def find(self, css: str):  # type: ignore[no-untyped-def]
        return self.wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, css)))

    def all(self, css: str) -> list:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def go(self, fragment: str) -> None:
        self.driver.get(f"{self.url}/ui#{fragment}")

    def sign_in(self, key: str) -> None:
        self.driver.get(f"{self.url}/ui")
        box = self.find("#key")
        box.clear()
        box.send_keys(key)
        self.find("#signin button[type=submit]").click()
        self.wait.until(lambda d: d.find_element(By.ID, "who").text.strip())

    def sign_out(self) -> None:
        self.find("#signout").click()
        self.find("#key")

    def rows(self, table: str) -> list[list[str]]:
        return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in self.all(f"#{table} tr") if tr.find_elements(By.TAG_NAME, "td")]

    def errors(self) -> list[str]:
        """Severe console entries: the page's own script errors and CSP violations."""
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]


def walk(driver, world: World, shot: Callable[[str], None]) -> None:  # type: ignore[no-untyped-def]
    page = Page(driver, world.url)
    # Signed in with an admin key: the overview counts what the agent just did.
    page.sign_in(world.admin)
    page.find("#chart .uplot")
    assert page.find("#total").text == "6"
    codes = page.rows("top-codes")
    assert codes[0][:2] == ["unsafe_tool", "2"], codes
    assert ["human_approval_required", "1"] == codes[1][:2], codes
    assert page.rows("top-tools")[0][:2] == ["shell", "2"]
    shot("overview")

    # The decision list: newest first, every decision the agent made.
    page.go("decisions")
    page.find("#decision-list")
    rows = page.rows("decision-list")
    assert [r[3] for r in rows] == ["deploy", "shell", "shell", "read_file", "read_file",
                                    "read_file"], rows
    shot("decisions")
    # Filter by code (typed into the form, as an operator would).
    code = page.find("#filter-code")
    code.send_keys("unsafe_tool")
    page.find("#filters button[type=submit]").click()
    page.wait.until(lambda d: len(page.rows("decision-list")) == 2)
    assert {r[5] for r in page.rows("decision-list")} == {"unsafe_tool"}
    # One decision: its checks in order, the profile's provenance, the masked context.
    page.all("#decision-list tr.link")[0].click()
    checks = page.find("#checks")
    items = [li.text for li in checks.find_elements(By.TAG_NAME, "li")]
    assert items[:3] == ["read_only: passed", "checkpoint: passed",
                         "unsafe: denied (unsafe_tool)"], items
    assert all(i.endswith("not run") for i in items[3:])
    profile = page.find("#profile").text
    assert "ops-read" in profile and "action" in profile, profile
    assert "None reported." in page.find("#outcome").text
    # Values from the log are text: the markup shows as characters and never runs.
    assert HOSTILE.replace('"', '\\"') in driver.find_element(By.TAG_NAME, "main").text
    assert not page.all("main img") and driver.title == "toolgate"
    shot("decision")

    # The deploy held for approval: its detail shows the masked secret, never the value.
    page.go("decisions?code=human_approval_required")
    page.wait.until(lambda d: len(page.rows("decision-list")) == 1)
    page.all("#decision-list tr.link")[0].click()
    page.find("#checks")
    body = driver.find_element(By.TAG_NAME, "main").text
    assert "[masked]" in body and "s3cret" not in body

    # Approvals: the pending one, granted here by an approver; the agent's retry is allowed.
    page.sign_out()
    page.sign_in(world.approver)
    assert [a.text for a in page.all("#nav a")] == ["Approvals", "Plans"]
    page.find("#approval-list")
    pending = page.rows("approval-list")
    assert len(pending) == 1 and pending[0][1:5] == ["pending", "ops", world.plan, "deploy"]
    shot("approvals")
    page.find("#approval-list button.grant").click()
    page.find("#no-approvals")
    retry = httpx.post(f"{world.url}/v1/authorize-tool", json=world.deploy,
                       headers=_bearer(world.agent), timeout=10).json()
    assert retry["allowed"] is True, retry
    page.find("#state option[value=used]").click()
    page.wait.until(lambda d: page.rows("approval-list")
                    and page.rows("approval-list")[0][1] == "used")
    # The approver may not read the log: no overview, and a clear page if asked for it.
    page.go("overview")
    assert "Not allowed" in page.find("#not-allowed").text

    # Back as the admin: the retry is the newest decision, allowed; the plan's lock.
    page.sign_out()
    page.sign_in(world.admin)
    page.go("decisions")
    page.find("#decision-list")
    newest = page.rows("decision-list")[0]
    assert newest[3] == "deploy" and newest[4] == "allow", newest
    page.go(f"plans?plan_id={world.plan}")
    lock = page.find(".panel").text
    assert "ops-guard" in lock and "release" in lock
    shot("plan")
    page.go("audit")
    page.find("#verify").click()
    assert page.find("#chain-state").text == "The chain verifies."
    shot("audit")

    # An agent key: the page is not for it.
    page.sign_out()
    page.sign_in(world.agent)
    notice = page.find("#not-allowed").text
    assert "Not allowed" in notice and "role agent" in notice
    shot("not-allowed")
    errors = page.errors()
    assert not errors, errors
