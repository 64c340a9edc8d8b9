"""The operators' page (SPEC §13): `GET /ui` and its files, served from this package (no
CDN, works offline), and `GET /v1/whoami`, which tells the page what the key may read.

The files need no key (the page signs in with one, kept in the tab's sessionStorage, and
sends it as a bearer on each API call); every answer carries
`Content-Security-Policy: default-src 'self'`, and the page writes every value from the log
as text, never as HTML (static/app.js)."""

from __future__ import annotations

from importlib import resources
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Request, Response

from app.auth.deps import PrincipalDep
from app.auth.roles import PERMISSIONS
from app.edge.errors import NotFound
from app.policy.denies import LAYER_CHECKS, OTHER_CHECKS

router = APIRouter(tags=["operators' page"], include_in_schema=False)
api_router = APIRouter(prefix="/v1", tags=["operators' page"])

STATIC = resources.files("app.ui") / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".png": "image/png",
         ".svg": "image/svg+xml", ".LICENSE": "text/plain; charset=utf-8"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # The files change only with toolgate itself; a new version is a new process.
    "Cache-Control": "no-cache",
}


def _files() -> dict[str, tuple[bytes, str]]:
    """Every file of static/, read once: the only names `/ui/{name}` answers."""
    out = {}
    for entry in STATIC.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in TYPES:
            out[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return out


FILES = _files()


def _file(name: str) -> Response:
    found = FILES.get(name)
    if found is None:
        raise NotFound(f"'/ui/{name[:100]}' does not exist")
    body, media_type = found
    return Response(body, media_type=media_type, headers=HEADERS)


@router.get("/ui")
async def page() -> Response:
    return _file("index.html")


@router.get("/ui/checks.json")
async def checks() -> Response:
    """The checks of each layer in the order they run (app/policy/denies.py): the page
    shows a decision's checks as passed, the one that denied, and those not run."""
    body = {"layers": {layer: [{"name": s.name, "codes": list(s.codes)} for s in specs]
                       for layer, specs in LAYER_CHECKS.items()},
            "other": [{"name": s.name, "codes": list(s.codes)} for s in OTHER_CHECKS]}
    return Response(orjson.dumps(body), media_type="application/json", headers=HEADERS)


@router.get("/ui/{name}")
async def static_file(name: str) -> Response:
    return _file(name)


def _permissions(principal: PrincipalDep) -> list[str]:
    return sorted(
        name for name, rule in PERMISSIONS.items()
        if principal.role in rule.roles and not (rule.unscoped_only and principal.scoped))


@api_router.get("/whoami", summary="The calling key: its role, projects and permissions")
async def whoami(request: Request, principal: PrincipalDep,
                 permissions: Annotated[list[str], Depends(_permissions)]) -> dict:
    """What the operators' page reads first: it shows only the views whose permissions the
    key holds (docs/auth.md). `projects` null means every project. A person signed in with
    OIDC (SPEC §21) is named (`person`: sub, email, name) and gets the session's CSRF token,
    which the page sends with every change."""
    out = {"key_id": principal.key_id, "role": principal.role.value,
           "principal": principal.principal_name or principal.key_id,
           "projects": principal.project_list(), "permissions": permissions}
    signed_in = getattr(request.state, "person", None)
    if signed_in is not None:
        out["person"] = {"sub": signed_in.sub, "email": signed_in.email,
                         "name": signed_in.name,
                         "expires_at": signed_in.expires_at.isoformat()}
        out["csrf_token"] = signed_in.csrf
    return out
