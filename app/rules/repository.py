"""Queries of call rules. Functions never commit; the session dependency does.

A change starts from `lock_rule()`: the registry lock first (rules travel with the
registry's version, app/registry/service.py), then the row as it is under it, which the
caller audits as `before`. A deleted rule keeps its row with `deleted_at` set, so the id
continues its versions when it is created again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.registry import service as registry_service
from app.rules.tables import Rule
from app.store.base import utcnow
from app.store.engine import get_locked

LIVE = Rule.deleted_at.is_(None)


async def get_rule(session: AsyncSession, rule_id: str) -> Rule | None:
    row = await session.get(Rule, rule_id)
    return row if row is not None and row.deleted_at is None else None


async def lock_rule(session: AsyncSession, rule_id: str) -> Rule | None:
    """The rule's row (deleted or not) under the registry lock."""
    await registry_service.lock(session)
    return await get_locked(session, Rule, rule_id)


async def list_rules(session: AsyncSession, *, project: str | None = None,
                     projects: list[str] | None = None) -> list[Rule]:
    """Live rules by id. `project`: the rules its calls are evaluated under (global and
    its own); `projects` (not None): global rules and those of these projects only."""
    query = select(Rule).where(LIVE).order_by(Rule.rule_id)
    if project is not None:
        query = query.where((Rule.project.is_(None)) | (Rule.project == project))
    if projects is not None:
        query = query.where((Rule.project.is_(None)) | (Rule.project.in_(projects)))
    return list((await session.scalars(query)).all())


async def load_rules(session: AsyncSession) -> list[Rule]:
    """Every live rule, for the rule set decisions read (app/rules/service.py)."""
    return list((await session.scalars(select(Rule).where(LIVE).order_by(Rule.rule_id))).all())


async def count_rules(session: AsyncSession, project: str | None) -> int:
    scope = Rule.project.is_(None) if project is None else Rule.project == project
    return await session.scalar(select(func.count()).select_from(Rule).where(LIVE, scope)) or 0


async def put_rule(session: AsyncSession, row: Rule | None, rule_id: str, *,
                   body: dict[str, Any]) -> tuple[Rule, bool, bool]:
    """Create or update `row` (what lock_rule returned); returns (rule, created, changed).
    An identical PUT changes nothing and keeps the version."""
    now = utcnow()
    project = body.get("project")
    if row is None:
        row = Rule(rule_id=rule_id, project=project, body=body, version=1,
                   created_at=now, updated_at=now, deleted_at=None)
        session.add(row)
        await session.flush()
        return row, True, True
    if row.deleted_at is None and row.body == body:
        return row, False, False
    created = row.deleted_at is not None
    row.project, row.body, row.version, row.updated_at = project, body, row.version + 1, now
    if created:
        row.created_at, row.deleted_at = now, None
    await session.flush()
    return row, created, True


async def delete_rule(session: AsyncSession, row: Rule) -> None:
    """Delete `row` (what lock_rule returned; live): its id keeps its last version."""
    row.deleted_at = utcnow()
    await session.flush()
