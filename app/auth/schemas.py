"""Wire contract of API key management (SPEC §6 "Keys")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from app.auth.principals import normal
from app.kit.schemas import DateTimeUTCDefault, Name, Stored

RoleName = Literal["admin", "agent", "approver", "auditor"]


class KeyIn(Stored):
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    role: RoleName
    # Required, so "every project" is always a deliberate null, never a forgotten field.
    projects: Annotated[list[Name], Field(min_length=1, max_length=1000)] | None
    # RFC 3339 text only (strict mode would refuse any string, lax mode would take numbers);
    # without an offset it is UTC.
    expires_at: Annotated[DateTimeUTCDefault | None, Field(strict=False)] = None
    # May send authorize requests without plan_id (SPEC §9); needs projects: null.
    stateless: bool = False
    # The person or service behind the key; default (null): the key's own id.
    principal: Name | None = None

    @field_validator("principal", mode="before")
    @classmethod
    def _normal_principal(cls, value: object) -> object:
        # Stored case-folded and NFKC-normalised (app/auth/principals.py), then checked
        # against the name pattern: `ＢＯＴ-x` is the principal `bot-x`.
        return normal(value) if isinstance(value, str) else value

    @field_validator("projects")
    @classmethod
    def _dedupe(cls, value: list[str] | None) -> list[str] | None:
        return sorted(set(value)) if value is not None else None

    @field_validator("expires_at")
    @classmethod
    def _future(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if value <= datetime.now(UTC):
            raise ValueError("must be in the future")
        return value

    @model_validator(mode="after")
    def _admin_is_global(self) -> KeyIn:
        if self.role == "admin" and self.projects is not None:
            raise ValueError("an admin key is for every project: projects must be null")
        return self

    @field_validator("stateless")
    @classmethod
    def _stateless_is_global(cls, value: bool, info: ValidationInfo) -> bool:
        # On the field (it comes after projects), so the 422 names `stateless`.
        if value and info.data.get("projects") is not None:
            raise ValueError("a stateless key's decisions belong to no project: "
                             "projects must be null")
        return value


class KeyOut(BaseModel):
    id: str
    name: str
    role: RoleName
    projects: list[str] | None
    prefix: str = Field(description="The first characters of the secret, to tell keys apart")
    created_at: datetime
    created_by: str | None
    expires_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None
    stateless: bool = Field(description="May send authorize requests without plan_id")
    principal: str = Field(description="The person or service behind the key "
                                       "(the key's own id unless it was given one)")


class KeyCreated(KeyOut):
    key: str = Field(description="The secret. Shown only in this answer; store it now.")


class KeyList(BaseModel):
    items: list[KeyOut]
