"""Wire contract of approvals (SPEC §10). Strict like every wire schema (app/kit/schemas.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from app.kit.schemas import INTEGRAL, Strict

State = Literal["pending", "granted", "rejected", "cancelled", "expired", "used"]
Text = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class GrantIn(Strict):
    note: Text | None = None
    ttl_seconds: Annotated[int, Field(ge=1, le=86400), INTEGRAL] = 900
    uses: Annotated[int, Field(ge=1, le=100), INTEGRAL] = 1


class RejectIn(Strict):
    reason: Text


class CancelIn(Strict):
    reason: Text | None = None


class ApprovalOut(BaseModel):
    approval_id: str
    state: State
    project: str | None
    plan_id: str
    action_id: str | None
    tool: str
    request: dict[str, Any]
    request_sha256: str
    args_sha256: str | None
    requested_by: str | None
    requested_at: str
    decided_by: str | None
    decided_at: str | None
    note: str | None
    reason: str | None
    expires_at: str
    uses_left: int
    decision_ids: list[str]


class ApprovalList(BaseModel):
    items: list[ApprovalOut]
    next_cursor: str | None
