"""Wire contract of webhooks (SPEC §10). `secret` is write-only."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, field_validator

from app.kit.schemas import Name, Strict

Event = Literal["approval.pending", "approval.granted", "approval.rejected",
                "approval.cancelled", "approval.expired", "decision.denied"]
Url = Annotated[str, StringConstraints(min_length=8, max_length=2000,
                                       pattern=r"^https?://[^\s]+$")]


class WebhookIn(Strict):
    url: Url
    events: Annotated[list[Event], Field(min_length=1, max_length=6)]
    projects: Annotated[list[Name], Field(max_length=1000)] | None = None
    secret: Annotated[str, StringConstraints(min_length=16, max_length=500)]

    @field_validator("events", "projects")
    @classmethod
    def _unique(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else sorted(set(value))


class WebhookOut(BaseModel):
    name: str
    url: str
    events: list[str]
    projects: list[str] | None
    created_at: str
    updated_at: str


class WebhookList(BaseModel):
    items: list[WebhookOut]


class Attempt(BaseModel):
    at: str
    status: int | None
    duration_ms: float
    error: str | None = None


class DeliveryOut(BaseModel):
    id: int
    event_id: str
    event: str
    state: Literal["pending", "delivered", "failed"]
    attempts: int
    last_status: int | None
    last_error: str | None
    history: list[Attempt]
    created_at: str
    next_attempt_at: str | None
    delivered_at: str | None


class DeliveryList(BaseModel):
    items: list[DeliveryOut]
    next_cursor: str | None
