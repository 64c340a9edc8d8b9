"""People sign in to the page with a real OpenID Provider (SPEC §21): the code flow with
PKCE, state and nonce, the session cookie, CSRF, the person as the principal of approvals
and records, sign-out, and a provider that stops answering; on SQLite and Postgres.

The provider is tests/oidc/provider.mjs (oidc-provider), one per module; a person's browser
is httpx following the provider's forms (the Chromium run is tests/ui/test_oidc_browser.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import func, select, update

from app.auth.tables import PersonSession
from app.config import Settings
from app.log.tables import LogRecord
from app.main import create_app
from tests.approvals.test_approvals import authorize as decide
from tests.approvals.test_approvals import call, new_key, setup
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN
from tests.oidc.provider import Provider, authorize, provider, query_of

pytestmark = pytest.mark.slow
BASE = "http://127.0.0.1"
REDIRECT = BASE + "/ui/callback"


@pytest.fixture(scope="module")
def idp() -> Iterator[Provider]:
    with provider([REDIRECT]) as p:
        yield p


@asynccontextmanager
async def page_app(settings: Settings
                   ) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """(a browser's client: no key, keeps cookies; an admin's client) of one app."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as browser, \
                httpx.AsyncClient(transport=transport, base_url=BASE,
                                  headers=ADMIN_HEADERS) as admin:
            browser.app = admin.app = app  # type: ignore[attr-defined]
            yield browser, admin


@pytest.fixture
async def page(database_url: str, idp: Provider):
    settings = Settings(database_url=database_url, admin_token=ADMIN_TOKEN,
                        decision_log_writer_nice=0, **idp.settings(REDIRECT))
    async with page_app(settings) as clients:
        yield clients


async def sign_in(browser: httpx.AsyncClient, who: str) -> dict:
    r = await browser.get("/ui/login")
    assert r.status_code == 302, r.text
    url = await authorize(r.headers["location"], who, stop_at=REDIRECT)
    r = await browser.get("/ui/callback", params=query_of(url))
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/ui"
    me = await browser.get("/v1/whoami")
    assert me.status_code == 200, me.text
    return me.json()


async def sessions(app) -> int:
    async with app.state.sessions() as session:
        return (await session.execute(select(func.count()).select_from(PersonSession)
                                      .where(PersonSession.kind == "session"))).scalar()


async def test_sign_in_names_the_person_with_the_role_of_their_group(page):
    browser, admin = page
    r = await browser.get("/ui/login")
    location = r.headers["location"]
    asked = query_of(location)
    assert asked["code_challenge_method"] == "S256" and asked["state"] and asked["nonce"]
    assert "code_verifier" not in location
    login_cookie = r.headers["set-cookie"]
    assert "HttpOnly" in login_cookie and "SameSite=lax" in login_cookie
    url = await authorize(location, "alice", stop_at=REDIRECT)
    r = await browser.get("/ui/callback", params=query_of(url))
    assert r.status_code == 303, r.text
    cookie = next(c for c in r.headers.get_list("set-cookie")
                  if c.startswith("toolgate_session="))
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Max-Age=28800" in cookie
    assert "Secure" not in cookie  # loopback: a browser drops Secure cookies over http
    me = (await browser.get("/v1/whoami")).json()
    assert me["key_id"] == "user:alice" and me["principal"] == "alice@example.test"
    assert me["role"] == "approver" and me["projects"] == ["payments"]
    assert me["person"]["email"] == "alice@example.test"
    assert me["person"]["name"] == "Alice Approver" and me["csrf_token"]
    # What the role allows, and only that: approvals of its project, no keys, no audit.
    assert (await browser.get("/v1/approvals")).status_code == 200
    assert (await browser.get("/v1/keys")).status_code == 403
    bob = httpx.AsyncClient(transport=browser._transport, base_url=BASE)
    async with bob:
        me = await sign_in(bob, "bob")
        assert me["role"] == "auditor" and me["projects"] is None
        assert me["key_id"] == "user:bob"
    assert await sessions(admin.app) == 2


async def test_a_grant_names_the_person_and_needs_the_csrf_token(page):
    browser, admin = page
    plan = await setup(admin, project="payments")
    agent = await new_key(admin, "agent", principal="build-bot")
    pending = (await decide(admin, agent, call(plan)))["deny"]["details"]["approval"]
    me = await sign_in(browser, "alice")
    grant = f"/v1/approvals/{pending['approval_id']}/grant"
    for headers in ({}, {"X-CSRF-Token": "forged"}, {"X-CSRF-Token": ""}):
        r = await browser.post(grant, json={}, headers=headers)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "csrf_failed"
    shown = (await admin.get(f"/v1/approvals/{pending['approval_id']}")).json()
    assert shown["state"] == "pending"  # nothing changed
    r = await browser.post(grant, json={"note": "ok"}, headers={"X-CSRF-Token": me["csrf_token"]})
    assert r.status_code == 200, r.text
    assert r.json()["decided_by"] == "user:alice"
    async with admin.app.state.sessions() as session:
        kinds = (await session.execute(
            select(LogRecord.key_id).where(LogRecord.kind == "approval"))).scalars().all()
    assert "user:alice" in kinds  # the audit record of the grant names the person
    assert (await decide(admin, agent, call(plan)))["allowed"] is True


async def test_self_approval_compares_the_person(page):
    """An agent key whose principal is alice's own service account asked: alice may not
    decide it, signed in or not."""
    browser, admin = page
    plan = await setup(admin, project="payments")
    agent = await new_key(admin, "agent", principal="alice@example.test")
    pending = (await decide(admin, agent, call(plan)))["deny"]["details"]["approval"]
    me = await sign_in(browser, "alice")
    r = await browser.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                           headers={"X-CSRF-Token": me["csrf_token"]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "self_approval_forbidden"


async def test_sign_out_ends_the_session_and_a_stale_cookie_is_refused(page):
    browser, admin = page
    me = await sign_in(browser, "alice")
    cookie = browser.cookies["toolgate_session"]
    r = await browser.post("/ui/logout", headers={"X-CSRF-Token": "forged"})
    assert r.status_code == 403 and await sessions(admin.app) == 1
    r = await browser.post("/ui/logout", headers={"X-CSRF-Token": me["csrf_token"]})
    assert r.status_code == 200, r.text
    assert r.json()["end_session_url"].startswith(admin.app.state.settings.oidc_issuer)
    assert await sessions(admin.app) == 0
    assert (await browser.get("/v1/whoami")).status_code == 401
    # The old cookie, sent again (a copy kept elsewhere): no session, 401.
    browser.cookies.set("toolgate_session", cookie)
    r = await browser.get("/v1/whoami")
    assert r.status_code == 401 and r.json()["error"]["code"] == "session_expired"
    browser.cookies.set("toolgate_session", "made-up")
    r = await browser.get("/v1/whoami")
    assert r.status_code == 401
    # API keys keep working beside sessions.
    assert (await admin.get("/v1/whoami")).json()["key_id"] == "admin-token"


async def test_a_session_ends_at_its_lifetime(page):
    """Bounded: past expires_at (here moved into the past) the cookie is refused, 401."""
    browser, admin = page
    await sign_in(browser, "alice")
    async with admin.app.state.sessions() as session, session.begin():
        await session.execute(update(PersonSession).where(PersonSession.kind == "session")
                              .values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    store = admin.app.state.auth.people.store
    store._cache.clear()  # as on another replica, or once the cache's second is over
    r = await browser.get("/v1/whoami")
    assert r.status_code == 401 and r.json()["error"]["code"] == "session_expired"


async def test_sign_ins_under_way_are_bounded(page, monkeypatch):
    browser, admin = page
    monkeypatch.setattr("app.auth.sessions.MAX_LOGINS", 3)
    answers = [(await browser.get("/ui/login")).status_code for _ in range(5)]
    assert answers == [302, 302, 302, 503, 503]
    r = await browser.get("/ui/login")
    assert "too many sign-ins" in r.text


async def test_a_callback_not_begun_here_or_replayed_makes_no_session(page):
    browser, admin = page
    r = await browser.get("/ui/login")
    url = await authorize(r.headers["location"], "alice", stop_at=REDIRECT)
    params = query_of(url)
    # Another state than the one this browser's sign-in holds.
    r = await browser.get("/ui/callback", params={**params, "state": "forged"})
    assert r.status_code == 400 and "state" in r.text
    # The sign-in under way was used up by that attempt: the right state now fails too.
    r = await browser.get("/ui/callback", params=params)
    assert r.status_code == 400 and "sign in again" in r.text
    # A callback without the login cookie (another browser): refused.
    other = httpx.AsyncClient(transport=browser._transport, base_url=BASE)
    async with other:
        r = await other.get("/ui/callback", params=params)
    assert r.status_code == 400
    # The provider's own error is shown, not a session.
    r = await browser.get("/ui/login")
    state = query_of(r.headers["location"])["state"]
    r = await browser.get("/ui/callback", params={"state": state, "error": "access_denied"})
    assert r.status_code == 401 and "access_denied" in r.text
    assert await sessions(admin.app) == 0


async def test_a_person_whose_groups_give_no_role_is_not_signed_in(database_url, idp):
    settings = Settings(database_url=database_url, admin_token=ADMIN_TOKEN,
                        decision_log_writer_nice=0, **{
                            **idp.settings(REDIRECT),
                            "oidc_role_map": {"toolgate-admins": {"role": "admin"}}})
    async with page_app(settings) as (browser, admin):
        r = await browser.get("/ui/login")
        url = await authorize(r.headers["location"], "alice", stop_at=REDIRECT)
        r = await browser.get("/ui/callback", params=query_of(url))
        assert r.status_code == 403 and "no value of the" in r.text
        assert await sessions(admin.app) == 0


async def test_provider_down_sign_in_fails_clearly_sessions_go_on(database_url):
    with provider([REDIRECT]) as own:
        settings = Settings(database_url=database_url, admin_token=ADMIN_TOKEN,
                            decision_log_writer_nice=0, **own.settings(REDIRECT))
        async with page_app(settings) as (browser, admin):
            await sign_in(browser, "alice")
            own.proc.terminate()
            own.proc.wait(timeout=10)
            assert (await browser.get("/v1/whoami")).status_code == 200
            # A new sign-in: the metadata is cached, the provider is not there to go to;
            # a fresh process (no metadata yet) answers a page saying so.
        async with page_app(settings) as (browser2, _):
            r = await browser2.get("/ui/login")
            assert r.status_code == 503
            assert "identity provider could not be reached" in r.text
            # The session made before goes on, on another process too (the database).
            browser2.cookies.set("toolgate_session", browser.cookies["toolgate_session"])
            r = await browser2.get("/v1/whoami")
            assert r.status_code == 200 and r.json()["key_id"] == "user:alice"
