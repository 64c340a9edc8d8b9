"""The wire contract (SPEC §2–§4): request and response bodies.

Types are strict everywhere: a boolean is JSON true/false, an integer a JSON integer,
numbers finite. Unknown fields are rejected except in the free-form `context.metadata`,
`context.variables` and `tool.args`. These models import no FastAPI, so the decision-case
runner and the CLI use them too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from app.policy.checks import effective_tool
from app.policy.model import LAYERS, Context, RegisteredTool, Tool
from app.policy.profiles import SafetyProfile

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
PROFILE_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ProfileName = Annotated[str, StringConstraints(pattern=PROFILE_NAME_PATTERN)]
Cost = Annotated[float, Field(ge=0, allow_inf_nan=False)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


def _nul_free(value: Any) -> Any:
    items = value if isinstance(value, list) else [value]
    if any(isinstance(item, str) and "\x00" in item for item in items):
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


class Stored(Strict):
    """A body whose strings are stored as they are: PostgreSQL cannot store NUL characters,
    so they are refused here (422 naming the field) on every backend alike."""

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        return _nul_free(value)


# --- profiles and configuration -------------------------------------------------------

class ProfileIn(Stored):
    description: Annotated[str, StringConstraints(max_length=2000)] = ""
    safety: SafetyProfile = Field(default_factory=SafetyProfile)


class ProfileOut(BaseModel):
    name: str
    description: str
    safety: SafetyProfile
    version: int
    created_at: datetime
    updated_at: datetime


class ProfileList(BaseModel):
    items: list[ProfileOut]


class ProfileVersionOut(BaseModel):
    name: str
    version: int
    description: str
    safety: SafetyProfile
    created_at: datetime


class ProfileVersionList(BaseModel):
    items: list[ProfileVersionOut]


class ProfileChoice(Strict):
    automation_profile: ProfileName | None = None


class ConfigOut(BaseModel):
    automation_profile: str | None
    updated_at: datetime | None = None


class ProjectOut(BaseModel):
    project: str
    automation_profile: str | None
    created_at: datetime
    updated_at: datetime


class ProjectList(BaseModel):
    items: list[ProjectOut]


class ActionIn(Stored):
    project: Name | None = None
    read_only: bool = False
    automation_profile: ProfileName | None = None
    safety_profile: SafetyProfile | None = None

    _one_profile = field_validator("safety_profile")(lambda v, info: _one_profile(v, info))


class ActionOut(BaseModel):
    action_id: str
    project: str | None
    read_only: bool
    automation_profile: str | None
    safety_profile: SafetyProfile | None
    created_at: datetime
    updated_at: datetime


class ActionList(BaseModel):
    items: list[ActionOut]


def _one_profile(value: SafetyProfile | None, info: ValidationInfo) -> SafetyProfile | None:
    """Errors are raised on the field itself, so a 422 names `safety_profile`."""
    if value is not None and info.data.get("automation_profile") is not None:
        raise ValueError("give either automation_profile or safety_profile, not both")
    return value


# --- plans and resolution --------------------------------------------------------------

class PlanIn(Strict):
    action_id: Name
    plan_id: Name | None = None
    automation_profile: ProfileName | None = None
    safety_profile: SafetyProfile | None = None

    _one_profile = field_validator("safety_profile")(lambda v, info: _one_profile(v, info))


class PlanOut(BaseModel):
    plan_id: str
    action_id: str
    project: str | None
    read_only: bool
    safety_profile: SafetyProfile
    provenance: str
    name: str | None
    version: int | None
    is_default: bool
    state: str
    created_at: datetime


class PlanList(BaseModel):
    items: list[PlanOut]
    next_cursor: str | None = None


class ResolveIn(Strict):
    plan_id: Name | None = None
    action_id: Name | None = None
    project: Name | None = None
    automation_profile: ProfileName | None = None
    safety_profile: SafetyProfile | None = None

    _one_profile = field_validator("safety_profile")(lambda v, info: _one_profile(v, info))

    @field_validator("action_id", "project", "automation_profile", "safety_profile")
    @classmethod
    def _nothing_with_plan_id(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("plan_id") is not None:
            raise ValueError("not accepted with plan_id (a plan's lock is resolved already)")
        return value


class ResolveOut(BaseModel):
    safety_profile: SafetyProfile
    provenance: str
    name: str | None
    version: int | None
    is_default: bool


# --- decisions -------------------------------------------------------------------------

class CapabilityIn(Strict):
    writes: bool | None = None
    read_only: bool | None = None
    checkpointable: bool | None = None
    unsafe: bool | None = None


class ToolIn(Strict):
    name: Name
    capability: CapabilityIn | None = None
    safety_category: Literal["safe", "destructive"] | None = None
    skill_category: Annotated[str, StringConstraints(max_length=200)] | None = None
    args: dict[str, Any] = Field(default_factory=dict)


class ContextIn(Strict):
    plan_id: Name | None = None
    sandbox_id: Annotated[str, StringConstraints(max_length=200)] | None = None
    sandbox_root: Annotated[str, StringConstraints(max_length=4096)] | None = None
    variables: dict[str, Any] = Field(default_factory=dict)
    plan_read_only: bool = False
    require_checkpoints: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    accumulated_cost: Cost = 0.0
    total_accumulated_cost: Cost = 0.0
    step_retry_count: NonNegativeInt = 0
    dry_run: bool = False
    confirmed: bool = False


class AuthorizeIn(Strict):
    plan_id: Name | None = None
    safety_profile: SafetyProfile | None = None
    layer: Literal["runtime", "skill", "changeset"] = "runtime"
    explain: bool = False
    tool: ToolIn
    context: ContextIn = Field(default_factory=ContextIn)

    @field_validator("safety_profile")
    @classmethod
    def _profile_only_without_plan(cls, value: SafetyProfile | None,
                                   info: ValidationInfo) -> SafetyProfile | None:
        if value is not None and info.data.get("plan_id") is not None:
            raise ValueError("only accepted without plan_id (a plan's profile is locked "
                             "at creation)")
        return value

    def core_context(self, *, plan_id: str | None, stored_read_only: bool) -> Context:
        return core_context(self, plan_id=plan_id, stored_read_only=stored_read_only)

    def core_tool(self, registered: RegisteredTool | None) -> Tool:
        return core_tool(self, registered)


def core_context(request: Any, *, plan_id: str | None, stored_read_only: bool) -> Context:
    """The core's Context from an authorize request (AuthorizeIn, or the hot path's
    AuthorizeWire in app/api/wire.py: the same attributes)."""
    c = request.context
    # Positional, in Context's field order: half the cost of keywords, once per decision.
    return Context(
        plan_id,
        c.sandbox_id or None,
        c.sandbox_root,
        c.variables,
        stored_read_only or c.plan_read_only,
        c.require_checkpoints,
        c.metadata,
        c.accumulated_cost,
        c.total_accumulated_cost,
        c.step_retry_count,
        c.dry_run,
        c.confirmed,
    )


def core_tool(request: Any, registered: RegisteredTool | None) -> Tool:
    """The effective tool; raises MissingCapability for an unregistered tool that did not
    say what it does."""
    t = request.tool
    return effective_tool(
        name=t.name,
        capability=t.capability,  # CapabilityIn or CapabilityWire: the same four fields
        destructive=t.safety_category == "destructive",
        skill_category=t.skill_category,
        args=t.args,
        metadata=request.context.metadata,
        registered=registered,
        layer=LAYERS[request.layer],
    )


class DenyOut(BaseModel):
    error: str
    hierarchy: list[str]
    code: str
    check: str
    message: str
    details: dict[str, Any]


class ProfileSummary(BaseModel):
    provenance: str
    name: str | None
    version: int | None
    is_default: bool


class CheckOut(BaseModel):
    check: str
    outcome: Literal["pass", "fail", "skip"]
    reason: str


class DecisionOut(BaseModel):
    decision_id: str
    allowed: bool
    deny: DenyOut | None
    plan_id: str | None
    profile: ProfileSummary | None
    checks: list[CheckOut] | None = None


class AuthorizeBatchIn(Strict):
    requests: Annotated[list[AuthorizeIn], Field(min_length=1, max_length=100)]


class DecisionBatchOut(BaseModel):
    items: list[DecisionOut]
