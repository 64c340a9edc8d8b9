"""What the profiles feature offers the features built on it, and the one thing it needs
of them.

Plans and the registry read profiles, actions, projects and the global config through the
reads below. The registry in turn builds on profiles (a project's `shadow_profile` names
one, SPEC §12), so profiles cannot import it: what a profile's change means for the
registry is handed in as `Shadows` (main.py wires app/registry/service.py's
`ShadowProjects`), as OPA's server is handed its decision logger."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.profiles.repository import (
    get_action,
    get_config,
    get_profile,
    get_project,
    require_profile,
)

__all__ = ["ProfileService", "Shadows", "get_action", "get_config", "get_profile",
           "get_project", "require_profile"]


class Shadows(Protocol):
    async def projects_shadowing(self, session: AsyncSession, profile: str) -> list[str]:
        """The projects whose shadow profile is `profile` (at most 100, sorted)."""

    async def profile_changed(self, session: AsyncSession, profile: str) -> None:
        """Called in the transaction that changed `profile`."""


class ProfileService:
    """One per process (`app.state.profiles`)."""

    def __init__(self, *, shadows: Shadows | None = None) -> None:
        self.shadows = shadows

    async def shadowing(self, session: AsyncSession, profile: str) -> list[str]:
        if self.shadows is None:
            return []
        return await self.shadows.projects_shadowing(session, profile)

    async def changed(self, session: AsyncSession, profile: str) -> None:
        if self.shadows is not None:
            await self.shadows.profile_changed(session, profile)
