"""The operators' page against a real `toolgate serve`: the world a test agent makes
(tests/ui/test_page.py asserts on it, tests/ui/screenshots.py photographs it,
docs/images/ui-*.png), and a small driver of the page."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import WebDriverWait

ADMIN_TOKEN = "ui-test-admin-token"
READER = {"writes": False, "checkpointable": True, "unsafe": False}
WRITER = {"writes": True, "checkpointable": True, "unsafe": False}
UNSAFE = {"writes": True, "checkpointable": True, "unsafe": True}
# A value from the log that would run if the page wrote it as HTML.
HOSTILE = 'rm -rf build <img src=x onerror="document.title=1">'
PRINCIPALS = {"admin": "ops-lead", "agent": "release-bot", "approver": "alice",
              "auditor": "carol"}


@dataclass
class World:
    url: str
    keys: dict[str, str]  # role -> secret (each key is named ui-<role>)
    plan: str  # the release plan: its calls need an approval
    reads: str  # the inspect plan
    default_plan: str  # a plan on the global default profile
    deploy: dict  # the call held for approval
    approval_id: str
    reported: str  # a read whose outcome was reported (cost 0.25)
    held: str  # a read allowed with an estimated_cost and no report yet
    ids: dict[str, list[str]] = field(default_factory=dict)

    def client(self, role: str = "admin") -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=bearer(self.keys[role]), timeout=10)

    def hold(self, version: str) -> dict:
        """A new deploy of another version: denied, with a pending approval of its own."""
        call = {**self.deploy, "tool": {**self.deploy["tool"],
                                        "args": {"service": "web", "version": version}}}
        with self.client("agent") as c:
            held = c.post("/v1/authorize-tool", json=call).json()
        assert held["deny"]["code"] == "human_approval_required", held
        return {"call": call, "approval_id": held["deny"]["details"]["approval"]["approval_id"],
                "decision_id": held["decision_id"]}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def setup(url: str) -> World:
    """Project ops (server approvals, a shadow profile that wants
    approval of every call), two plans, a
    plan on the global default, four keys; then the agent makes decisions: reads allowed
    (one reported, one holding an estimate), unsafe calls denied, one deploy held for
    approval; and an auditor's replay."""
    with httpx.Client(base_url=url, headers=bearer(ADMIN_TOKEN), timeout=10) as c:
        for name, safety in (
                ("ops-guard", {"require_human_approval": True, "require_sandbox": False,
                               "require_checkpoints": False}),
                ("ops-read", {"require_sandbox": False, "require_checkpoints": False}),
                ("ops-strict", {"require_human_approval": True, "require_sandbox": False,
                                "require_checkpoints": False})):
            c.put(f"/v1/profiles/{name}", json={"safety": safety}).raise_for_status()
        for project in ("ops", "lab"):
            c.put(f"/v1/projects/{project}", json={}).raise_for_status()
        c.put("/v1/projects/ops/settings", json={
            "approval_mode": "server", "shadow_profile": "ops-strict"}).raise_for_status()
        c.put("/v1/actions/release", json={"project": "ops", "automation_profile": "ops-guard"}
              ).raise_for_status()
        c.put("/v1/actions/inspect", json={"project": "ops", "automation_profile": "ops-read"}
              ).raise_for_status()
        c.put("/v1/actions/tidy", json={"project": "lab"}).raise_for_status()
        keys = {"admin": ADMIN_TOKEN}
        made = {}
        for role in ("admin", "agent", "approver", "auditor"):
            made[role] = c.post("/v1/keys", json={
                "name": f"ui-{role}", "role": role, "projects": None,
                "principal": PRINCIPALS[role]}).json()
            keys[role] = made[role]["key"]
    with httpx.Client(base_url=url, headers=bearer(keys["agent"]), timeout=10) as c:
        plan = c.post("/v1/plans", json={"action_id": "release"}).json()["plan_id"]
        reads = c.post("/v1/plans", json={"action_id": "inspect"}).json()["plan_id"]
        default_plan = c.post("/v1/plans", json={"action_id": "tidy"}).json()["plan_id"]
        allowed = []
        for path in ("README.md", "setup.cfg", "src/app.py"):
            r = c.post("/v1/authorize-tool", json={"plan_id": reads, "tool": {
                "name": "read_file", "capability": READER, "args": {"path": path}},
                "context": {"estimated_cost": 0.5}}).json()
            assert r["allowed"] is True, r
            allowed.append(r["decision_id"])
        c.post(f"/v1/decisions/{allowed[0]}/outcome",
               json={"status": "succeeded", "cost": 0.25}).raise_for_status()
        for _ in range(2):
            c.post("/v1/authorize-tool", json={"plan_id": reads, "tool": {
                "name": "shell", "capability": UNSAFE, "args": {"cmd": HOSTILE}}}
                   ).raise_for_status()
        deploy = {"plan_id": plan, "tool": {"name": "deploy", "capability": WRITER,
                                            "args": {"service": "web", "version": "1.4.2"}},
                  "context": {"metadata": {"token": "s3cret"}}}
        held = c.post("/v1/authorize-tool", json=deploy).json()
        assert held["deny"]["code"] == "human_approval_required", held
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    with httpx.Client(base_url=url, headers=bearer(keys["auditor"]), timeout=10) as c:
        c.post("/v1/replay", json={"since": since, "candidate": {}}).raise_for_status()
    return World(url, keys, plan, reads, default_plan, deploy,
                 held["deny"]["details"]["approval"]["approval_id"], allowed[0], allowed[1],
                 ids={role: [made[role]["id"]] for role in made})


class Page:
    def __init__(self, driver, url: str) -> None:  # type: ignore[no-untyped-def]
        self.driver, self.url = driver, url
        # A shared, loaded CI machine; a view re-rendered between finding an element and
        # reading it (the page redraws after each answer) is read again, not a failure.
        self.wait = WebDriverWait(driver, 40,
                                  ignored_exceptions=(StaleElementReferenceException,))

    def find(self, css: str):  # type: ignore[no-untyped-def]
        return self.wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, css)))

    def visible(self, css: str):  # type: ignore[no-untyped-def]
        return self.wait.until(seen.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def all(self, css: str) -> list:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def go(self, fragment: str) -> None:
        self.driver.get(f"{self.url}/ui#{fragment}")

    def sign_in(self, key: str) -> None:
        self.driver.get(f"{self.url}/ui")
        # Signed in already (the tab keeps the last key): sign out first, as a person would.
        self.wait.until(lambda d: d.find_elements(By.ID, "key") or d.find_element(
            By.ID, "signout").is_displayed())
        if not self.all("#key"):
            self.find("#signout").click()
        box = self.find("#key")
        box.clear()
        box.send_keys(key)
        self.find("#signin button[type=submit]").click()
        self.wait.until(lambda d: d.find_element(By.ID, "who").text.strip())

    def text(self, css: str = "main") -> str:
        return self.find(css).text

    def rows(self, table: str) -> list[list[str]]:
        return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in self.all(f"#{table} tr") if tr.find_elements(By.TAG_NAME, "td")]

    def column(self, table: str, name: str) -> list[str]:
        heads = [th.text for th in self.all(f"#{table} th")]
        return [r[heads.index(name)] for r in self.rows(table)]

    def errors(self) -> list[str]:
        """Severe console entries: the page's own script errors and CSP violations."""
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
