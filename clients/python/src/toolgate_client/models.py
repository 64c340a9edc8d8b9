"""Typed views of toolgate's answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ToolgateDeny, exception_for_deny, resolve_deny_class

__all__ = ["Decision", "Deny", "DecisionParseError"]


class DecisionParseError(ValueError):
    """The answer is not a decision (the client turns this into ToolgateUnavailableError)."""


def _opt_str(value: Any, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise DecisionParseError(f"{name} must be a string or null, got {type(value).__name__}")


@dataclass(frozen=True)
class Deny:
    """Why a call was denied (SPEC §3 "Response shape")."""

    error: str
    hierarchy: list[str]
    code: str | None
    check: str | None
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> Deny:
        if not isinstance(data, dict):
            raise DecisionParseError("deny must be an object")
        error = data.get("error")
        if not isinstance(error, str) or not error:
            raise DecisionParseError("deny.error must be a non-empty string")
        hierarchy = data.get("hierarchy")
        if hierarchy is None:
            hierarchy = [error]
        if not isinstance(hierarchy, list) or not all(isinstance(h, str) for h in hierarchy):
            raise DecisionParseError("deny.hierarchy must be a list of strings")
        details = data.get("details")
        if details is None:
            details = {}
        if not isinstance(details, dict):
            raise DecisionParseError("deny.details must be an object")
        message = data.get("message")
        return cls(
            error=error,
            hierarchy=list(hierarchy),
            code=_opt_str(data.get("code"), "deny.code"),
            check=_opt_str(data.get("check"), "deny.check"),
            message=message if isinstance(message, str) else "",
            details=details,
        )

    @property
    def exception_class(self) -> type[ToolgateDeny]:
        """The class :meth:`Decision.raise_for_deny` raises (fails closed to ToolRuntimeError)."""
        return resolve_deny_class(self.error, self.hierarchy)


@dataclass(frozen=True)
class Decision:
    """One answer of ``POST /v1/authorize-tool``.

    ``allowed`` is True only when the service said JSON ``true``; a deny always carries
    ``deny``. ``raw`` is the answer as received.
    """

    decision_id: str | None
    allowed: bool
    deny: Deny | None
    plan_id: str | None = None
    profile: dict[str, Any] | None = None
    checks: list[dict[str, Any]] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: the X-Request-ID of the HTTP call that produced this decision
    request_id: str | None = field(default=None, compare=False)

    @classmethod
    def from_dict(cls, data: Any, *, request_id: str | None = None) -> Decision:
        """Parse strictly where safety depends on it (``allowed``, ``deny``)."""
        if not isinstance(data, dict):
            raise DecisionParseError("a decision must be a JSON object")
        allowed = data.get("allowed")
        if not isinstance(allowed, bool):
            raise DecisionParseError("decision.allowed must be a JSON boolean")
        raw_deny = data.get("deny")
        if allowed:
            if raw_deny is not None:
                raise DecisionParseError("an allowed decision must not carry a deny")
            deny = None
        else:
            if raw_deny is None:
                raise DecisionParseError("a denied decision must carry a deny")
            deny = Deny.from_dict(raw_deny)
        profile = data.get("profile")
        if profile is not None and not isinstance(profile, dict):
            raise DecisionParseError("decision.profile must be an object or null")
        checks = data.get("checks")
        if checks is not None and not isinstance(checks, list):
            raise DecisionParseError("decision.checks must be a list or null")
        decision_id = data.get("decision_id")
        if not isinstance(decision_id, str) or not decision_id:
            # Every decision is recorded under its id: an answer without one was not recorded,
            # so it is no decision (an allow without it would be an allow nobody can audit).
            raise DecisionParseError("decision.decision_id must be a non-empty string")
        return cls(
            decision_id=decision_id,
            allowed=allowed,
            deny=deny,
            plan_id=_opt_str(data.get("plan_id"), "plan_id"),
            profile=profile,
            checks=checks,
            raw=data,
            request_id=request_id,
        )

    def exception(self) -> ToolgateDeny | None:
        """The deny exception this decision stands for (None when allowed)."""
        if self.allowed is True and self.deny is None:
            return None
        deny = self.deny or Deny(
            error="ToolRuntimeError",
            hierarchy=["ToolRuntimeError"],
            code=None,
            check=None,
            message="toolgate did not allow the call and gave no reason",
        )
        return exception_for_deny(deny, decision=self)

    def raise_for_deny(self) -> Decision:
        """Return self when allowed, else raise the exact class named by ``deny.error``."""
        exc = self.exception()
        if exc is None:
            return self
        raise exc
