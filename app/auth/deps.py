"""The auth dependencies: `authenticate` (who is calling: 401) and `authorize` (may this
key use this route: 403, driven by app/auth/roles.py). main.py attaches `authorize` to
every router but health; handlers that must respect a key's projects take `PrincipalDep`
(the same, cached, authentication) and pass `principal.projects` on."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.auth.keys import Principal
from app.auth.roles import rule_for
from app.kit.errors import Forbidden, NotFound, Unauthorized

bearer = HTTPBearer(auto_error=False, scheme_name="apiKey",
                    description="An API key: `Authorization: Bearer tg_...` (docs/auth.md)")


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    early = getattr(request.state, "principal", None)
    if early is not None:  # JSONRoute authenticated before reading the body
        return early
    if credentials is None or not credentials.credentials:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    return await _principal(request, credentials.credentials)


async def authenticate_early(request: Request) -> None:
    """For routes with a JSON body: FastAPI parses the body before it solves dependencies,
    so without this a caller with no key would learn about its malformed JSON (422)
    instead of being refused (401)."""
    credentials = await bearer(request)
    if credentials is None or not credentials.credentials:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    request.state.principal = await _principal(request, credentials.credentials)


async def _principal(request: Request, secret: str) -> Principal:
    state = request.app.state.toolgate
    principal = await state.authenticator.authenticate(secret)
    # Caller (app/api/deps.py) reads it: every decision and change records the key id.
    request.state.key_id = principal.key_id
    if state.rate_limiter is not None:
        state.rate_limiter.take(principal.key_id)
    return principal


PrincipalDep = Annotated[Principal, Depends(authenticate)]


async def authorize(request: Request, principal: PrincipalDep) -> None:
    route = request.scope.get("route")
    path = getattr(route, "path_format", None) or request.url.path
    permission, rule = rule_for(request.method, path)
    if principal.role not in rule.roles:
        raise Forbidden(
            f"a key with role '{principal.role}' may not {request.method} {path}"
            + (f" (permission '{permission}')" if permission else ""),
            permission=permission, role=principal.role.value,
        )
    if rule.unscoped_only and principal.scoped:
        raise Forbidden(
            f"{request.method} {path} spans every project: it needs a key whose projects "
            "are all (null)", permission=permission, role=principal.role.value,
        )
    # A route about one project: another project's answers as if it did not exist.
    project = request.path_params.get("project")
    if project is not None and not principal.sees(project):
        raise NotFound(f"project '{project}' does not exist", project=project)
