"""The wire contract of profiles, the global configuration, projects and actions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import (
    BaseModel,
    Field,
    StringConstraints,
    field_validator,
)

from app.kit.schemas import Name, ProfileName, Stored, Strict, one_profile
from app.policy.profiles import SafetyProfile

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

    _one_profile = field_validator("safety_profile")(lambda v, info: one_profile(v, info))


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
