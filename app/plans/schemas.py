"""The wire contract of plans and resolution."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    ValidationInfo,
    field_validator,
)

from app.kit.schemas import Name, ProfileName, Strict, one_profile
from app.ledger.schemas import PlanLedgerOut
from app.policy.profiles import SafetyProfile

# --- plans and resolution --------------------------------------------------------------

class PlanIn(Strict):
    action_id: Name
    plan_id: Name | None = None
    automation_profile: ProfileName | None = None
    safety_profile: SafetyProfile | None = None

    _one_profile = field_validator("safety_profile")(lambda v, info: one_profile(v, info))


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


class PlanWithLedgerOut(PlanOut):
    """GET /v1/plans/{plan_id}: the plan and its ledger (SPEC §11)."""

    ledger: PlanLedgerOut


class PlanList(BaseModel):
    items: list[PlanOut]
    next_cursor: str | None = None


class ResolveIn(Strict):
    plan_id: Name | None = None
    action_id: Name | None = None
    project: Name | None = None
    automation_profile: ProfileName | None = None
    safety_profile: SafetyProfile | None = None

    _one_profile = field_validator("safety_profile")(lambda v, info: one_profile(v, info))

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
