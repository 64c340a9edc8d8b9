"""Queries of profiles, the global configuration, projects and actions. Functions never
commit; the session dependency does.

A change starts from `lock_<resource>()`: it serialises the resource's writers and returns
the row as it is under that lock, which the caller audits as `before` and hands to
`put_<resource>()`. A row read before the lock (unlocked) may already be stale when the lock
is granted, and must not be what a change is decided from."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.edge.errors import InvalidInput
from app.profiles.tables import Action, GlobalConfig, Profile, ProfileVersion, Project
from app.store.base import utcnow
from app.store.engine import get_locked, lock_key

# --- profiles ---------------------------------------------------------------------------


async def get_profile(session: AsyncSession, name: str) -> Profile | None:
    return await session.get(Profile, name)


async def list_profiles(session: AsyncSession) -> list[Profile]:
    return list((await session.scalars(select(Profile).order_by(Profile.name))).all())


async def require_profile(session: AsyncSession, name: str | None, field: str) -> None:
    """A named profile must exist: 422 `unknown_profile` naming `field` otherwise. It stays
    until the transaction ends: its lock is taken, so a concurrent delete (which takes it
    too, then looks for references) either finishes first (this is then a 422) or sees the
    reference this request makes (a 409 there)."""
    if name is not None and await lock_profile(session, name) is None:
        raise InvalidInput(
            f"profile '{name}' does not exist", code="unknown_profile",
            profile=name, fields=[{"field": field, "message": f"profile '{name}' does not exist",
                                   "type": "unknown_profile"}],
        )


async def list_profile_versions(session: AsyncSession, name: str) -> list[ProfileVersion]:
    rows = await session.scalars(
        select(ProfileVersion).where(ProfileVersion.name == name).order_by(ProfileVersion.version)
    )
    return list(rows.all())


async def lock_profile(session: AsyncSession, name: str) -> Profile | None:
    """The profile as it is now, its writers serialised until the transaction ends (a
    profile that does not exist yet has no row to lock FOR UPDATE: the key lock covers it)."""
    await lock_key(session, f"profile:{name}")
    return await get_locked(session, Profile, name)


async def put_profile(
    session: AsyncSession, profile: Profile | None, name: str, *, description: str,
    safety: dict[str, Any],
) -> tuple[Profile, bool, bool]:
    """Create or update `profile` (what lock_profile returned); returns (profile, created,
    changed). An identical PUT changes nothing and makes no version."""
    now = utcnow()
    if profile is not None and profile.description == description and profile.safety == safety:
        return profile, False, False
    # Versions continue after a delete and re-create, so (name, version) is never reused.
    last = await session.scalar(
        select(func.max(ProfileVersion.version)).where(ProfileVersion.name == name)
    )
    version = (last or 0) + 1
    session.add(ProfileVersion(
        name=name, version=version, description=description, safety=safety, created_at=now
    ))
    created = profile is None
    if created:
        profile = Profile(
            name=name, description=description, safety=safety, version=version,
            created_at=now, updated_at=now,
        )
        session.add(profile)
    else:
        profile.description, profile.safety = description, safety
        profile.version, profile.updated_at = version, now
    await session.flush()
    return profile, created, True


async def profile_references(session: AsyncSession, name: str) -> dict[str, Any]:
    """Who still names this profile (plans are not listed: they hold snapshots)."""
    config = await session.get(GlobalConfig, 1)
    projects = await session.scalars(
        select(Project.project).where(Project.automation_profile == name).limit(100)
    )
    actions = await session.scalars(
        select(Action.action_id).where(Action.automation_profile == name).limit(100)
    )
    refs: dict[str, Any] = {}
    if config is not None and config.automation_profile == name:
        refs["config"] = True
    if project_list := list(projects.all()):
        refs["projects"] = project_list
    if action_list := list(actions.all()):
        refs["actions"] = action_list
    return refs


async def delete_profile(session: AsyncSession, profile: Profile) -> None:
    await session.delete(profile)
    await session.flush()


# --- global config and projects ---------------------------------------------------------


async def get_config(session: AsyncSession) -> GlobalConfig | None:
    return await session.get(GlobalConfig, 1)


async def lock_config(session: AsyncSession) -> GlobalConfig | None:
    await lock_key(session, "config")
    return await get_locked(session, GlobalConfig, 1)


async def put_config(session: AsyncSession, config: GlobalConfig | None,
                     automation_profile: str | None) -> GlobalConfig:
    """Set the global automation profile; `config` is what lock_config returned."""
    if config is None:
        config = GlobalConfig(id=1, automation_profile=automation_profile, updated_at=utcnow())
        session.add(config)
    elif config.automation_profile != automation_profile:
        config.automation_profile, config.updated_at = automation_profile, utcnow()
    await session.flush()
    return config


async def get_project(session: AsyncSession, project: str) -> Project | None:
    return await session.get(Project, project)


async def lock_project(session: AsyncSession, project: str) -> Project | None:
    await lock_key(session, f"project:{project}")
    return await get_locked(session, Project, project)


async def put_project(
    session: AsyncSession, row: Project | None, project: str, automation_profile: str | None
) -> tuple[Project, bool]:
    """Create or update; `row` is what lock_project returned."""
    now = utcnow()
    if row is None:
        row = Project(project=project, automation_profile=automation_profile,
                      created_at=now, updated_at=now)
        session.add(row)
        await session.flush()
        return row, True
    if row.automation_profile != automation_profile:
        row.automation_profile, row.updated_at = automation_profile, now
    await session.flush()
    return row, False


async def list_projects(session: AsyncSession, *, projects: list[str] | None) -> list[Project]:
    query = select(Project).order_by(Project.project)
    if projects is not None:
        query = query.where(Project.project.in_(projects))
    return list((await session.scalars(query)).all())


# --- actions ----------------------------------------------------------------------------


async def list_actions(session: AsyncSession, *, projects: list[str] | None,
                       project: str | None = None) -> list[Action]:
    query = select(Action).order_by(Action.action_id)
    if projects is not None:
        query = query.where(Action.project.in_(projects))
    if project is not None:
        query = query.where(Action.project == project)
    return list((await session.scalars(query)).all())



async def get_action(session: AsyncSession, action_id: str) -> Action | None:
    return await session.get(Action, action_id)


async def lock_action(session: AsyncSession, action_id: str) -> Action | None:
    await lock_key(session, f"action:{action_id}")
    return await get_locked(session, Action, action_id)


async def put_action(
    session: AsyncSession,
    row: Action | None,
    action_id: str,
    *,
    project: str | None,
    read_only: bool,
    automation_profile: str | None,
    safety_profile: dict[str, Any] | None,
) -> tuple[Action, bool]:
    """Create or update; `row` is what lock_action returned."""
    now = utcnow()
    values = {
        "project": project, "read_only": read_only,
        "automation_profile": automation_profile, "safety_profile": safety_profile,
    }
    if row is None:
        row = Action(action_id=action_id, created_at=now, updated_at=now, **values)
        session.add(row)
        await session.flush()
        return row, True
    if any(getattr(row, k) != v for k, v in values.items()):
        for key, value in values.items():
            setattr(row, key, value)
        row.updated_at = now
    await session.flush()
    return row, False
