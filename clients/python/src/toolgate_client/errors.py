"""Exceptions raised by the toolgate client.

Three families, deliberately disjoint:

* **Denies** -- toolgate decided, and the answer is *no*. One class per error of SPEC §3,
  with the same names and parents as the service's hierarchy. They all share the
  :class:`ToolgateDeny` mixin, so ``except ToolgateDeny`` catches any deny.
* :class:`ToolgateUnavailableError` -- *no decision could be obtained* (connection error,
  timeout, 5xx after retries, an answer that cannot be parsed). Never a deny: the caller
  must treat it as "not allowed" (fail closed) but may retry later.
* :class:`ToolgateRequestError` -- toolgate refused the *request* (4xx with the error
  envelope ``{"error": {"code", "message", "details"}}``): bad input, unknown plan, auth...

``ToolgateUnavailableError`` and ``ToolgateRequestError`` share the base
:class:`ToolgateError`; no deny class derives from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .models import Decision

__all__ = [
    "CODES",
    "PARENTS",
    "ToolgateDeny",
    "ToolRuntimeError",
    "ToolAccessDeniedError",
    "ToolCheckpointRequiredError",
    "ToolSafetyViolationError",
    "ToolSandboxRequiredError",
    "ToolHumanApprovalRequiredError",
    "ToolCostLimitExceededError",
    "ToolRetryLimitExceededError",
    "ToolConfirmationRequiredError",
    "ToolSandboxEscapeError",
    "ToolNotActivatedError",
    "ToolActivationError",
    "ToolExecutionError",
    "ToolDeactivationError",
    "SkillExecutionError",
    "ReadOnlyViolationError",
    "PlanReadOnlyError",
    "UnsafeRequestRejectedError",
    "ToolgateError",
    "ToolgateUnavailableError",
    "ToolgateRequestError",
    "error_class_for",
    "exception_for_deny",
    "hierarchy_of",
]


# --------------------------------------------------------------------------------------
# Denies
# --------------------------------------------------------------------------------------


def _rebuild(cls: type, message: str, state: dict[str, Any]) -> BaseException:
    exc = cls(message, **state)
    return exc


class ToolgateDeny(Exception):
    """Common base (mixin) of every deny class: ``except ToolgateDeny`` catches any deny.

    Attributes: ``code``, ``message``, ``decision_id``, ``details``, ``check``,
    ``hierarchy`` (class names, root first), ``error`` (the class name the service named,
    which differs from ``type(self).__name__`` only when the client did not know it) and
    ``decision`` (the :class:`~toolgate_client.Decision`, when raised from one).
    """

    #: default code when none is given (the first of CODES[class], if any)
    default_code: str | None = None

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        decision_id: str | None = None,
        details: dict[str, Any] | None = None,
        check: str | None = None,
        hierarchy: list[str] | None = None,
        error: str | None = None,
        decision: Decision | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.decision_id = decision_id
        self.details: dict[str, Any] = dict(details) if details else {}
        self.check = check
        self.hierarchy = list(hierarchy) if hierarchy else hierarchy_of(type(self).__name__)
        self.error = error or type(self).__name__
        self.decision = decision
        #: HTTP status when the deny came from an error answer (409 plan_read_only), else None
        self.status = status

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, code={self.code!r}, "
            f"decision_id={self.decision_id!r})"
        )

    def __reduce__(self):  # keep the keyword state through pickling (multiprocessing)
        state = {
            "code": self.code,
            "decision_id": self.decision_id,
            "details": self.details,
            "check": self.check,
            "hierarchy": self.hierarchy,
            "error": self.error,
            "status": self.status,
        }
        return (_rebuild, (type(self), self.message, state))


class ToolRuntimeError(ToolgateDeny):
    """Root of the runtime (ToolRuntime._enforce_capabilities) denies."""


class ToolAccessDeniedError(ToolRuntimeError):
    """Read-only plan violation (check ``read_only``), or a call a deny rule matches
    (check ``rules``, code ``rule_denied``; ``details["rule"]`` names the rule)."""


class ToolCheckpointRequiredError(ToolRuntimeError):
    """Checkpointing required but the tool is not checkpointable."""


class ToolSafetyViolationError(ToolRuntimeError):
    """Unsafe tool or skill-category violation."""


class ToolSandboxRequiredError(ToolRuntimeError):
    """A writing tool without a sandbox while the profile requires one."""


class ToolHumanApprovalRequiredError(ToolRuntimeError):
    """Human approval required and not recorded.

    In a project whose approvals are held by the service, ``approval`` is the approval the
    deny names (``details["approval"]``: its ``approval_id``, ``state`` and, when rejected,
    ``reason``); after ``enforce(..., wait_for_approval=...)`` gave up, the approval as it
    last read it (the full object of ``GET /v1/approvals/{id}``)."""

    @property
    def approval(self) -> dict[str, Any] | None:
        approval = self.details.get("approval")
        return approval if isinstance(approval, dict) else None


class ToolCostLimitExceededError(ToolRuntimeError):
    """Per-plan or total cost limit reached."""


class ToolRetryLimitExceededError(ToolRuntimeError):
    """Step retry count above the profile's limit."""


class ToolConfirmationRequiredError(ToolRuntimeError):
    """Destructive tool without dry_run or confirmed."""


class ToolSandboxEscapeError(ToolRuntimeError):
    """A sandbox-sensitive path argument escapes the sandbox root."""


class ToolNotActivatedError(ToolRuntimeError):
    """The tool is not activated: not in the registry where that is required
    (``tool_not_activated``), or a hook's call of a tool the registry does not know
    (``unregistered_tool``)."""


class ToolActivationError(ToolRuntimeError):
    pass


class ToolExecutionError(ToolRuntimeError):
    pass


class ToolDeactivationError(ToolRuntimeError):
    pass


class SkillExecutionError(ToolgateDeny):
    """Skill write guard (layer ``skill``). ``error_type`` is ``"PERMISSION_DENIED"``."""

    def __init__(self, message: str = "", *, error_type: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        if error_type is None:
            error_type = self.details.get("error_type")
        self.error_type: str = error_type if isinstance(error_type, str) else "PERMISSION_DENIED"

    def __reduce__(self):
        fn, (cls, message, state) = super().__reduce__()
        return (fn, (cls, message, {**state, "error_type": self.error_type}))


class ReadOnlyViolationError(ToolgateDeny):
    """ChangeSetCapture refused to wrap a write-capable tool (layer ``changeset``)."""


class PlanReadOnlyError(ToolgateDeny):
    """A plan transition was refused because the plan is read-only (409 ``plan_read_only``)."""


class UnsafeRequestRejectedError(ToolgateDeny):
    """Pre-model rejection: the text matched an unsafe phrase."""


#: class name -> the deny codes the service may send with it (SPEC §3)
CODES: dict[str, tuple[str, ...]] = {
    "ToolRuntimeError": (),
    "ToolAccessDeniedError": ("read_only", "rule_denied"),
    "ToolCheckpointRequiredError": ("checkpoint_required",),
    "ToolSafetyViolationError": (
        "unsafe_tool",
        "skill_category_missing",
        "skill_category_not_allowed",
    ),
    "ToolSandboxRequiredError": ("sandbox_required",),
    "ToolHumanApprovalRequiredError": ("human_approval_required",),
    "ToolCostLimitExceededError": ("plan_cost_limit_exceeded", "total_cost_limit_exceeded"),
    "ToolRetryLimitExceededError": ("retry_limit_exceeded",),
    "ToolConfirmationRequiredError": ("confirmation_required",),
    "ToolSandboxEscapeError": ("sandbox_path_escape",),
    "ToolNotActivatedError": ("tool_not_activated", "unregistered_tool"),
    "ToolActivationError": ("activation_failed",),
    "ToolExecutionError": ("execution_failed",),
    "ToolDeactivationError": ("deactivation_failed",),
    "SkillExecutionError": ("write_denied",),
    "ReadOnlyViolationError": ("changeset_read_only",),
    "PlanReadOnlyError": ("plan_read_only",),
    "UnsafeRequestRejectedError": ("unsafe_phrase",),
}

_CLASSES: dict[str, type[ToolgateDeny]] = {
    name: obj for name, obj in list(globals().items()) if name in CODES
}
assert set(_CLASSES) == set(CODES)

#: class name -> parent class name in the service's hierarchy (None for a root)
PARENTS: dict[str, str | None] = {
    name: (None if cls.__bases__[0] is ToolgateDeny else cls.__bases__[0].__name__)
    for name, cls in _CLASSES.items()
}

for _name, _cls in _CLASSES.items():
    _cls.default_code = CODES[_name][0] if CODES[_name] else None
del _name, _cls


def error_class_for(name: str) -> type[ToolgateDeny] | None:
    """The deny class named ``name`` (e.g. ``"ToolSandboxRequiredError"``), or None if unknown."""
    return _CLASSES.get(name) if isinstance(name, str) else None


def hierarchy_of(name: str) -> list[str]:
    """Class names from the root down to ``name``; ``[name]`` for an unknown name."""
    chain = [name]
    while (parent := PARENTS.get(chain[-1])) is not None:
        chain.append(parent)
    return chain[::-1]


def resolve_deny_class(error: Any, hierarchy: Any = None) -> type[ToolgateDeny]:
    """The class to raise for a deny naming ``error``. Never fails (fail closed).

    The named class when known; else the most specific known class of the service's
    ``hierarchy`` (a newer service may add subclasses); else :class:`ToolRuntimeError`.
    """
    cls = error_class_for(error)
    if cls is not None:
        return cls
    if isinstance(hierarchy, list):
        for ancestor in reversed(hierarchy):
            cls = error_class_for(ancestor)
            if cls is not None:
                return cls
    return ToolRuntimeError


def exception_for_deny(deny: Any, *, decision: Decision | None = None) -> ToolgateDeny:
    """Build (not raise) the exception for a :class:`~toolgate_client.Deny`."""
    cls = resolve_deny_class(deny.error, deny.hierarchy)
    return cls(
        deny.message or f"toolgate denied the call ({deny.error}: {deny.code})",
        code=deny.code,
        decision_id=decision.decision_id if decision is not None else None,
        details=deny.details,
        check=deny.check,
        hierarchy=deny.hierarchy,
        error=deny.error,
        decision=decision,
    )


# --------------------------------------------------------------------------------------
# Not decisions
# --------------------------------------------------------------------------------------


class ToolgateError(Exception):
    """Base of the client's non-deny errors (unavailable, request refused)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details: dict[str, Any] = dict(details) if details else {}
        self.request_id = request_id
        #: never set for these errors; present so handlers can read it uniformly
        self.decision_id: str | None = None

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return (
            _rebuild,
            (
                type(self),
                self.message,
                {
                    "status": self.status,
                    "code": self.code,
                    "details": self.details,
                    "request_id": self.request_id,
                },
            ),
        )


class ToolgateUnavailableError(ToolgateError):
    """No decision could be obtained: treat as *not allowed*; retrying later may help.

    Raised on connection errors, timeouts, 5xx answers (after the retries for 502/503/504)
    and answers that cannot be parsed. ``status`` is the last HTTP status, or None when no
    answer arrived.
    """


class ToolgateRequestError(ToolgateError):
    """toolgate answered 4xx with ``{"error": {"code", "message", "details"}}``.

    ``status`` is the HTTP status; ``code``/``message``/``details`` come from the envelope.
    """
