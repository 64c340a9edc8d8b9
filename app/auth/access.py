"""The two steps every authenticated request takes, shared by the FastAPI dependencies
(app/auth/deps.py) and the hot path (app/authorize/hotpath.py): read the bearer secret,
and check the key's role against the route's rule (app/auth/roles.py)."""

from __future__ import annotations

from app.auth.keys import Principal
from app.auth.roles import Rule, rule_for
from app.kit.errors import Forbidden, Unauthorized

MISSING = "missing API key: send 'Authorization: Bearer <key>'"


def bearer_secret(header: str | None) -> str:
    """The key in an `Authorization: Bearer <key>` header value (surrounding spaces
    dropped); Unauthorized when there is none."""
    scheme, _, secret = (header or "").partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise Unauthorized(MISSING)
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
