"""The gateway's HTTP listener as an OAuth 2.1 resource server (SPEC §21, the MCP
authorization specification; `listen.http.oauth: {issuer, audience}` in gateway.yaml).

- `GET /.well-known/oauth-protected-resource[/<path>]`: RFC 9728 metadata naming the
  resource (the audience) and its authorization server (the issuer), no token needed;
- every other request needs `Authorization: Bearer <access token>`: a JWT the issuer
  signed (its JWKS, app/auth/oidc.py: cached, refetched on an unknown key id at most once a
  minute), for this audience (RFC 8707), unexpired; otherwise 401 with
  `WWW-Authenticate: Bearer resource_metadata="..."` so that an MCP client can find where to
  get one;
- the token never goes further: the Authorization header is removed from the request before
  the MCP server sees it, and the gateway's calls to upstreams and to toolgate carry their
  own credentials only;
- the token's subject is the caller of each decision: `context.metadata.toolgate_gateway`
  gets `caller` (sub), `caller_issuer` and `caller_client` (client_id, when the token has
  one), read from the request by the call handler (app/gateway/server.py) through
  `CALLER`.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any
from urllib.parse import urlsplit

import orjson

from app.auth.access import authorization
from app.auth.oidc import Issuer, IssuerUnavailable, TokenRejected
from app.edge.errors import Unauthorized
from app.gateway.config import OAuthListen

log = logging.getLogger("toolgate.gateway")

SCOPE_KEY = "toolgate.oauth"  # the ASGI scope's entry: the validated token's caller
WELL_KNOWN = "/.well-known/oauth-protected-resource"
CALLER: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "toolgate_gateway_caller", default=None)


def metadata_url(resource: str) -> str:
    """Where RFC 9728 says a resource's metadata is: the well-known path inserted between
    the host and the resource's path."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


class OAuthResource:
    """ASGI middleware in front of the MCP server's Streamable HTTP app."""

    def __init__(self, app: Any, config: OAuthListen, *, issuer: Issuer | None = None) -> None:
        self.app = app
        self.config = config
        self.audience = config.audience
        self.issuer = issuer or Issuer(config.issuer)
        self.metadata_url = metadata_url(config.audience)
        path = urlsplit(config.audience).path.rstrip("/")
        self._well_known = {WELL_KNOWN, WELL_KNOWN + path}
        body: dict[str, Any] = {"resource": config.audience,
                                "authorization_servers": [config.issuer],
                                "bearer_methods_supported": ["header"]}
        if config.scopes:
            body["scopes_supported"] = list(config.scopes)
        self._metadata = orjson.dumps(body)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in self._well_known and scope["method"] in ("GET", "HEAD"):
            await _answer(send, 200, self._metadata,
                          [(b"cache-control", b"max-age=300")])
            return
        try:
            caller = await self.caller(scope["headers"])
        except (TokenRejected, Unauthorized) as exc:
            await self._refuse(send, str(exc) if isinstance(exc, TokenRejected)
                               else exc.message, presented=not isinstance(exc, _Missing))
            return
        except IssuerUnavailable as exc:
            log.warning("gateway: the issuer's keys could not be read: %s", exc)
            await _answer(send, 503, _error("issuer_unavailable",
                                            "the authorization server's keys could not be "
                                            "read; try again"), [(b"retry-after", b"5")])
            return
        scope = dict(scope)
        scope[SCOPE_KEY] = caller
        # Never passed on: nothing after this sees the client's token.
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
        await self.app(scope, receive, send)

    async def caller(self, headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
        """The caller a request's access token names (TokenRejected, Unauthorized when
        there is none or several, IssuerUnavailable)."""
        header = authorization(headers).decode("latin-1")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise _Missing("this gateway needs an OAuth access token: "
                           "Authorization: Bearer <token>")
        claims = self.issuer.verify_cached(token, audience=self.audience)
        if claims is None:
            claims = await self.issuer.verify(token, audience=self.audience)
        caller = {"caller": claims["sub"][:255], "caller_issuer": self.config.issuer}
        client = claims.get("client_id") or claims.get("azp")
        if isinstance(client, str):
            caller["caller_client"] = client[:255]
        return caller

    async def _refuse(self, send: Any, message: str, *, presented: bool) -> None:
        challenge = f'Bearer resource_metadata="{self.metadata_url}"'
        if presented:
            challenge += ', error="invalid_token"'
        if self.config.scopes:
            challenge += f', scope="{" ".join(self.config.scopes)}"'
        await _answer(send, 401, _error("unauthenticated", message),
                      [(b"www-authenticate", challenge.encode("latin-1"))])


class _Missing(Unauthorized):
    """No bearer token at all (the challenge then carries no error code, RFC 6750 §3.1)."""


def _error(code: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message, "details": {}}})


async def _answer(send: Any, status: int, body: bytes,
                  headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def enter(request: Any) -> None:
    """At the start of a call's handler (its own task): CALLER holds the caller its HTTP
    request's token named (None for stdio or a listener without OAuth)."""
    scope = getattr(request, "scope", None)
    CALLER.set(scope.get(SCOPE_KEY) if isinstance(scope, dict) else None)


def with_caller(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The gateway's metadata of a decision, with the OAuth caller when there is one."""
    caller = CALLER.get()
    return {**(metadata or {}), **caller} if caller else (metadata or {})


__all__ = ["CALLER", "OAuthResource", "enter", "metadata_url", "with_caller"]
