"""Plain values the checks work on: the effective tool, the context, the decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class Layer(StrEnum):
    RUNTIME = "runtime"
    SKILL = "skill"
    CHANGESET = "changeset"


LAYERS: dict[str, Layer] = {layer.value: layer for layer in Layer}  # cheaper than Layer(x)


@dataclass(slots=True)
class Capability:
    """A capability as submitted by a client or stored in the registry."""

    writes: bool | None = None
    read_only: bool | None = None
    checkpointable: bool | None = None
    unsafe: bool | None = None


class CapabilityFields(Protocol):
    """What effective_tool reads of a capability: a Capability, or the request's own
    object (the API's CapabilityIn or CapabilityWire), passed as it is."""

    @property
    def writes(self) -> bool | None: ...
    @property
    def read_only(self) -> bool | None: ...
    @property
    def checkpointable(self) -> bool | None: ...
    @property
    def unsafe(self) -> bool | None: ...


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """What the registry says about a tool: the source of truth for its safety."""

    name: str
    writes: bool
    checkpointable: bool
    unsafe: bool
    read_only: bool = False
    destructive: bool = False
    skill_category: str | None = None
    path_args: tuple[str, ...] = ()
    # "human_approval": "required" (SPEC §17): check 6 applies whatever the profile says.
    requires_approval: bool = False
    # Call rules (SPEC §18): "shell": {"arg": NAME} names the argument holding a command
    # line, parsed for `command` conditions; url_args name the arguments holding URLs.
    shell_arg: str | None = None
    url_args: tuple[str, ...] = ()


@dataclass(slots=True)
class Tool:
    """The effective tool a decision is about, after merging registry and request."""

    name: str
    writes: bool
    checkpointable: bool
    unsafe: bool
    destructive: bool = False
    skill_category: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    path_args: tuple[str, ...] = ()
    registered: bool = False
    requires_approval: bool = False  # the registry's "human_approval": "required"


@dataclass(slots=True)
class Context:
    plan_id: str | None = None
    sandbox_id: str | None = None
    sandbox_root: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    plan_read_only: bool = False
    require_checkpoints: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    accumulated_cost: float = 0.0
    total_accumulated_cost: float = 0.0
    step_retry_count: int = 0
    dry_run: bool = False
    confirmed: bool = False
    # Check 6 (SPEC §10): None in client_flag mode (metadata.human_approved decides);
    # "granted" or "absent" in server mode, where only an approval held by the service
    # counts and the agent's own flag is ignored. The service decides which, not the agent.
    approval: str | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    error: str
    hierarchy: tuple[str, ...]
    code: str
    check: str
    message: str
    details: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "hierarchy": list(self.hierarchy),
            "code": self.code,
            "check": self.check,
            "message": self.message,
            "details": self.details,
        }


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    outcome: str  # "pass" | "fail" | "skip"
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "outcome": self.outcome, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    deny: Deny | None
    checks: tuple[CheckResult, ...] | None = None
