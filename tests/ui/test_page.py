"""The operators' page end to end (SPEC §13, docs/ui.md): a headless Chromium
(tests/ui/browser.py) against a real `toolgate serve`, on SQLite and on Postgres, one
server and browser per database for the module (tests/ui/scenario.py makes its world).
One test per thing an operator or an approver relies on; each makes what it changes
itself (its own held call, its own decisions), and every test leaves the browser's console
free of errors (a CSP violation is one)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By

from app.gateway.mapping import UI_APPROVAL
from tests.conftest import _pg_database
from tests.serving import serve, stop
from tests.ui.browser import chrome
from tests.ui.scenario import ADMIN_TOKEN, HOSTILE, READER, Page, World, setup

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def site(request, tmp_path_factory, sqlite_template) -> Iterator[World]:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("ui")
    if request.param == "sqlite":
        shutil.copyfile(sqlite_template, tmp / "ui.db")
        urls: Iterator[str] = iter([f"sqlite+aiosqlite:///{tmp}/ui.db"])
    else:
        urls = _pg_database(request.getfixturevalue("pg_pool"))
    database_url = next(urls)
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url,
                       "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN}, tmp / "serve.log",
                      timeout=180)  # starting took 50 s with the 2 cores loaded 20 deep
    try:
        yield setup(url)
    finally:
        stop(proc)
        for _ in urls:  # gives the Postgres database back (reset or dropped)
            pass


@pytest.fixture(scope="module")
def driver():  # type: ignore[no-untyped-def]
    d = chrome()
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture
def page(site: World, driver) -> Iterator[Page]:  # type: ignore[no-untyped-def]
    p = Page(driver, site.url)
    driver.get_log("browser")  # what earlier tests left
    yield p
    errors = p.errors()
    assert not errors, errors


def _allow_read(world: World, path: str) -> str:
    with world.client("agent") as c:
        r = c.post("/v1/authorize-tool", json={"plan_id": world.reads, "tool": {
            "name": "read_file", "capability": READER, "args": {"path": path}}}).json()
    assert r["allowed"] is True, r
    return r["decision_id"]


# --- the overview ---------------------------------------------------------------------------

def test_the_overview_counts_what_the_agent_did(page, site):
    page.sign_in(site.keys["admin"])
    page.find("#chart .uplot")
    with site.client() as c:
        total = c.get("/v1/decisions/stats").json()["total"]["count"]
    assert page.text("#total") == str(total)
    codes = page.rows("top-codes")
    assert codes[0][:2] == ["unsafe_tool", "2"], codes
    assert ["human_approval_required", "1"] == codes[1][:2], codes
    assert page.rows("top-tools")[0][:2] == ["shell", "2"]


def test_the_deny_code_bars_are_drawn_to_scale(page, site):
    page.sign_in(site.keys["admin"])
    page.find("#top-codes .bar")
    bars = [b.size["width"] for b in page.all("#top-codes .bar")]
    # unsafe_tool 2, human_approval_required 1 (and possibly later tests' denies).
    assert bars[0] >= 100, bars
    assert abs(bars[1] / bars[0] - 0.5) < 0.05, bars


def test_the_overview_shows_the_approvals_waiting_and_for_how_long(page, site):
    page.sign_in(site.keys["admin"])
    with site.client() as c:
        waiting = c.get("/v1/approval-stats").json()
    assert page.text("#pending-count") == str(waiting["pending"]) and waiting["pending"] >= 1
    assert page.text("#pending-oldest").startswith("oldest waiting ")
    assert page.text("#pending-oldest").split()[-1] in ("s", "min", "h")
    page.find("#pending").click()
    page.find("#approval-list")
    assert page.driver.current_url.endswith("#approvals")


def test_the_overview_refreshes_itself_until_paused(page, site):
    page.sign_in(site.keys["admin"])
    page.go("overview?project=ops")
    before = int(page.text("#total"))
    assert "every 10 s" in page.text("#refreshed")
    _allow_read(site, "refresh-1")
    # Asked again on its own within 10 s (a generous deadline on a loaded machine).
    page.wait.until(lambda d: page.text("#total") == str(before + 1))
    page.find("#refresh-toggle").click()
    assert page.text("#refreshed").startswith("paused")
    _allow_read(site, "refresh-2")
    paused_at = time.monotonic()
    while time.monotonic() - paused_at < 13:  # longer than the 10 s period: none comes
        assert page.text("#total") == str(before + 1)
        time.sleep(0.5)
    page.find("#refresh-toggle").click()  # resuming shows the figures of now
    page.wait.until(lambda d: page.text("#total") == str(before + 2))
    assert "every 10 s" in page.text("#refreshed")


# --- the decision list --------------------------------------------------------------------

def test_the_list_names_who_made_each_decision(page, site):
    page.sign_in(site.keys["admin"])
    page.go("decisions?project=ops")
    page.find("#decision-list")
    by = page.column("decision-list", "by")
    assert by and all(b == "release-bot (key ui-agent)" for b in by), by


def test_the_list_has_outcome_and_cost_columns(page, site):
    page.sign_in(site.keys["admin"])
    page.go(f"decisions?plan_id={site.reads}")
    page.find("#decision-list")
    rows = {tr.get_attribute("data-id"): tr for tr in page.all("#decision-list tr[data-id]")}
    heads = [th.text for th in page.all("#decision-list th")]

    def cell(decision_id: str, name: str) -> str:
        return rows[decision_id].find_elements(By.TAG_NAME, "td")[heads.index(name)].text

    assert cell(site.reported, "outcome") == "succeeded"
    assert cell(site.reported, "cost") == "0.25"
    assert cell(site.held, "outcome") == "not reported"
    assert cell(site.held, "cost") == "held 0.5"


@pytest.mark.parametrize("kind", ["approval", "outcome", "replay", "config", "plan"])
def test_the_list_filters_every_record_kind(page, site, kind):
    page.sign_in(site.keys["admin"])
    page.go("decisions")
    page.find("#decision-list")
    page.find(f"#filter-kind option[value={kind}]").click()
    page.find("#filters button[type=submit]").click()
    page.wait.until(lambda d: d.current_url.endswith(f"kind={kind}"))
    page.find("#decision-list")
    with site.client() as c:
        expected = [d["decision_id"] for d in c.get("/v1/decisions", params={
            "kind": kind, "limit": 50}).json()["items"]]
    shown = [tr.get_attribute("data-id") for tr in page.all("#decision-list tr[data-id]")]
    assert shown == expected and expected
    assert set(page.column("decision-list", "kind")) == {kind}


def test_the_list_filters_decisions_whose_shadow_verdict_differs(page, site):
    page.sign_in(site.keys["admin"])
    with site.client() as c:
        differs = [d["decision_id"] for d in c.get("/v1/decisions", params={
            "shadow_changed": "true"}).json()["items"]]
        agrees = [d["decision_id"] for d in c.get("/v1/decisions", params={
            "shadow_changed": "false"}).json()["items"]]
    assert differs and agrees  # the shadow profile wants approval: reads differ
    for value, expected in (("true", differs), ("false", agrees)):
        page.go("decisions")
        page.find("#decision-list")
        page.find(f"#filter-shadow option[value={value}]").click()
        page.find("#filters button[type=submit]").click()
        page.wait.until(lambda d, v=value: d.current_url.endswith(f"shadow_changed={v}"))
        page.find("#decision-list")
        shown = [tr.get_attribute("data-id") for tr in page.all("#decision-list tr[data-id]")]
        assert shown == expected


def test_filtering_by_code_from_the_form(page, site):
    page.sign_in(site.keys["admin"])
    page.go("decisions")
    page.find("#filter-code").send_keys("unsafe_tool")
    page.find("#filters button[type=submit]").click()
    page.wait.until(lambda d: d.current_url.endswith("code=unsafe_tool"))
    page.wait.until(lambda d: len(page.rows("decision-list")) == 2)
    assert set(page.column("decision-list", "code")) == {"unsafe_tool"}


# --- one decision ---------------------------------------------------------------------------

def test_a_decision_shows_its_checks_profile_and_who_made_it(page, site):
    page.sign_in(site.keys["admin"])
    page.go("decisions?code=unsafe_tool")
    page.wait.until(lambda d: len(page.rows("decision-list")) == 2)
    page.all("#decision-list tr.link")[0].click()
    checks = page.find("#checks")
    items = [li.text for li in checks.find_elements(By.TAG_NAME, "li")]
    assert items[:3] == ["read_only: passed", "checkpoint: passed",
                         "unsafe: denied (unsafe_tool)"], items
    assert all(i.endswith("not run") for i in items[3:])
    profile = page.text("#profile")
    assert "ops-read v1" in profile and "action" in profile, profile
    assert page.text("#decision-by") == "release-bot (key ui-agent)"
    assert "None reported." in page.text("#outcome")


def test_values_from_the_log_are_text_and_never_run(page, site):
    page.sign_in(site.keys["admin"])
    page.go("decisions?code=unsafe_tool")
    page.wait.until(lambda d: len(page.rows("decision-list")) == 2)
    page.all("#decision-list tr.link")[0].click()
    page.find("#checks")
    assert HOSTILE.replace('"', '\\"') in page.text()
    assert not page.all("main img") and page.driver.title == "toolgate"


def test_a_shadow_verdict_reads_as_a_verdict(page, site):
    page.sign_in(site.keys["admin"])
    page.go(f"decision/{site.held}")
    shadow = page.text("#shadow")
    assert "ops-strict v1" in shadow
    assert "would answer\ndeny (human_approval_required)" in shadow, shadow
    assert "the answer\nallow" in shadow and "differs from the answer" in shadow
    assert "{" not in shadow  # a verdict, not JSON


def test_a_held_call_masks_its_secret(page, site):
    page.sign_in(site.keys["admin"])
    page.go("decisions?code=human_approval_required")
    page.wait.until(lambda d: page.rows("decision-list"))
    page.all("#decision-list tr.link")[-1].click()
    page.find("#checks")
    assert "[masked]" in page.text() and "s3cret" not in page.text()


# --- plans ----------------------------------------------------------------------------------

def test_a_plan_on_the_global_default_says_so(page, site):
    page.sign_in(site.keys["admin"])
    page.go("plans")
    page.find("#plan-list")
    profiles = dict(zip(page.column("plan-list", "plan"), page.column("plan-list", "profile"),
                        strict=True))
    assert profiles[site.default_plan] == "global default"
    assert profiles[site.plan] == "ops-guard v1"
    assert "vnull" not in page.text() and "(inline)" not in page.text()


def test_a_plan_shows_its_lock_ledger_and_who_created_it(page, site):
    page.sign_in(site.keys["approver"])
    page.go(f"plans?plan_id={site.reads}")
    lock = page.text("#lock")
    assert "ops-read v1" in lock and "action" in lock
    assert page.text("#plan-creator") == "release-bot (key ui-agent)"
    ledger = page.text("#ledger")
    assert "spent\n0.25" in ledger and "no limit" in ledger, ledger


# --- approvals ------------------------------------------------------------------------------

def test_an_approval_shows_the_call_it_would_allow(page, site):
    page.sign_in(site.keys["approver"])
    page.find("#approval-list")
    row = page.find(f"#approval-list tr[data-id='{site.approval_id}']")
    assert "release-bot (key ui-agent)" in row.text
    row.click()
    asked = page.text("#asked")
    assert "deploy" in asked and site.plan in asked
    assert page.text("#asked-by") == "release-bot (key ui-agent)"
    assert "requires human approval" in page.text("#deny-message")
    assert '"version": "1.4.2"' in page.text("#approval-args")
    context = page.text("#approval-context")
    assert '"token": "[masked]"' in context and "s3cret" not in page.text()
    plan = page.text("#approval-plan")
    assert "ops-guard v1" in plan and "spent\n0" in plan and "release-bot" in plan, plan


def test_the_link_printed_in_deny_texts_opens_the_approval(page, site):
    """Hooks and the gateway print `<toolgate>/ui/#/approvals/<id>` (issue 45 item 1): it
    opens that approval, not the queue."""
    held = site.hold("1.9.9")
    page.sign_in(site.keys["approver"])
    page.driver.get(site.url + UI_APPROVAL.format(held["approval_id"]))
    page.wait.until(lambda d: page.text("#approval-state") == "pending")
    assert "1.9.9" in page.text("#approval-args")


def test_an_approval_page_says_what_is_true_now(page, site):
    """Issue 45 item 14: a pending approval has no uses yet; the agent's own
    human_approved is flagged as no evidence; once granted, the message no longer ends
    "is pending"."""
    call = {**site.deploy, "context": {"metadata": {"human_approved": True}},
            "tool": {**site.deploy["tool"], "args": {"service": "web", "version": "1.9.8"}}}
    with site.client("agent") as c:
        held = c.post("/v1/authorize-tool", json=call).json()["deny"]["details"]["approval"]
    page.sign_in(site.keys["approver"])
    page.go(f"approval/{held['approval_id']}")
    page.wait.until(lambda d: page.text("#approval-state") == "pending")
    assert page.text("#uses-left") == "set by the grant"
    assert "not evidence" in page.text("#self-approved")
    assert page.text("#deny-message").endswith(f"approval {held['approval_id']} is pending")
    with site.client("approver") as c:
        c.post(f"/v1/approvals/{held['approval_id']}/grant", json={}).raise_for_status()
    page.driver.refresh()
    page.wait.until(lambda d: page.text("#approval-state") == "granted")
    assert page.text("#uses-left") == "1"
    assert page.text("#deny-message").endswith("was pending then, and is granted now")


def test_granting_asks_first_for_note_ttl_and_uses(page, site):
    held = site.hold("2.0.0")
    page.sign_in(site.keys["approver"])
    page.go(f"approval/{held['approval_id']}")
    page.find("#grant").click()
    dialog = page.visible("#grant-dialog")
    assert "deploy" in dialog.text and "2.0.0" in dialog.text
    assert not page.all("#grant-dialog textarea")  # no reason box: that is Reject's
    page.find("#grant-dialog button.back").click()  # backing out grants nothing
    page.wait.until(lambda d: not page.all("#grant-dialog"))
    with site.client() as c:
        assert c.get(f"/v1/approvals/{held['approval_id']}").json()["state"] == "pending"
    page.find("#grant").click()
    page.visible("#grant-dialog")
    page.find("#grant-note").send_keys("release window")
    ttl = page.find("#grant-ttl")
    ttl.clear()
    ttl.send_keys("120")
    uses = page.find("#grant-uses")
    uses.clear()
    uses.send_keys("2")
    page.find("#grant-dialog-confirm").click()
    page.wait.until(lambda d: page.text("#approval-state") == "granted")
    assert page.text("#decided-by") == "alice (key ui-approver)"
    with site.client() as c:
        granted = c.get(f"/v1/approvals/{held['approval_id']}").json()
    assert granted["uses_left"] == 2 and granted["note"] == "release window"
    assert 100 < (_seconds(granted["expires_at"]) - _seconds(granted["decided_at"])) <= 120
    with site.client("agent") as c:
        assert c.post("/v1/authorize-tool", json=held["call"]).json()["allowed"] is True


def test_the_reason_box_is_rejects_and_required(page, site):
    held = site.hold("3.0.0")
    page.sign_in(site.keys["approver"])
    page.find("#approval-list")
    assert not page.all("#approval-list input, #approval-list textarea")
    page.go(f"approval/{held['approval_id']}")
    page.find("#reject").click()
    page.visible("#reject-dialog")
    page.find("#reject-dialog-confirm").click()  # empty: refused by the form
    assert page.all("#reject-dialog")
    with site.client() as c:
        assert c.get(f"/v1/approvals/{held['approval_id']}").json()["state"] == "pending"
    page.find("#reject-reason").send_keys("not during the freeze")
    page.find("#reject-dialog-confirm").click()
    page.wait.until(lambda d: page.text("#approval-state") == "rejected")
    assert "not during the freeze" in page.text("#state-panel")


def test_an_approver_may_not_decide_what_their_own_principal_asked(page, site):
    held = site.hold("4.0.0")
    with site.client() as c:  # a second key of the agent's principal
        key = c.post("/v1/keys", json={"name": "bot-approver", "role": "approver",
                                       "projects": None, "principal": "release-bot"}).json()
    page.sign_in(key["key"])
    page.go(f"approval/{held['approval_id']}")
    page.find("#grant").click()
    page.visible("#grant-dialog")
    page.find("#grant-dialog-confirm").click()
    error = page.visible("#grant-dialog .error")
    assert "self_approval_forbidden" in error.text
    page.driver.get_log("browser")  # the refused request (403) is logged by the browser


# --- who sees what --------------------------------------------------------------------------

@pytest.mark.parametrize("role, views", [
    ("admin", ["Overview", "Decisions", "Approvals", "Plans", "Pins", "Rules", "Audit"]),
    ("auditor", ["Overview", "Decisions", "Approvals", "Pins", "Rules", "Audit"]),
    ("approver", ["Approvals", "Plans", "Pins", "Rules"]),
    ("agent", []),
])
def test_each_roles_navigation_shows_only_what_it_may_open(page, site, role, views):
    page.sign_in(site.keys[role])
    assert [a.text for a in page.all("#nav a")] == views
    for view in views:  # each one opens
        page.find(f"#nav-{view.lower()}").click()
        page.wait.until(lambda d, v=view: page.find("main h1").text.startswith(v))
        assert not page.all("#not-allowed")
    if role == "agent":
        notice = page.text("#not-allowed")
        assert "Not allowed" in notice and "role agent" in notice


def test_a_view_the_key_may_not_read_says_so(page, site):
    page.sign_in(site.keys["approver"])
    page.go("overview")
    assert "Not allowed" in page.text("#not-allowed")


def test_the_audit_view_verifies_the_chain(page, site):
    page.sign_in(site.keys["admin"])
    page.go("audit")
    page.find("#verify").click()
    assert page.text("#chain-state") == "The chain verifies."


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_a_hook_decision_names_its_agent(page, site):
    """A coding agent's hook decision shows the agent (detail.agent, SPEC §20)."""
    with site.client("admin") as c:
        c.put("/v1/tools/agent_read", json={"capability": READER, "safety_category": "safe"}
              ).raise_for_status()
    body = {"session_id": "ui-gem", "cwd": "/work/repo", "hook_event_name": "PreToolUse",
            "transcript_path": "/home/dev/.gemini/tmp/x/chats/ui-gem.json",
            "tool_name": "agent_read", "tool_input": {"file_path": "/work/repo/a"},
            "tool_use_id": "ui-gem-1"}
    with site.client("agent") as c:
        answer = c.post(f"/v1/hooks/claude-code?plan_id={site.reads}&agent=gemini-cli",
                        json=body).json()["hookSpecificOutput"]
    assert answer["permissionDecision"] == "allow", answer
    decision_id = answer["permissionDecisionReason"].rsplit("[decision ", 1)[1].rstrip("]")
    page.sign_in(site.keys["admin"])
    page.go(f"decision/{decision_id}")
    assert page.text("#decision-agent") == "gemini-cli"
