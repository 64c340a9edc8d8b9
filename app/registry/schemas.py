"""Wire contract of the registry and screening (SPEC §5, seed 003).

Strict like every wire schema (app/kit/schemas.py): JSON booleans only, unknown fields
rejected (422 naming them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, StringConstraints, model_validator

from app.kit.schemas import Name, ProfileName, Stored, Strict
from app.policy.screening import normalize_phrase, normalize_phrases

SafetyCategory = Literal["safe", "destructive"]
HumanApproval = Literal["required", "profile"]
Category = Annotated[str, StringConstraints(min_length=1, max_length=200)]
ArgName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Phrase = Annotated[str, AfterValidator(normalize_phrase)]
MAX_TEXT_CHARS = 100_000


# --- tools ------------------------------------------------------------------------------

class ToolCapabilityIn(Strict):
    """What the tool does. writes, checkpointable and unsafe must be stated: the registry is
    the source of truth and a guessed default would be a silent classification."""

    writes: bool
    read_only: bool = False
    checkpointable: bool
    unsafe: bool

    @model_validator(mode="after")
    def _consistent(self) -> ToolCapabilityIn:
        if self.writes and self.read_only:
            raise ValueError("a tool cannot both write (writes=true) and be read_only")
        return self


class ShellIn(Strict):
    """A shell tool (SPEC §18): the argument that holds its command line, which rules
    parse into simple commands (docs/rules.md)."""

    arg: ArgName


class ToolDefIn(Stored):
    capability: ToolCapabilityIn
    # Required: the seed's guarantee "is only as good as the category you wrote".
    safety_category: SafetyCategory
    skill_category: Category | None = None
    # Arguments holding sandbox-sensitive paths (SPEC §5 "Sandbox paths").
    path_args: Annotated[list[ArgName], Field(max_length=100)] = Field(default_factory=list)
    # "required": check 6 applies to this tool in every plan with a profile, even one that
    # does not require approval (SPEC §17, docs/registry.md); "profile": as it says.
    human_approval: HumanApproval = "profile"
    # SPEC §18: a shell tool's command-line argument, and the arguments holding URLs (the
    # hosts rules' `domains` match).
    shell: ShellIn | None = None
    url_args: Annotated[list[ArgName], Field(max_length=100)] = Field(default_factory=list)


class ToolCapabilityOut(BaseModel):
    writes: bool
    read_only: bool
    checkpointable: bool
    unsafe: bool


class ToolOut(BaseModel):
    name: str
    capability: ToolCapabilityOut
    safety_category: SafetyCategory
    skill_category: str | None
    path_args: list[str]
    human_approval: HumanApproval = "profile"
    shell: ShellIn | None = None
    url_args: list[str] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime


class ToolList(BaseModel):
    items: list[ToolOut]


# --- skills -----------------------------------------------------------------------------

class SkillIn(Stored):
    category: Category | None = None
    # Each phrase normalised (SPEC §5: NFKC, case-folded, whitespace runs made one space,
    # stripped), non-empty, at most 200 characters so; stored in order, without duplicates.
    unsafe_phrases: Annotated[list[Phrase], Field(max_length=1000)]

    @model_validator(mode="after")
    def _dedupe(self) -> SkillIn:
        self.unsafe_phrases = normalize_phrases(self.unsafe_phrases)
        return self


class SkillOut(BaseModel):
    name: str
    category: str | None
    unsafe_phrases: list[str]
    warnings: list[str]
    created_at: datetime
    updated_at: datetime


class SkillList(BaseModel):
    items: list[SkillOut]


# --- screening --------------------------------------------------------------------------

class ScreenIn(Strict):
    skill: Name | None = None
    text: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]


class ScreenOut(BaseModel):
    decision_id: str
    rejected: bool
    matched_phrase: str | None
    skill: str | None
    error: Literal["UnsafeRequestRejectedError"] | None
    code: Literal["unsafe_phrase"] | None
    message: str


class MissedOut(BaseModel):
    line: int
    text: str


class SafetyTestOut(BaseModel):
    skill: str
    total: int
    rejected: int
    missed: list[MissedOut]
    ok: bool


# --- project settings (SPEC §9) and the registry part of them ---------------------------

ApprovalMode = Literal["client_flag", "server"]


class ProjectSettingsIn(Strict):
    """The whole settings: a field left out takes its default."""

    deny_unregistered_tools: bool = False
    # Stored and served; approvals held by the service (SPEC §10) are not built yet.
    approval_mode: ApprovalMode = "client_flag"
    # An existing profile's name (422 otherwise): decisions of the project's plans are
    # evaluated under it too, never enforced (SPEC §12, docs/replay.md).
    shadow_profile: ProfileName | None = None


class ProjectSettingsOut(BaseModel):
    project: str
    deny_unregistered_tools: bool
    approval_mode: ApprovalMode
    shadow_profile: str | None
    updated_at: datetime | None


class ProjectSettingsList(BaseModel):
    items: list[ProjectSettingsOut]


class RegistrySettingsIn(Strict):
    deny_unregistered_tools: bool


class RegistrySettingsOut(BaseModel):
    project: str
    deny_unregistered_tools: bool
    updated_at: datetime | None
