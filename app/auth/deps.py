"""The auth dependencies: `authenticate` (who is calling: 401) and `authorize` (may this
key use this route: 403, driven by app/auth/roles.py). main.py attaches `authorize` to
every router but health; handlers that must respect a key's projects take `PrincipalDep`
(the same, cached, authentication) and pass `principal.projects` on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.auth.access import authorization, bearer_secret, require_role
from app.auth.keys import Authenticator, KeyCache, Principal
from app.auth.oidc_login import CSRF_HEADER, SESSION_COOKIE, People
from app.auth.ratelimit import RateLimiter
from app.edge.errors import Forbidden, NotFound, Unauthorized


@dataclass(frozen=True, slots=True)
class AuthState:
    """What the auth feature keeps for the process (`app.state.auth`)."""

    authenticator: Authenticator
    key_cache: KeyCache
    rate_limiter: RateLimiter | None
    people: People | None = None  # the page's OIDC sign-in (SPEC §21), when configured


def get_key_cache(request: Request) -> KeyCache:
    return request.app.state.auth.key_cache


KeyCacheDep = Annotated[KeyCache, Depends(get_key_cache)]

bearer = HTTPBearer(auto_error=False, scheme_name="apiKey",
                    description="An API key: `Authorization: Bearer tg_...` (docs/auth.md)")


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    early = getattr(request.state, "principal", None)
    if early is not None:  # JSONRoute authenticated before reading the body
        return early
    # `bearer` documents the scheme in OpenAPI; the header is read as the hot path reads it.
    return await _identify(request)


async def authenticate_early(request: Request) -> None:
    """For routes with a JSON body: FastAPI parses the body before it solves dependencies,
    so without this a caller with no key would learn about its malformed JSON (422)
    instead of being refused (401)."""
    request.state.principal = await _identify(request)


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


async def _identify(request: Request) -> Principal:
    """An API key (`Authorization: Bearer`), or else a person's session cookie from the
    page's OIDC sign-in; a request that changes something with the cookie must carry the
    session's CSRF token in X-CSRF-Token (403 otherwise). The checks after this see the same
    Principal either way (STYLE "Identity at the edge")."""
    people: People | None = request.app.state.auth.people
    header = authorization(request.scope["headers"])
    if header or people is None or SESSION_COOKIE not in request.cookies:
        return await _principal(request, bearer_secret(header.decode("latin-1")))
    signed_in = await people.signed_in(request.cookies[SESSION_COOKIE])
    if signed_in is None:
        raise Unauthorized("the session has ended or expired: sign in again",
                           code="session_expired")
    if request.method not in SAFE_METHODS and \
            not people.csrf_ok(signed_in, request.headers.get(CSRF_HEADER)):
        raise Forbidden("missing or wrong CSRF token: the page sends it in X-CSRF-Token",
                        code="csrf_failed", header="X-CSRF-Token")
    request.state.person = signed_in
    principal = signed_in.principal
    request.state.key_id = principal.key_id
    auth: AuthState = request.app.state.auth
    if auth.rate_limiter is not None:
        auth.rate_limiter.take(principal.key_id)
    return principal


def _secret(request: Request) -> str:
    """The bearer secret of the request's one Authorization header (401 for none, or for
    several: app/auth/access.py)."""
    return bearer_secret(authorization(request.scope["headers"]).decode("latin-1"))


async def _principal(request: Request, secret: str) -> Principal:
    auth: AuthState = request.app.state.auth
    principal = await auth.authenticator.authenticate(secret)
    # Caller (app/kit/deps.py) reads it: every decision and change records the key id.
    request.state.key_id = principal.key_id
    if auth.rate_limiter is not None:
        auth.rate_limiter.take(principal.key_id)
    return principal


PrincipalDep = Annotated[Principal, Depends(authenticate)]


async def authorize(request: Request, principal: PrincipalDep) -> None:
    route = request.scope.get("route")
    path = getattr(route, "path_format", None) or request.url.path
    require_role(principal, request.method, path)
    # A route about one project: another project's answers as if it did not exist.
    project = request.path_params.get("project")
    if project is not None and not principal.sees(project):
        raise NotFound(f"project '{project}' does not exist", project=project)
