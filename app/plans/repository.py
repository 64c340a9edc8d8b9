"""Queries of plans. Functions never commit; the session dependency does."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.plans.tables import Plan
from app.store.base import utcnow
from app.store.engine import get_locked

# --- plans ------------------------------------------------------------------------------


async def get_plan(session: AsyncSession, plan_id: str) -> Plan | None:
    return await session.get(Plan, plan_id)


async def lock_plan(session: AsyncSession, plan_id: str) -> Plan | None:
    """The plan as it is now, locked until the transaction ends (a state transition starts
    from it, and audits its state as `before`)."""
    return await get_locked(session, Plan, plan_id)


async def insert_plan(session: AsyncSession, plan: Plan) -> None:
    session.add(plan)
    await session.flush()


async def list_plans(
    session: AsyncSession,
    *,
    action_id: str | None,
    project: str | None,
    before: tuple[datetime, str] | None,
    limit: int,
    projects: list[str] | None = None,
) -> list[Plan]:
    """`projects`: None = every project, else only plans of these (a key's scope)."""
    query = select(Plan).order_by(Plan.created_at.desc(), Plan.plan_id.desc()).limit(limit)
    if action_id is not None:
        query = query.where(Plan.action_id == action_id)
    if project is not None:
        query = query.where(Plan.project == project)
    if projects is not None:
        query = query.where(Plan.project.in_(projects))
    if before is not None:
        created_at, plan_id = before
        query = query.where(
            (Plan.created_at < created_at)
            | ((Plan.created_at == created_at) & (Plan.plan_id < plan_id))
        )
    return list((await session.scalars(query)).all())


async def set_plan_state(session: AsyncSession, plan: Plan, state: str) -> None:
    plan.state, plan.updated_at = state, utcnow()
    await session.flush()
