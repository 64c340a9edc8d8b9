"""The page's sign-in with OpenID Connect (SPEC §21): the authorization-code flow with PKCE,
`state` and `nonce`; the ID token checked by app/auth/oidc.py; the person's role and
projects from a claim (TOOLGATE_OIDC_ROLES_CLAIM, TOOLGATE_OIDC_ROLE_MAP); a session
(app/auth/sessions.py) whose Principal is the person.

The person's key id (what approvals, plans and records name) is `user:<sub>` (a digest of
the subject when it is long or unusual); the principal name, which §10's self-approval
rule compares, is the verified email when the token has one, else the subject: an agent
key created with `"principal": "<that email>"` may never have its approvals decided by
that person."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from app.auth.keys import Principal
from app.auth.oidc import MAX_BYTES, Issuer, IssuerUnavailable, TokenRejected
from app.auth.principals import normal
from app.auth.roles import Role
from app.auth.sessions import SessionStore, SignedIn, TooManyLogins
from app.config import Settings

SESSION_COOKIE = "toolgate_session"
LOGIN_COOKIE = "toolgate_login"
CSRF_HEADER = "x-csrf-token"
LOGIN_SECONDS = 600
_PLAIN_SUB = re.compile(r"[A-Za-z0-9._@:+-]{1,59}")


class SignInFailed(Exception):
    """A sign-in that cannot go on: `status` and a message for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Grant:
    role: Role
    projects: frozenset[str] | None


def parse_role_map(raw: dict[str, Any]) -> dict[str, Grant]:
    """TOOLGATE_OIDC_ROLE_MAP: {"<claim value>": {"role": ..., "projects": [...] | null}};
    ValueError naming the entry that is wrong."""
    out = {}
    for value, entry in raw.items():
        if not isinstance(entry, dict) or set(entry) - {"role", "projects"}:
            raise ValueError(f"TOOLGATE_OIDC_ROLE_MAP[{value!r}]: an object with 'role' "
                             "and optional 'projects'")
        try:
            role = Role(entry.get("role"))
        except ValueError:
            raise ValueError(f"TOOLGATE_OIDC_ROLE_MAP[{value!r}].role: one of "
                             f"{', '.join(r.value for r in Role)}") from None
        projects = entry.get("projects")
        if projects is not None and (not isinstance(projects, list)
                                     or not all(isinstance(p, str) for p in projects)):
            raise ValueError(f"TOOLGATE_OIDC_ROLE_MAP[{value!r}].projects: a list of "
                             "project names, or null for every project")
        out[value] = Grant(role, None if projects is None else frozenset(projects))
    return out


def claim_values(claims: dict[str, Any], path: str) -> list[str]:
    """The string values of a claim, `a.b` reaching into objects (Keycloak's
    `realm_access.roles`)."""
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def key_id_of(issuer: str, sub: str) -> str:
    if _PLAIN_SUB.fullmatch(sub):
        return "user:" + sub
    return "user:" + hashlib.sha256(f"{issuer} {sub}".encode()).hexdigest()[:40]


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class People:
    """Everything the page's OIDC sign-in needs (`app.state.auth.people`)."""

    def __init__(self, settings: Settings, store: SessionStore, *,
                 people: dict[str, Any] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        """`people`: a policy file's `people:` section (app/policyfile), after the
        settings' TOOLGATE_OIDC_ROLE_MAP in the order entries are tried (a value in both:
        the file's)."""
        assert settings.oidc_issuer and settings.oidc_client_id
        self.issuer = Issuer(settings.oidc_issuer, timeout=settings.db_timeout_seconds,
                             transport=transport)
        self.store = store
        self.client_id = settings.oidc_client_id
        secret = settings.oidc_client_secret
        if settings.oidc_client_secret_file:
            secret = Path(settings.oidc_client_secret_file).read_text().strip()
        self.client_secret = secret
        self.roles_claim = settings.oidc_roles_claim
        self.role_map = parse_role_map({**settings.oidc_role_map, **(people or {})})
        self.scopes = settings.oidc_scopes
        self.redirect_uri = settings.oidc_redirect_uri
        self.session_seconds = settings.oidc_session_seconds
        self._transport = transport

    # --- signing in ---------------------------------------------------------------------

    async def begin(self, redirect_uri: str) -> tuple[str, str]:
        """(the provider's authorization URL, the login cookie's secret)."""
        try:
            meta = await self.issuer.metadata()
        except IssuerUnavailable as exc:
            raise SignInFailed(503, f"the identity provider could not be reached: {exc}") \
                from None
        if not meta.authorization_endpoint or not meta.token_endpoint:
            raise SignInFailed(503, "the identity provider's metadata has no authorization "
                                    "or token endpoint")
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(48)
        try:
            cookie = await self.store.begin_login(
                {"state": state, "nonce": nonce, "verifier": verifier,
                 "redirect_uri": redirect_uri}, LOGIN_SECONDS)
        except TooManyLogins:
            raise SignInFailed(503, "too many sign-ins are under way: try again in a few "
                                    "minutes") from None
        query = urlencode({
            "response_type": "code", "client_id": self.client_id,
            "redirect_uri": redirect_uri, "scope": self.scopes, "state": state,
            "nonce": nonce, "code_challenge": s256(verifier),
            "code_challenge_method": "S256"})
        sep = "&" if "?" in meta.authorization_endpoint else "?"
        return meta.authorization_endpoint + sep + query, cookie

    async def finish(self, login_cookie: str | None, params: dict[str, str]) \
            -> tuple[str, SignedIn]:
        """The provider sent the browser back: (the session cookie's secret, the session)."""
        login = await self.store.take_login(login_cookie) if login_cookie else None
        if login is None:
            raise SignInFailed(400, "this sign-in expired or was started in another browser:"
                                    " sign in again")
        if not hmac.compare_digest(params.get("state", ""), login["state"]):
            raise SignInFailed(400, "the sign-in's state does not match: sign in again")
        if "error" in params:
            raise SignInFailed(401, "the identity provider refused the sign-in: "
                               + params["error"][:100] + " "
                               + params.get("error_description", "")[:300])
        if "iss" in params and params["iss"] != self.issuer.issuer:  # RFC 9207
            raise SignInFailed(401, "the answer names another issuer")
        code = params.get("code")
        if not code:
            raise SignInFailed(400, "the identity provider sent no code")
        id_token = await self._exchange(code, login)
        try:
            claims = await self.issuer.verify(id_token, audience=self.client_id,
                                              nonce=login["nonce"])
        except TokenRejected as exc:
            raise SignInFailed(401, f"the ID token is not valid: {exc}") from None
        except IssuerUnavailable as exc:
            raise SignInFailed(503, f"the identity provider's keys could not be read: {exc}") \
                from None
        # OpenID Connect Core 3.1.3.7: a token for several audiences names us as its azp.
        aud = claims.get("aud")
        if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != self.client_id:
            raise SignInFailed(401, "the ID token is not valid: several audiences and "
                                    "another authorized party (azp)")
        signed_in = self.person(claims)
        return await self.store.create(signed_in, self.session_seconds)

    async def _exchange(self, code: str, login: dict[str, Any]) -> str:
        try:
            meta = await self.issuer.metadata()
            form = {"grant_type": "authorization_code", "code": code,
                    "redirect_uri": login["redirect_uri"], "code_verifier": login["verifier"]}
            auth = None
            if self.client_secret:
                auth = httpx.BasicAuth(self.client_id, self.client_secret)
            else:
                form["client_id"] = self.client_id
            async with httpx.AsyncClient(timeout=self.issuer.timeout, follow_redirects=False,
                                         transport=self._transport) as client:
                answer = await client.post(meta.token_endpoint or "", data=form, auth=auth,
                                           headers={"Accept": "application/json"})
        except (httpx.HTTPError, IssuerUnavailable) as exc:
            raise SignInFailed(503, f"the identity provider could not be reached: {exc}") \
                from None
        try:
            body = answer.json() if len(answer.content) <= MAX_BYTES else {}
        except ValueError:
            body = {}
        if answer.status_code != 200 or not isinstance(body.get("id_token"), str):
            error = body.get("error") if isinstance(body, dict) else None
            raise SignInFailed(401, f"the identity provider did not give an ID token "
                                    f"(HTTP {answer.status_code}, {str(error)[:100]})")
        return body["id_token"]

    def person(self, claims: dict[str, Any]) -> SignedIn:
        """The session of the person an ID token names; SignInFailed when no role applies."""
        sub = claims["sub"]
        email = claims.get("email") if isinstance(claims.get("email"), str) \
            and claims.get("email_verified") is not False else None
        name = claims.get("name") if isinstance(claims.get("name"), str) else None
        values = claim_values(claims, self.roles_claim)
        grant = next((g for value, g in self.role_map.items() if value in values), None)
        if grant is None:
            raise SignInFailed(403, f"signed in as {email or name or sub}, but no value of "
                                    f"the '{self.roles_claim}' claim gives a role in toolgate:"
                                    " ask an administrator")
        principal_name = normal(email or sub)[:200]
        return SignedIn(
            principal=Principal(key_id=key_id_of(self.issuer.issuer, sub), role=grant.role,
                                projects=grant.projects, principal_name=principal_name),
            sub=sub[:255], email=email, name=name[:200] if name else None,
            # The store sets the session's real expiry when it creates the row.
            csrf=secrets.token_urlsafe(32), expires_at=datetime.max.replace(tzinfo=UTC))

    # --- signed in ----------------------------------------------------------------------

    async def signed_in(self, secret: str) -> SignedIn | None:
        return await self.store.find(secret)

    @staticmethod
    def csrf_ok(signed_in: SignedIn, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(
            presented.encode("utf-8", "replace"), signed_in.csrf.encode())

    async def end_session_url(self, post_logout: str) -> str | None:
        try:
            meta = await self.issuer.metadata()
        except IssuerUnavailable:
            return None
        if not meta.end_session_endpoint:
            return None
        return meta.end_session_endpoint + "?" + urlencode(
            {"client_id": self.client_id, "post_logout_redirect_uri": post_logout})

