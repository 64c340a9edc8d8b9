"""The wire contract of decisions (SPEC §2–§4): request and response bodies.

These models import no FastAPI, so the decision-case runner and the CLI use them too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from app.edge.freeform import FreeForm
from app.kit.schemas import Cost, Name, NonNegativeInt, Strict
from app.policy.model import LAYERS, Context, RegisteredTool, Tool
from app.policy.paths import root_refusal
from app.policy.profiles import SafetyProfile
from app.policy.tool import effective_tool

# --- decisions -------------------------------------------------------------------------

MAX_PATH_ARGS = 32
PathArg = Annotated[str, StringConstraints(min_length=1, max_length=200)]

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
    args: FreeForm = Field(default_factory=dict)
    # Argument names whose values are paths (SPEC §17): added to the registry's, so a
    # caller (the MCP gateway, the coding-agent hooks) can only add path checks.
    path_args: Annotated[list[PathArg], Field(max_length=MAX_PATH_ARGS)] = \
        Field(default_factory=list)


class ContextIn(Strict):
    plan_id: Name | None = None
    sandbox_id: Annotated[str, StringConstraints(max_length=200)] | None = None
    sandbox_root: Annotated[str, StringConstraints(max_length=4096)] | None = None
    variables: FreeForm = Field(default_factory=dict)
    plan_read_only: bool = False
    require_checkpoints: bool = False
    metadata: FreeForm = Field(default_factory=dict)
    accumulated_cost: Cost = 0.0
    total_accumulated_cost: Cost = 0.0
    step_retry_count: NonNegativeInt = 0
    dry_run: bool = False
    confirmed: bool = False
    # The ledger (SPEC §11, docs/ledger.md): the step this call is an attempt of (check 8
    # counts its failed outcomes) and what it may cost (held until its outcome is reported).
    step_id: Name | None = None
    estimated_cost: Cost | None = None

    @field_validator("sandbox_root")
    @classmethod
    def _root_does_not_climb(cls, value: str | None) -> str | None:
        # "/sandbox/.." would silently be "/" (issue 22). The hot path's decoder applies the
        # same function (app/authorize/wire.py).
        refusal = None if value is None else root_refusal(value)
        if refusal is not None:
            raise ValueError(refusal)
        return value


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
    AuthorizeWire in app/authorize/wire.py: the same attributes)."""
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
        path_args=t.path_args,
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
