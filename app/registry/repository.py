"""Registry repositories: tools, skills, project settings, the registry version.

Functions never commit; the caller's session dependency does. Every write first takes the
registry lock (an UPDATE of the single `registry_state` row): it serialises registry writers
on Postgres (row lock) and SQLite (write lock), so two racing PUTs of a new name cannot
both insert. A change to tools or project settings bumps `registry_state.version` in the
same transaction, which is how every replica's RegistryCache learns of it. Project settings
(SPEC §9: deny_unregistered_tools, approval_mode, shadow_profile) travel the same way.

A change starts from `lock_tool()` / `lock_skill()` (or, for project settings,
`put_project_settings`, which locks before it reads): the registry lock, then the row as
it is under it, which the caller audits as `before`. A row read before the lock may be
stale by the time it is granted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.registry.tables import ProjectSettings, RegistryState, RegistryTool, Skill
from app.store.base import utcnow
from app.store.engine import get_locked

# --- the registry version ---------------------------------------------------------------


async def _lock_registry(session: AsyncSession, *, bump: bool) -> None:
    step = RegistryState.version + 1 if bump else RegistryState.version
    result = await session.execute(
        update(RegistryState).where(RegistryState.id == 1).values(version=step)
    )
    if result.rowcount == 0:  # type: ignore[attr-defined]
        # The migration inserts the row; recreate it if someone deleted it by hand.
        session.add(RegistryState(id=1, version=1 if bump else 0))
        await session.flush()


async def lock_registry(session: AsyncSession) -> None:
    await _lock_registry(session, bump=False)


# LISTEN/NOTIFY channel (app/kit/notify.py): "the registry changed, check the version now".
REGISTRY_CHANNEL = "toolgate_registry"


async def bump_registry_version(session: AsyncSession) -> None:
    await _lock_registry(session, bump=True)
    if session.bind.dialect.name == "postgresql":
        # Delivered at commit, so other replicas drop their cached registry at once
        # instead of after registry_ttl_seconds.
        await session.execute(text("SELECT pg_notify(:channel, '')"),
                              {"channel": REGISTRY_CHANNEL})


async def get_registry_version(session: AsyncSession) -> int:
    version = await session.scalar(select(RegistryState.version).where(RegistryState.id == 1))
    return version or 0


@dataclass(frozen=True, slots=True)
class RegistrySnapshot:
    version: int
    tools: list[RegistryTool]
    projects: list[ProjectSettings]


async def load_registry(session: AsyncSession) -> RegistrySnapshot:
    """The version first, then the rows: rows newer than the version only cause one more
    reload later, while the opposite order could pair old rows with a new version."""
    version = await get_registry_version(session)
    tools = list((await session.scalars(select(RegistryTool))).all())
    projects = list((await session.scalars(select(ProjectSettings))).all())
    return RegistrySnapshot(version, tools, projects)


# --- tools ------------------------------------------------------------------------------


async def get_tool(session: AsyncSession, name: str) -> RegistryTool | None:
    return await session.get(RegistryTool, name)


async def list_tools(session: AsyncSession) -> list[RegistryTool]:
    return list((await session.scalars(select(RegistryTool).order_by(RegistryTool.name))).all())


async def lock_tool(session: AsyncSession, name: str) -> RegistryTool | None:
    await lock_registry(session)
    return await get_locked(session, RegistryTool, name)


async def put_tool(
    session: AsyncSession,
    row: RegistryTool | None,
    name: str,
    *,
    writes: bool,
    read_only: bool,
    checkpointable: bool,
    unsafe: bool,
    safety_category: str,
    skill_category: str | None,
    path_args: list[str],
    human_approval: str = "profile",
    shell_arg: str | None = None,
    url_args: list[str] | None = None,
) -> tuple[RegistryTool, bool, bool]:
    """Create or update `row` (what lock_tool returned); returns (tool, created, changed).
    An identical PUT changes nothing and leaves the registry version alone."""
    values: dict[str, Any] = {
        "writes": writes, "read_only": read_only, "checkpointable": checkpointable,
        "unsafe": unsafe, "safety_category": safety_category,
        "skill_category": skill_category, "path_args": path_args,
        "human_approval": human_approval,
        "shell_arg": shell_arg, "url_args": url_args or None,
    }
    now = utcnow()
    if row is None:
        row = RegistryTool(name=name, created_at=now, updated_at=now, **values)
        session.add(row)
        await bump_registry_version(session)
        await session.flush()
        return row, True, True
    if all(getattr(row, k) == v for k, v in values.items()):
        return row, False, False
    for key, value in values.items():
        setattr(row, key, value)
    row.updated_at = now
    await bump_registry_version(session)
    await session.flush()
    return row, False, True


async def delete_tool(session: AsyncSession, row: RegistryTool) -> None:
    """Delete `row` (what lock_tool returned)."""
    await session.delete(row)
    await bump_registry_version(session)
    await session.flush()


# --- skills -----------------------------------------------------------------------------


async def get_skill(session: AsyncSession, name: str) -> Skill | None:
    return await session.get(Skill, name)


async def list_skills(session: AsyncSession) -> list[Skill]:
    return list((await session.scalars(select(Skill).order_by(Skill.name))).all())


async def lock_skill(session: AsyncSession, name: str) -> Skill | None:
    await lock_registry(session)
    return await get_locked(session, Skill, name)


async def put_skill(
    session: AsyncSession, row: Skill | None, name: str, *, category: str | None,
    unsafe_phrases: list[str],
) -> tuple[Skill, bool]:
    """Create or update `row` (what lock_skill returned); returns (skill, created). Skills
    are not part of the authorize hot path (screening reads them per request), so they do
    not bump the registry version."""
    now = utcnow()
    if row is None:
        row = Skill(name=name, category=category, unsafe_phrases=unsafe_phrases,
                    created_at=now, updated_at=now)
        session.add(row)
        await session.flush()
        return row, True
    if row.category != category or row.unsafe_phrases != unsafe_phrases:
        row.category, row.unsafe_phrases, row.updated_at = category, unsafe_phrases, now
        await session.flush()
    return row, False


async def delete_skill(session: AsyncSession, row: Skill) -> None:
    """Delete `row` (what lock_skill returned)."""
    await session.delete(row)
    await session.flush()


# --- per-project settings (SPEC §9) --------------------------------------------------------

# What a project without a row has.
DEFAULT_SETTINGS: dict[str, Any] = {"deny_unregistered_tools": False,
                                    "approval_mode": "client_flag", "shadow_profile": None}
SETTINGS_FIELDS = tuple(DEFAULT_SETTINGS)


def settings_of(row: ProjectSettings | None) -> dict[str, Any]:
    """The settings' values (the defaults for a project without a row)."""
    if row is None:
        return dict(DEFAULT_SETTINGS)
    return {field: getattr(row, field) for field in SETTINGS_FIELDS}


async def get_project_settings(session: AsyncSession, project: str) -> ProjectSettings | None:
    return await session.get(ProjectSettings, project)


async def list_project_settings(session: AsyncSession, *,
                                projects: list[str] | None) -> list[ProjectSettings]:
    """Projects with stored settings, by name; `projects` (not None) limits them."""
    query = select(ProjectSettings).order_by(ProjectSettings.project)
    if projects is not None:
        query = query.where(ProjectSettings.project.in_(projects))
    return list((await session.scalars(query)).all())


async def projects_shadowing(session: AsyncSession, profile: str) -> list[str]:
    """Projects whose shadow_profile names `profile` (for the profile's deletion)."""
    rows = await session.scalars(
        select(ProjectSettings.project).where(ProjectSettings.shadow_profile == profile)
        .order_by(ProjectSettings.project).limit(100))
    return list(rows.all())


async def put_project_settings(
    session: AsyncSession, project: str, values: dict[str, Any]
) -> tuple[ProjectSettings, dict[str, Any] | None]:
    """Set the given settings (the others keep their stored or default values); returns
    (row, the values before, None when the row did not exist). A PUT that changes nothing
    writes nothing; anything else bumps the registry version, so every replica's
    RegistryCache picks it up."""
    await lock_registry(session)
    row = await session.get(ProjectSettings, project, populate_existing=True)
    if row is None:
        row = ProjectSettings(project=project, updated_at=utcnow(),
                              **{**DEFAULT_SETTINGS, **values})
        session.add(row)
        before = None
    else:
        before = settings_of(row)
        if all(before[field] == value for field, value in values.items()):
            return row, before
        for field, value in values.items():
            setattr(row, field, value)
        row.updated_at = utcnow()
    await bump_registry_version(session)
    await session.flush()
    return row, before
