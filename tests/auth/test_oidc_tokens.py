"""Tokens toolgate must refuse (SPEC §21): an ID token at the page's callback and an access
token at the gateway with the wrong issuer, audience, signature, nonce or expiry, or
`alg: none`: 401 and nothing changes. The issuer here is a key of the test's own, served as
a discovery document and JWKS through httpx's MockTransport, so each claim can be wrong on
its own under a valid signature (the real provider's runs: test_oidc_page.py,
test_oidc_gateway.py). Also: the JWKS cache's bound and its refetch at most once a minute."""

from __future__ import annotations

import base64
import dataclasses
import json
import time

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey
from sqlalchemy import func, select

from app.auth.oidc import Issuer, IssuerUnavailable, TokenRejected
from app.auth.oidc_login import People
from app.auth.sessions import SessionStore
from app.auth.tables import PersonSession
from app.gateway.config import OAuthListen
from app.gateway.oauth import SCOPE_KEY, OAuthResource
from app.policyfile.document import PolicyFileError, load_policy, people_of_file
from tests.conftest import app_client

ISSUER = "https://idp.example.test"
AUDIENCE = "http://127.0.0.1:8787/mcp"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
OTHER = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # same kid, another key


class FakeIdP:
    """Discovery, JWKS and a token endpoint answering `id_token`; counts JWKS fetches."""

    def __init__(self, keys: list[dict] | None = None) -> None:
        self.keys = keys if keys is not None else [KEY.as_dict(private=False)]
        self.jwks_fetches = 0
        self.down = False
        self.id_token = ""

    def handler(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("provider down")
        path = request.url.path
        if path == "/.well-known/openid-configuration":
            return httpx.Response(200, json={
                "issuer": ISSUER, "jwks_uri": ISSUER + "/jwks",
                "authorization_endpoint": ISSUER + "/auth", "token_endpoint": ISSUER + "/token"})
        if path == "/jwks":
            self.jwks_fetches += 1
            return httpx.Response(200, json={"keys": self.keys})
        if path == "/token":
            return httpx.Response(200, json={"id_token": self.id_token,
                                             "access_token": "x", "token_type": "Bearer"})
        return httpx.Response(404)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


def token(key: RSAKey = KEY, *, alg: str = "RS256", kid: str | None = "k1", **claims) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300,
            **claims}
    body = {k: v for k, v in body.items() if v is not None}
    header = {"alg": alg, **({"kid": kid} if kid else {})}
    return jwt.encode(header, body, key)


def unsigned(**claims) -> str:
    def b64(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    now = int(time.time())
    return b64({"alg": "none", "kid": "k1"}) + "." + b64(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 300, **claims}) + "."


BAD = {
    "wrong issuer": lambda: token(iss="https://evil.example.test"),
    "wrong audience": lambda: token(aud="http://127.0.0.1:9999/mcp"),
    "expired": lambda: token(exp=int(time.time()) - 120),
    "no expiry": lambda: token(exp=None),
    "no subject": lambda: token(sub=None),
    "not yet valid": lambda: token(nbf=int(time.time()) + 600),
    "another key's signature": lambda: token(OTHER),
    "alg none": lambda: unsigned(),
    "tampered payload": lambda: _tampered(),
    "not a JWT": lambda: "tg_not-a-jwt",
}


def _tampered() -> str:
    head, payload, sig = token().split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "mallory"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{sig}"


async def test_a_valid_token_is_accepted_and_the_keys_are_fetched_once():
    idp = FakeIdP()
    issuer = Issuer(ISSUER, transport=idp.transport())
    assert (await issuer.verify(token(), audience=AUDIENCE))["sub"] == "alice"
    for _ in range(5):
        assert issuer.verify_cached(token(), audience=AUDIENCE)["sub"] == "alice"
    assert idp.jwks_fetches == 1


@pytest.mark.parametrize("case", sorted(BAD))
async def test_a_bad_token_is_refused(case):
    issuer = Issuer(ISSUER, transport=FakeIdP().transport())
    with pytest.raises(TokenRejected):
        await issuer.verify(BAD[case](), audience=AUDIENCE)


async def test_a_wrong_nonce_is_refused():
    issuer = Issuer(ISSUER, transport=FakeIdP().transport())
    good = token(nonce="n-1")
    assert (await issuer.verify(good, audience=AUDIENCE, nonce="n-1"))["sub"] == "alice"
    for bad in (token(nonce="n-2"), token()):
        with pytest.raises(TokenRejected):
            await issuer.verify(bad, audience=AUDIENCE, nonce="n-1")


async def test_an_unknown_kid_refetches_at_most_once_a_minute():
    idp = FakeIdP()
    now = [1000.0]
    issuer = Issuer(ISSUER, transport=idp.transport(), clock=lambda: now[0])
    await issuer.verify(token(), audience=AUDIENCE)
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    for _ in range(20):  # a stream of unknown kids: no fetch within the minute
        with pytest.raises(TokenRejected):
            await issuer.verify(token(rotated, kid="k2"), audience=AUDIENCE)
    assert idp.jwks_fetches == 1
    idp.keys = [KEY.as_dict(private=False), rotated.as_dict(private=False)]
    now[0] += 61  # the provider rotated; a minute on, the new kid is fetched once
    assert (await issuer.verify(token(rotated, kid="k2"), audience=AUDIENCE))["sub"] == "alice"
    assert idp.jwks_fetches == 2


async def test_the_key_set_is_bounded_and_kept_when_the_provider_goes_down():
    many = [RSAKey.generate_key(2048, parameters={"kid": f"x{i}"}).as_dict(private=False)
            for i in range(3)] * 30  # 90 entries
    idp = FakeIdP(keys=[KEY.as_dict(private=False), *many])
    now = [0.0]
    issuer = Issuer(ISSUER, transport=idp.transport(), clock=lambda: now[0])
    await issuer.warm()
    assert len(issuer._keys.keys) == 50
    idp.down = True
    now[0] += 7200  # stale: refetch fails, the old set goes on
    assert (await issuer.verify(token(), audience=AUDIENCE))["sub"] == "alice"
    never = Issuer(ISSUER, transport=idp.transport())
    with pytest.raises(IssuerUnavailable):
        await never.verify(token(), audience=AUDIENCE)


async def test_a_remembered_token_is_refused_once_expired_or_its_key_set_changes():
    idp = FakeIdP()
    wall, mono = [time.time()], [0.0]
    issuer = Issuer(ISSUER, transport=idp.transport(), wall=lambda: wall[0],
                    clock=lambda: mono[0])
    short = token(exp=int(wall[0]) + 10)
    await issuer.verify(short, audience=AUDIENCE)
    assert issuer.verify_cached(short, audience=AUDIENCE)["sub"] == "alice"  # remembered
    wall[0] += 10 + 30 + 1  # past exp and the leeway: checked again, and refused
    with pytest.raises(TokenRejected):
        issuer.verify_cached(short, audience=AUDIENCE)
    # A remembered token whose key the provider withdrew: refused after the next fetch.
    wall[0] = time.time()
    good = token()
    await issuer.verify(good, audience=AUDIENCE)
    idp.keys = [RSAKey.generate_key(2048, parameters={"kid": "k9"}).as_dict(private=False)]
    mono[0] += 3601  # the set is stale: fetched again when next used
    with pytest.raises(TokenRejected):
        await issuer.verify(good, audience=AUDIENCE)
    # Another audience is another entry: never answered from this one's.
    with pytest.raises(TokenRejected):
        await issuer.verify(token(), audience="http://127.0.0.1:1/other")


# --- the gateway's listener ------------------------------------------------------------

def resource(idp: FakeIdP) -> tuple[OAuthResource, list[dict]]:
    seen: list[dict] = []

    async def inner(scope, receive, send):
        seen.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    config = OAuthListen(issuer=ISSUER, audience=AUDIENCE, scopes=["mcp"])
    return OAuthResource(inner, config, issuer=Issuer(ISSUER, transport=idp.transport())), seen


async def test_the_gateway_refuses_bad_tokens_and_passes_none_on():
    app, seen = resource(FakeIdP())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:8787") as c:
        meta = (await c.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert meta == {"resource": AUDIENCE, "authorization_servers": [ISSUER],
                        "bearer_methods_supported": ["header"], "scopes_supported": ["mcp"]}
        r = await c.post("/mcp", json={})
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == (
            'Bearer resource_metadata="http://127.0.0.1:8787/.well-known/'
            'oauth-protected-resource/mcp", scope="mcp"')
        for case, make in sorted(BAD.items()):
            r = await c.post("/mcp", json={}, headers={"Authorization": f"Bearer {make()}"})
            assert r.status_code == 401, case
            assert 'error="invalid_token"' in r.headers["www-authenticate"], case
        r = await c.post("/mcp", json={}, headers=[("Authorization", f"Bearer {token()}"),
                                                   ("Authorization", f"Bearer {token()}")])
        assert r.status_code == 401
        assert seen == []  # nothing reached the MCP server
        good = token(client_id="agent-app")
        r = await c.post("/mcp", json={}, headers={"Authorization": f"Bearer {good}"})
        assert r.status_code == 200
    [scope] = seen
    assert scope[SCOPE_KEY] == {"caller": "alice", "caller_issuer": ISSUER,
                                "caller_client": "agent-app"}
    assert all(name != b"authorization" for name, _ in scope["headers"])
    assert good.encode() not in repr(scope).encode()


# --- the page's callback -----------------------------------------------------------------

ID_BAD = {
    "several audiences, azp another client": dict(aud=["toolgate-page", "other"],
                                                  azp="other"),
    "wrong issuer": dict(iss="https://evil.example.test"),
    "wrong audience": dict(aud="another-client"),
    "expired": dict(exp=int(time.time()) - 120),
    "wrong nonce": dict(nonce="not-the-one"),
    "another key's signature": dict(key=OTHER),
    "alg none": dict(none=True),
}


@pytest.mark.parametrize("case", sorted(ID_BAD))
async def test_a_bad_id_token_at_the_callback_is_401_and_no_session(settings, case):
    idp = FakeIdP()
    oidc = {"oidc_issuer": ISSUER, "oidc_client_id": "toolgate-page",
            "oidc_client_secret": "s", "oidc_role_map": {"ops": {"role": "admin"}}}
    async with app_client(settings.model_copy(update=oidc)) as admin:
        app = admin.app
        people = People(app.state.settings, SessionStore(app.state.sessions, ttl=1),
                        transport=idp.transport())
        app.state.auth = dataclasses.replace(app.state.auth, people=people)
        async with httpx.AsyncClient(transport=admin._transport,
                                     base_url="http://127.0.0.1") as browser:
            r = await browser.get("/ui/login")
            assert r.status_code == 302, r.text
            asked = dict(httpx.URL(r.headers["location"]).params)
            options = dict(ID_BAD[case])
            claims = {"aud": "toolgate-page", "nonce": asked["nonce"], "groups": ["ops"]}
            if options.pop("none", False):
                idp.id_token = unsigned(**claims)
            else:
                idp.id_token = token(options.pop("key", KEY), **{**claims, **options})
            r = await browser.get("/ui/callback", params={"code": "c", "state": asked["state"]})
            assert r.status_code == 401, r.text
            assert "ID token is not valid" in r.text
            assert "toolgate_session" not in browser.cookies
        async with app.state.sessions() as session:
            count = (await session.execute(select(func.count()).select_from(PersonSession)
                                           .where(PersonSession.kind == "session"))).scalar()
        assert count == 0


async def test_a_good_id_token_at_the_callback_signs_in(settings):
    """The same path with nothing wrong: the refusals above are the claims', not the
    harness's."""
    idp = FakeIdP()
    oidc = {"oidc_issuer": ISSUER, "oidc_client_id": "toolgate-page",
            "oidc_client_secret": "s", "oidc_role_map": {"ops": {"role": "auditor"}}}
    async with app_client(settings.model_copy(update=oidc)) as admin:
        app = admin.app
        people = People(app.state.settings, SessionStore(app.state.sessions, ttl=1),
                        transport=idp.transport())
        app.state.auth = dataclasses.replace(app.state.auth, people=people)
        async with httpx.AsyncClient(transport=admin._transport,
                                     base_url="http://127.0.0.1") as browser:
            r = await browser.get("/ui/login")
            asked = dict(httpx.URL(r.headers["location"]).params)
            idp.id_token = token(aud="toolgate-page", nonce=asked["nonce"], groups=["ops"],
                                 email="alice@example.test", email_verified=True)
            r = await browser.get("/ui/callback", params={"code": "c", "state": asked["state"]})
            assert r.status_code == 303, r.text
            me = (await browser.get("/v1/whoami")).json()
            assert me["key_id"] == "user:alice" and me["role"] == "auditor"


# --- the policy file's people: section ---------------------------------------------------

PEOPLE_FILE = """version: 1
people:
  ops: {role: auditor}
  payments-approvers: {role: approver, projects: [payments]}
"""


def test_the_people_section_is_read_and_checked_with_its_lines(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(PEOPLE_FILE)
    assert people_of_file(str(path)) == {
        "ops": {"role": "auditor", "projects": None},
        "payments-approvers": {"role": "approver", "projects": ["payments"]}}
    path.write_text(PEOPLE_FILE.replace("role: approver", "role: owner"))
    with pytest.raises(PolicyFileError) as bad:
        people_of_file(str(path))
    assert "policy.yaml:4: people.payments-approvers.role" in str(bad.value)
    path.write_text("version: 1\ntools: {}\n")
    with pytest.raises(PolicyFileError, match="no people: section"):
        people_of_file(str(path))
    # `toolgate apply` of such a file sends nothing for it (the server reads it itself).
    policy = load_policy(PEOPLE_FILE)
    assert policy.sections == {} and policy.people["ops"]["role"] == "auditor"


async def test_a_person_gets_the_role_the_people_file_gives(settings, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(PEOPLE_FILE)
    idp = FakeIdP()
    oidc = {"oidc_issuer": ISSUER, "oidc_client_id": "toolgate-page",
            "oidc_client_secret": "s", "oidc_people_file": str(path)}
    async with app_client(settings.model_copy(update=oidc)) as admin:
        app = admin.app
        assert app.state.auth.people.role_map["ops"].role == "auditor"  # wired by main.py
        people = People(app.state.settings, SessionStore(app.state.sessions, ttl=1),
                        people=people_of_file(str(path)), transport=idp.transport())
        app.state.auth = dataclasses.replace(app.state.auth, people=people)
        async with httpx.AsyncClient(transport=admin._transport,
                                     base_url="http://127.0.0.1") as browser:
            r = await browser.get("/ui/login")
            asked = dict(httpx.URL(r.headers["location"]).params)
            idp.id_token = token(aud="toolgate-page", nonce=asked["nonce"],
                                 groups=["payments-approvers"])
            r = await browser.get("/ui/callback", params={"code": "c", "state": asked["state"]})
            assert r.status_code == 303, r.text
            me = (await browser.get("/v1/whoami")).json()
            assert me["role"] == "approver" and me["projects"] == ["payments"]


async def test_a_bad_people_file_stops_the_start(settings, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(PEOPLE_FILE.replace("role: auditor", "role: root"))
    oidc = {"oidc_issuer": ISSUER, "oidc_client_id": "toolgate-page",
            "oidc_people_file": str(path)}
    with pytest.raises(PolicyFileError):
        async with app_client(settings.model_copy(update=oidc)):
            pass
