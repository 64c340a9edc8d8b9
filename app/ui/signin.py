"""The page's sign-in with the organisation's OpenID Connect provider (SPEC §21,
docs/auth.md): `GET /ui/login` sends the browser to the provider, `GET /ui/callback` is where
it comes back (a session cookie is set), `POST /ui/logout` ends the session. The flow and
the checks are app/auth/oidc_login.py's; this module speaks HTTP and cookies.

Cookies: `HttpOnly`, `SameSite=Lax`, `Secure` unless the page was reached on a loopback
address (a browser drops Secure cookies over plain http), the session's bounded by
TOOLGATE_OIDC_SESSION_SECONDS. Failures are a short page saying what went wrong, never a
half sign-in."""

from __future__ import annotations

import html

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from app.auth.oidc_login import (
    CSRF_HEADER,
    LOGIN_COOKIE,
    LOGIN_SECONDS,
    SESSION_COOKIE,
    People,
    SignInFailed,
)
from app.ui.routes import HEADERS

router = APIRouter(tags=["operators' page"], include_in_schema=False)

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def _people(request: Request) -> People | None:
    return request.app.state.auth.people


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.url.hostname not in LOOPBACK


def _cookie(response: Response, request: Request, name: str, value: str, *, max_age: int,
            path: str) -> None:
    response.set_cookie(name, value, max_age=max_age, path=path, httponly=True,
                        samesite="lax", secure=_secure(request))


def page(status: int, title: str, message: str) -> Response:
    """A short page for a sign-in that did not happen (no script, no style but the page's)."""
    body = (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>toolgate: {html.escape(title)}</title>"
            f"<link rel=\"stylesheet\" href=\"/ui/app.css\"></head><body><main>"
            f"<section class=\"notice\" id=\"signin-failed\" role=\"alert\">"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(message)}</p>"
            f"<p><a href=\"/ui/login\">Sign in again</a> · <a href=\"/ui\">The page</a></p>"
            f"</section></main></body></html>")
    return Response(body, status_code=status, media_type="text/html; charset=utf-8",
                    headers=HEADERS)


@router.get("/ui/signin.json")
async def signin_options(request: Request) -> Response:
    """What the page offers on its sign-in form (the provider's button, the key form), and
    whether this browser's session cookie names a live session: the page asks this first,
    so a browser without one is shown the form without a 401 in its console."""
    people = _people(request)
    secret = request.cookies.get(SESSION_COOKIE)
    live = people is not None and secret is not None \
        and await people.signed_in(secret) is not None
    body = {"oidc": people is not None, "signed_in": live}
    return Response(orjson.dumps(body), media_type="application/json", headers=HEADERS)


@router.get("/ui/login")
async def login(request: Request) -> Response:
    people = _people(request)
    if people is None:
        return page(404, "No single sign-on",
                    "This toolgate has no OpenID Connect provider configured: sign in with an "
                    "API key.")
    redirect_uri = people.redirect_uri or str(request.url_for("callback"))
    try:
        url, secret = await people.begin(redirect_uri)
    except SignInFailed as exc:
        return page(exc.status, "Sign-in is not available", exc.message)
    response = RedirectResponse(url, status_code=302, headers={"Cache-Control": "no-store"})
    _cookie(response, request, LOGIN_COOKIE, secret, max_age=LOGIN_SECONDS, path="/ui")
    return response


@router.get("/ui/callback", name="callback")
async def callback(request: Request) -> Response:
    people = _people(request)
    if people is None:
        return page(404, "No single sign-on", "This toolgate has no provider configured.")
    params = {k: v[:4096] for k, v in request.query_params.items()}
    try:
        secret, signed_in = await people.finish(request.cookies.get(LOGIN_COOKIE), params)
    except SignInFailed as exc:
        response = page(exc.status, "Sign-in failed", exc.message)
        response.delete_cookie(LOGIN_COOKIE, path="/ui")
        return response
    response = RedirectResponse("/ui", status_code=303, headers={"Cache-Control": "no-store"})
    response.delete_cookie(LOGIN_COOKIE, path="/ui")
    _cookie(response, request, SESSION_COOKIE, secret, max_age=people.session_seconds,
            path="/")
    return response


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    """Ends the session (its CSRF token in X-CSRF-Token: 403 otherwise); answers where the
    browser may go next to end the provider's session too (`end_session_url`, or null)."""
    people = _people(request)
    secret = request.cookies.get(SESSION_COOKIE)
    signed_in = await people.signed_in(secret) if people is not None and secret else None
    if signed_in is not None and not people.csrf_ok(signed_in, request.headers.get(CSRF_HEADER)):
        body = {"error": {"code": "csrf_failed", "message": "missing or wrong CSRF token: the "
                          "page sends it in X-CSRF-Token", "details": {"header": "X-CSRF-Token"}}}
        return Response(orjson.dumps(body), status_code=403, media_type="application/json",
                        headers=HEADERS)
    end_url = None
    if people is not None and secret:
        await people.store.end(secret)
        end_url = await people.end_session_url(str(request.url_for("page")))
    response = Response(orjson.dumps({"signed_out": True, "end_session_url": end_url}),
                        media_type="application/json", headers=HEADERS)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
