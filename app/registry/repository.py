"""Registry repositories: tools, skills, project registry settings, the registry version.

Functions never commit; the caller's session dependency does. Every write first takes the
registry lock (an UPDATE of the single `registry_state` row): it serialises registry writers
on Postgres (row lock) and SQLite (write lock), so two racing PUTs of a new name cannot
both insert. A change to tools or project settings bumps `registry_state.version` in the
same transaction, which is how every replica's RegistryCache learns of it.

A change starts from `lock_tool()` / `lock_skill()` / `lock_registry_settings()`: the
registry lock, then the row as it is under it, which the caller audits as `before` and
hands to the write. A row read before the lock may be stale by the time it is granted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.registry.tables import ProjectRegistrySettings, RegistryState, RegistryTool, Skill
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
    deny_unregistered_projects: list[str]


async def load_registry(session: AsyncSession) -> RegistrySnapshot:
    """The version first, then the rows: rows newer than the version only cause one more
    reload later, while the opposite order could pair old rows with a new version."""
    version = await get_registry_version(session)
    tools = list((await session.scalars(select(RegistryTool))).all())
    projects = await session.scalars(
        select(ProjectRegistrySettings.project)
        .where(ProjectRegistrySettings.deny_unregistered_tools.is_(True))
    )
    return RegistrySnapshot(version, tools, list(projects.all()))


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
) -> tuple[RegistryTool, bool, bool]:
    """Create or update `row` (what lock_tool returned); returns (tool, created, changed).
    An identical PUT changes nothing and leaves the registry version alone."""
    values: dict[str, Any] = {
        "writes": writes, "read_only": read_only, "checkpointable": checkpointable,
        "unsafe": unsafe, "safety_category": safety_category,
        "skill_category": skill_category, "path_args": path_args,
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


# --- per-project registry settings --------------------------------------------------------


async def get_registry_settings(
    session: AsyncSession, project: str
) -> ProjectRegistrySettings | None:
    return await session.get(ProjectRegistrySettings, project)


async def lock_registry_settings(session: AsyncSession,
                                 project: str) -> ProjectRegistrySettings | None:
    await lock_registry(session)
    return await get_locked(session, ProjectRegistrySettings, project)


async def put_registry_settings(
    session: AsyncSession, row: ProjectRegistrySettings | None, project: str, *,
    deny_unregistered_tools: bool,
) -> ProjectRegistrySettings:
    """Create or update `row` (what lock_registry_settings returned)."""
    if row is None:
        row = ProjectRegistrySettings(project=project,
                                      deny_unregistered_tools=deny_unregistered_tools,
                                      updated_at=utcnow())
        session.add(row)
    elif row.deny_unregistered_tools == deny_unregistered_tools:
        return row
    else:
        row.deny_unregistered_tools, row.updated_at = deny_unregistered_tools, utcnow()
    await bump_registry_version(session)
    await session.flush()
    return row
