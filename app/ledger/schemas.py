"""The wire contract of outcomes and the ledger (SPEC §11)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from app.kit.schemas import INTEGRAL, MAX_COST, Cost, Stored, Strict

Status = Literal["succeeded", "activation_failed", "execution_failed", "deactivation_failed"]
Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{64}$")]


class ArtifactIn(Stored):
    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    sha256: Hex | None = None
    bytes: Annotated[int, Field(ge=0), INTEGRAL] | None = None


class OutcomeIn(Stored):
    status: Status
    cost: Cost = 0.0
    verified: bool | None = None
    error: Annotated[str, StringConstraints(max_length=2000)] | None = None
    args_sha256: Hex | None = None
    artifacts: Annotated[list[ArtifactIn], Field(max_length=100)] | None = None


class OutcomeItemIn(OutcomeIn):
    decision_id: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class OutcomeBatchIn(Strict):
    outcomes: Annotated[list[OutcomeItemIn], Field(min_length=1, max_length=100)]


class ArtifactOut(BaseModel):
    path: str
    sha256: str | None = None
    bytes: int | None = None


class OutcomeOut(BaseModel):
    decision_id: str
    status: Status
    cost: float
    verified: bool | None
    error: str | None
    args_sha256: str | None
    artifacts: list[ArtifactOut] | None
    error_class: str | None
    unverified: bool
    args_mismatch: bool
    reported_at: str


class OutcomeResult(BaseModel):
    decision_id: str
    status_code: int
    outcome: OutcomeOut | None = None
    error: dict | None = None


class OutcomeBatchOut(BaseModel):
    items: list[OutcomeResult]


class CreditIn(Strict):
    amount: Annotated[float, Field(gt=0, le=MAX_COST, allow_inf_nan=False)]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class StepOut(BaseModel):
    failures: int


class PlanLedgerOut(BaseModel):
    spent: float
    held: float
    steps: dict[str, StepOut]


class ProjectLedgerOut(BaseModel):
    project: str
    spent: float
    held: float
