"""The gateway's HTTP listener as an OAuth 2.1 resource server, driven by the `mcp` SDK's own
OAuth client (mcp.client.auth) against the suite's real provider (tests/oidc): protected
resource metadata, dynamic registration, code + PKCE with an RFC 8707 resource, an
audience-bound JWT access token; the token's subject is the decision's caller and is never
passed on. A token for another audience (signed by the same provider) is 401. A real
`toolgate serve` on SQLite and Postgres, one provider and one gateway per module."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from app.auth.oidc_login import s256
from tests.gateway.conftest import (  # noqa: F401 (module_database, toolgate: fixtures)
    Toolgate,
    gateway_env,
    module_database,
    recorder_command,
    records,
    start_gateway_http,
    toolgate,
    wait_for,
    write_config,
)
from tests.oidc.provider import Provider, authorize, provider, query_of
from tests.serving import free_port, stop

pytestmark = pytest.mark.slow
CALLBACK = "http://127.0.0.1:9/callback"  # never reached: the test reads the redirect


@pytest.fixture(scope="module")
def idp() -> Iterator[Provider]:
    with provider(["http://127.0.0.1:9/ui/callback"]) as p:
        yield p


@pytest.fixture(scope="module")
def gateway(toolgate: Toolgate, idp: Provider,  # noqa: F811
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("gw-oauth")
    record = folder / "record.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    servers = {"rec": {"command": recorder_command(record), "trust_annotations": True,
                       "sandbox": {"id": "rec", "root": str(folder)}}}
    config = write_config(folder, toolgate.url, servers, listen={"http": {
        "host": "127.0.0.1", "port": port, "path": "/mcp",
        "oauth": {"issuer": idp.issuer, "audience": url, "scopes": ["mcp"]}}})
    log = folder / "gateway.log"
    proc = start_gateway_http(config, gateway_env(toolgate), log)

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"gateway exited: {log.read_text()[-3000:]}")
        try:
            return httpx.get(url, timeout=1).status_code == 401
        except httpx.HTTPError:
            return False

    wait_for(answers, 90, "the gateway's HTTP listener")
    yield url, record
    stop(proc)


class Memory:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def oauth(url: str, who: str, storage: Memory) -> OAuthClientProvider:
    redirected: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        redirected.append(authorization_url)

    async def callback_handler() -> AuthorizationCodeResult:
        back = query_of(await authorize(redirected[-1], who, stop_at=CALLBACK))
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"),
                                       iss=back.get("iss"))

    return OAuthClientProvider(
        server_url=url, storage=storage,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[CALLBACK], client_name="toolgate test agent",
            grant_types=["authorization_code"], response_types=["code"],
            token_endpoint_auth_method="none", scope="mcp"),
        redirect_handler=redirect_handler, callback_handler=callback_handler)


async def test_the_sdk_signs_in_and_the_token_subject_is_the_caller(gateway, toolgate):  # noqa: F811
    url, record = gateway
    storage = Memory()
    async with httpx2.AsyncClient(auth=oauth(url, "alice", storage),
                                  timeout=httpx2.Timeout(120)) as http:
        async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
            tools = await client.list_tools()
            assert "rec.read_note" in [t.name for t in tools.tools]
            result = await client.call_tool("rec.read_note", {"key": "0"})
    assert not result.is_error
    decision_id = (result.meta or {})["toolgate/decision"]["decision_id"]
    access = storage.tokens.access_token
    detail = toolgate.decision(decision_id)
    caller = detail["detail"]["context"]["metadata"]["toolgate_gateway"]
    assert caller["caller"] == "alice"
    assert caller["caller_client"] == storage.client.client_id
    # Never passed on: not to toolgate, not to the upstream.
    assert access not in str(detail) and access not in record.read_text()
    assert [r["tool"] for r in records(record)] == ["read_note"]


async def token_for(idp: Provider, resource: str, who: str) -> str:
    """An access token for `resource` the plain way: register, code + PKCE, exchange."""
    verifier = secrets.token_urlsafe(48)
    async with httpx.AsyncClient(base_url=idp.issuer, timeout=30) as c:
        reg = await c.post("/reg", json={"redirect_uris": [CALLBACK],
                                         "token_endpoint_auth_method": "none",
                                         "grant_types": ["authorization_code"],
                                         "response_types": ["code"]})
        client_id = reg.json()["client_id"]
        query = urlencode({"client_id": client_id, "response_type": "code", "scope": "mcp",
                           "redirect_uri": CALLBACK, "resource": resource, "state": "s",
                           "code_challenge": s256(verifier), "code_challenge_method": "S256"})
        back = query_of(await authorize(f"{idp.issuer}/auth?{query}", who, stop_at=CALLBACK))
        answer = await c.post("/token", data={
            "grant_type": "authorization_code", "code": back["code"], "client_id": client_id,
            "redirect_uri": CALLBACK, "code_verifier": verifier, "resource": resource})
        assert answer.status_code == 200, answer.text
        return answer.json()["access_token"]


async def test_a_token_for_another_resource_is_refused(gateway, idp):
    """Signed by the same provider, unexpired, for another audience (RFC 8707): 401."""
    url, record = gateway
    before = len(records(record))
    token = await token_for(idp, url.replace("/mcp", "/other"), "bob")
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                   headers={"Authorization": f"Bearer {token}",
                            "Accept": "application/json, text/event-stream"})
    assert r.status_code == 401
    assert 'error="invalid_token"' in r.headers["www-authenticate"]
    assert len(records(record)) == before
    meta = httpx.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")).json()
    assert meta["resource"] == url and meta["authorization_servers"] == [idp.issuer]
