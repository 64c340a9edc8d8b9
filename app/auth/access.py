"""The two steps every authenticated request takes, shared by the FastAPI dependencies
(app/auth/deps.py) and the hot path (app/authorize/hotpath.py): read the bearer secret
(refusing a request with more than one Authorization header), and check the key's role
against the route's rule (app/auth/roles.py)."""

from __future__ import annotations

from app.auth.keys import Principal
from app.auth.roles import Rule, rule_for
from app.edge.errors import Forbidden, Unauthorized

MISSING = "missing API key: send 'Authorization: Bearer <key>'"
NO_SCHEME = ("the Authorization header has no 'Bearer ' scheme before the key: send "
             "'Authorization: Bearer <key>'")
TWO_KEYS = "more than one Authorization header: send exactly one"
_AUTHORIZATION = b"authorization"


def authorization(headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request's one Authorization header value (ASGI headers: lower-case names), b""
    when there is none; Unauthorized naming the header when there are several. Servers
    and frameworks disagree on which of several to read (the first, the last, all joined),
    so a request that sends two is refused rather than read either way."""
    found = None
    for name, value in headers:
        if name == _AUTHORIZATION:
            if found is not None:
                raise Unauthorized(TWO_KEYS, header="Authorization")
            found = value
    return b"" if found is None else found


def one_authorization(headers: list[tuple[bytes, bytes]], by_name: dict[bytes, bytes]) -> None:
    """Unauthorized (as `authorization`) when the request sent several Authorization
    headers; `by_name` is dict(headers), which keeps only the last of each name. Costs a
    length comparison unless some header name repeats."""
    if len(by_name) != len(headers):
        authorization(headers)


def bearer_secret(header: str | None) -> str:
    """The key in an `Authorization: Bearer <key>` header value (surrounding spaces
    dropped); Unauthorized when there is none."""
    scheme, _, secret = (header or "").strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        # A bare key (the scheme left out) is the usual slip: say which part is missing.
        raise Unauthorized(NO_SCHEME if scheme and not secret and scheme.lower() != "bearer"
                           else MISSING)
    return secret


def require_role(principal: Principal, method: str, path: str,
                 rule: tuple[str | None, Rule] | None = None) -> None:
    """Forbidden unless the key's role may use `method path` (`rule`: rule_for's answer,
    when the caller already has it)."""
    permission, allowed = rule or rule_for(method, path)
    if principal.role not in allowed.roles:
        raise Forbidden(
            f"a key with role '{principal.role}' may not {method} {path}"
            + (f" (permission '{permission}')" if permission else ""),
            permission=permission, role=principal.role.value,
        )
    if allowed.unscoped_only and principal.scoped:
        raise Forbidden(
            f"{method} {path} spans every project: it needs a key whose projects "
            "are all (null)", permission=permission, role=principal.role.value,
        )
