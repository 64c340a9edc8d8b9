"""The wire contract of POST /v1/replay (SPEC §12)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from app.kit.schemas import INTEGRAL, DateTime, Name, Strict
from app.policy.model import RegisteredTool
from app.policy.profiles import CategoryName, SafetyProfile
from app.registry.schemas import SkillIn, ToolDefIn
from app.rules.schemas import RuleIn

# The most a candidate may hold (docs/replay.md): 1,000 tools, 1,000 skills and 1,000
# allowed_skill_categories (as a skill's unsafe_phrases), each category at most 200
# characters (CategoryName); each tool body within PUT /v1/tools' own bounds (path_args
# <= 100), and the whole body within TOOLGATE_MAX_BODY_BYTES.
MAX_CANDIDATE_ENTRIES = 1000


class CandidateProfile(SafetyProfile):
    """A SafetyProfile within the candidate's bounds."""

    allowed_skill_categories: Annotated[list[CategoryName], Field(
        max_length=MAX_CANDIDATE_ENTRIES)] = Field(default_factory=list)


class CandidateIn(Strict):
    """What would change: a profile that replaces each decision's profile whole (defaults
    filled in), registry entries that replace the ones decisions saw (null: removed).
    `skills` are checked and accepted for symmetry with the registry; authorize decisions
    do not read skills (screening does), so they change no verdict here."""

    profile: CandidateProfile | None = None
    tools: Annotated[dict[Name, ToolDefIn | None],
                     Field(max_length=MAX_CANDIDATE_ENTRIES)] = Field(default_factory=dict)
    skills: Annotated[dict[Name, SkillIn | None],
                      Field(max_length=MAX_CANDIDATE_ENTRIES)] = Field(default_factory=dict)
    # Call rules by id (SPEC §18): they replace the rules decisions were made under, whole
    # ({}: no rule at all); absent, each decision's rules are taken as recorded.
    rules: Annotated[dict[Name, RuleIn], Field(max_length=MAX_CANDIDATE_ENTRIES)] | None = None

    def registered(self) -> dict[str, RegisteredTool | None]:
        return {name: None if body is None else RegisteredTool(
            name=name, writes=body.capability.writes,
            checkpointable=body.capability.checkpointable, unsafe=body.capability.unsafe,
            read_only=body.capability.read_only,
            destructive=body.safety_category == "destructive",
            skill_category=body.skill_category, path_args=tuple(body.path_args),
            requires_approval=body.human_approval == "required",
            shell_arg=body.shell.arg if body.shell is not None else None,
            url_args=tuple(body.url_args))
            for name, body in self.tools.items()}


class ReplayIn(Strict):
    since: Annotated[DateTime, Field(strict=False)]
    until: Annotated[DateTime | None, Field(strict=False)] = None  # null: now
    project: Name | None = None
    plan_id: Name | None = None
    tool: Name | None = None
    candidate: CandidateIn = Field(default_factory=CandidateIn)
    examples: Annotated[int, Field(ge=0, le=1000), INTEGRAL] = 100


class Verdict(BaseModel):
    allowed: bool
    code: str | None


class Transition(BaseModel):
    from_: str = Field(alias="from")
    to: str
    count: int


class Example(BaseModel):
    decision_id: str
    tool: str | None
    plan_id: str | None
    before: Verdict
    after: Verdict


class Unreplayable(BaseModel):
    masked: int
    legacy: int
    ledger: int  # a candidate's cost limit would read a spend the log cannot rebuild


class ReplayOut(BaseModel):
    checked: int
    changed: int
    allow_to_deny: int
    deny_to_allow: int
    code_changed: int
    transitions: list[Transition]
    examples: list[Example]
    unreplayable: Unreplayable
    from_: datetime | None = Field(alias="from")
    to: datetime | None
    truncated: bool
