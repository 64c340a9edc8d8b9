"""What SPEC §21's sign-ins cost per request (docs/auth.md): checking a gateway call's
bearer access token with the key set cached (app/auth/oidc.py, app/gateway/oauth.py), and
finding a page session already looked up (app/auth/sessions.py). In-process, no network:
`.venv/bin/python bench/auth.py`."""

from __future__ import annotations

import asyncio
import statistics
import time
from datetime import UTC, datetime, timedelta

import httpx
from joserfc import jwt
from joserfc.jwk import RSAKey

from app.auth.keys import Principal
from app.auth.oidc import Issuer
from app.auth.roles import Role
from app.auth.sessions import SessionStore, SignedIn, _hash
from app.gateway.config import OAuthListen
from app.gateway.oauth import OAuthResource

ISSUER, AUDIENCE = "https://idp.example.test", "http://127.0.0.1:8787/mcp"
N = 5000


def per_call_us(fn, n: int = N) -> float:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(samples)


async def main() -> None:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})

    def idp(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("openid-configuration"):
            return httpx.Response(200, json={"issuer": ISSUER, "jwks_uri": ISSUER + "/jwks"})
        return httpx.Response(200, json={"keys": [key.as_dict(private=False)]})

    issuer = Issuer(ISSUER, transport=httpx.MockTransport(idp))
    now = int(time.time())
    token = jwt.encode({"alg": "RS256", "kid": "k1"},
                       {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 3600,
                        "iat": now, "client_id": "agent"}, key)
    await issuer.verify(token, audience=AUDIENCE)  # fetch the keys once
    verify = per_call_us(lambda: issuer.verify_cached(token, audience=AUDIENCE))
    fresh = [jwt.encode({"alg": "RS256", "kid": "k1"},
                        {"iss": ISSUER, "aud": AUDIENCE, "sub": f"agent-{i}",
                         "exp": now + 3600}, key) for i in range(400)]
    start = time.perf_counter()
    for t in fresh:
        issuer.verify_cached(t, audience=AUDIENCE)
    first = (time.perf_counter() - start) / len(fresh) * 1e6

    async def inner(scope, receive, send):
        return None

    gate = OAuthResource(inner, OAuthListen(issuer=ISSUER, audience=AUDIENCE), issuer=issuer)
    scope = {"type": "http", "path": "/mcp", "method": "POST",
             "headers": [(b"content-type", b"application/json"),
                         (b"authorization", f"Bearer {token}".encode())]}
    loop_n = 2000
    start = time.perf_counter()
    for _ in range(loop_n):
        await gate(scope, None, None)
    middleware = (time.perf_counter() - start) / loop_n * 1e6

    store = SessionStore(None, ttl=1.0)  # type: ignore[arg-type]
    person = SignedIn(principal=Principal(key_id="user:alice", role=Role.APPROVER,
                                          projects=frozenset({"payments"}),
                                          principal_name="alice@example.test"),
                      sub="alice", email="alice@example.test", name="Alice", csrf="c",
                      expires_at=datetime.now(UTC) + timedelta(hours=8))
    store._cache[_hash("secret")] = (person, time.monotonic())
    session = per_call_us(lambda: store.cached("secret"))
    # The same lookup when the process's cache has no copy (every TTL seconds per session,
    # or on another worker): one primary-key read of person_sessions, SQLite in a temp dir.
    import tempfile

    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    from app.auth.tables import PersonSession

    with tempfile.TemporaryDirectory() as folder:
        engine = create_async_engine(f"sqlite+aiosqlite:///{folder}/s.db")
        async with engine.begin() as conn:
            await conn.run_sync(PersonSession.__table__.create)
        db_store = SessionStore(async_sessionmaker(engine, expire_on_commit=False), ttl=0)
        secret, _ = await db_store.create(person, 3600)
        reads = 300
        start = time.perf_counter()
        for _ in range(reads):
            assert await db_store.find(secret) is not None
        db_read = (time.perf_counter() - start) / reads * 1e6
        await engine.dispose()
    print(f"bearer token, first check (signature, claims; key set cached, RS256): {first:.1f} us")
    print(f"bearer token, each later call with the same token: {verify:.1f} us")
    print(f"gateway OAuth middleware per call (check + scope rewrite): {middleware:.1f} us")
    print(f"page session lookup, in this process's cache: {session:.2f} us")
    print(f"page session lookup, not cached (SQLite primary-key read): {db_read:.0f} us")


if __name__ == "__main__":
    asyncio.run(main())
