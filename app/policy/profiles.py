"""SafetyProfile, its defaults, and resolution by precedence (seed 000).

Resolution walks plan > action > project > global; the first level that holds something
wins as a whole (no field-by-field merge). A level holds nothing, a profile name, or (plan
and action only) an inline SafetyProfile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.policy.numbers import INTEGRAL

# No NUL characters: PostgreSQL cannot store them, and no category name needs one.
CategoryName = Annotated[str, StringConstraints(min_length=1, max_length=200,
                                                pattern=r"^[^\x00]+$")]
# The largest cost, estimate, submitted total or credit toolgate books (SPEC §17,
# docs/ledger.md): far above any real budget, and so far below a double's range (1.8e308)
# that no sum of them a ledger can reach overflows. Cost limits are not bounded: a limit is
# only compared, never added, and stored profiles with larger ones must keep loading.
MAX_COST = 1e12
Cost = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class SafetyProfile(BaseModel):
    """Hard safety constraints; binary invariants enforced regardless of confidence."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    require_sandbox: bool = True
    require_checkpoints: bool = True
    allow_unsafe_tools: bool = False
    require_human_approval: bool = False
    allowed_skill_categories: list[CategoryName] = Field(default_factory=list)
    max_cost_per_plan: Cost | None = None
    max_retries_per_step: Annotated[int, Field(ge=0, le=100), INTEGRAL] = 3
    max_total_cost: Cost | None = None

    def as_dict(self) -> dict:
        return self.model_dump()


DEFAULT_SAFETY_PROFILE = SafetyProfile()


class Provenance(StrEnum):
    PLAN = "plan"
    ACTION = "action"
    PROJECT = "project"
    GLOBAL = "global"
    INLINE = "inline"


@dataclass(frozen=True, slots=True)
class ProfileRef:
    """A named profile: what `--automation-profile NAME` refers to."""

    name: str


# What a level holds: nothing, a named profile, or an inline profile.
Level = ProfileRef | SafetyProfile | None


@dataclass(frozen=True, slots=True)
class NamedProfile:
    name: str
    version: int
    safety: SafetyProfile


@dataclass(frozen=True, slots=True)
class Resolved:
    safety: SafetyProfile
    provenance: Provenance
    name: str | None
    version: int | None
    is_default: bool

    def summary(self) -> dict:
        return {
            "provenance": self.provenance.value,
            "name": self.name,
            "version": self.version,
            "is_default": self.is_default,
        }


class UnknownProfileError(LookupError):
    def __init__(self, name: str, level: Provenance) -> None:
        super().__init__(name)
        self.name = name
        self.level = level


def resolve(
    *,
    plan: Level = None,
    action: Level = None,
    project: Level = None,
    global_: Level = None,
    lookup: Callable[[str], NamedProfile | None],
) -> Resolved:
    """Resolve the effective SafetyProfile; raises UnknownProfileError for a missing name."""
    levels = (
        (Provenance.PLAN, plan),
        (Provenance.ACTION, action),
        (Provenance.PROJECT, project),
        (Provenance.GLOBAL, global_),
    )
    for provenance, held in levels:
        if held is None:
            continue
        if isinstance(held, SafetyProfile):
            return Resolved(held, provenance, None, None, False)
        named = lookup(held.name)
        if named is None:
            raise UnknownProfileError(held.name, provenance)
        return Resolved(named.safety, provenance, named.name, named.version, False)
    return Resolved(DEFAULT_SAFETY_PROFILE, Provenance.GLOBAL, None, None, True)


# Booleans that make a profile stricter when true, and the one that loosens it when true.
_REQUIRES = ("require_sandbox", "require_checkpoints", "require_human_approval")
_LIMITS = ("max_cost_per_plan", "max_total_cost")


def first_looser_field(candidate: SafetyProfile, baseline: SafetyProfile) -> str | None:
    """The first field (in the profile's order) in which `candidate` is looser than
    `baseline`, or None when it is as strict or stricter everywhere (SPEC §17): a
    `require_*` that is true stays true, `allow_unsafe_tools` false stays false, limits are
    no higher and not removed, and `allowed_skill_categories` is a subset unless the
    baseline's is empty (which allows every category)."""
    for field in SafetyProfile.model_fields:
        have, base = getattr(candidate, field), getattr(baseline, field)
        if field in _REQUIRES:
            looser = base and not have
        elif field == "allow_unsafe_tools":
            looser = have and not base
        elif field == "allowed_skill_categories":
            looser = bool(base) and (not have or not set(have) <= set(base))
        elif field in _LIMITS:
            looser = base is not None and (have is None or have > base)
        else:  # max_retries_per_step
            looser = have > base
        if looser:
            return field
    return None
