"""Resolution against stored configuration, plan use (resolve + lock), and the lock cache."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.edge.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.kit.singleflight import SharedReads
from app.plans import repository as plan_repo
from app.plans.tables import Plan
from app.policy.profiles import (
    Level,
    NamedProfile,
    ProfileRef,
    Provenance,
    Resolved,
    SafetyProfile,
    UnknownProfileError,
    first_looser_field,
    resolve,
)
from app.profiles import service as profile_service
from app.profiles.tables import Action
from app.store.base import utcnow
from app.store.engine import lock_key


@dataclass(frozen=True, slots=True)
class PlanLock:
    """What an authorize call needs from a plan; immutable once the plan exists."""

    plan_id: str
    action_id: str
    project: str | None
    read_only: bool
    safety: SafetyProfile
    summary: dict[str, Any]

    @classmethod
    def from_row(cls, row: Plan) -> PlanLock:
        return cls(
            plan_id=row.plan_id,
            action_id=row.action_id,
            project=row.project,
            read_only=row.read_only,
            safety=SafetyProfile.model_validate(row.safety),
            summary={
                "provenance": row.provenance,
                "name": row.profile_name,
                "version": row.profile_version,
                "is_default": row.is_default,
            },
        )


class PlanCache:
    """Bounded map plan_id -> PlanLock. Locks never change, so no invalidation is needed;
    the oldest insertion is evicted when full."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._locks: dict[str, PlanLock] = {}
        self._reads: SharedReads[PlanLock] = SharedReads()

    def get(self, plan_id: str) -> PlanLock | None:
        return self._locks.get(plan_id)

    def put(self, lock: PlanLock) -> None:
        if self.capacity <= 0:
            return
        if len(self._locks) >= self.capacity and lock.plan_id not in self._locks:
            del self._locks[next(iter(self._locks))]
        self._locks[lock.plan_id] = lock

    def __len__(self) -> int:
        return len(self._locks)

    async def fetch(self, sessions: async_sessionmaker[AsyncSession], plan_id: str) -> PlanLock:
        """The plan's lock, from memory or read once for every request that wants it at the
        same time (a worker that has just started, under load: 64 requests for one plan made
        64 identical reads). A plan that is not there is not shared: each caller that gets
        NotFound reads again for itself, so a plan created during someone else's read is
        found by whoever asked after its creation."""
        lock = self._locks.get(plan_id)
        if lock is not None:
            return lock
        try:
            return await self._reads.get(plan_id, lambda: _read_lock(sessions, self, plan_id))
        except NotFound:
            return await _read_lock(sessions, self, plan_id)


async def _read_lock(sessions: async_sessionmaker[AsyncSession], cache: PlanCache,
                     plan_id: str) -> PlanLock:
    async with sessions() as session:
        return await load_lock(session, cache, plan_id)


async def load_lock(session: AsyncSession, cache: PlanCache, plan_id: str) -> PlanLock:
    lock = cache.get(plan_id)
    if lock is None:
        row = await plan_repo.get_plan(session, plan_id)
        if row is None:
            raise NotFound(f"plan '{plan_id}' does not exist", plan_id=plan_id)
        lock = PlanLock.from_row(row)
        cache.put(lock)
    return lock


def plan_level(automation_profile: str | None, safety_profile: SafetyProfile | None) -> Level:
    if automation_profile is not None:
        return ProfileRef(automation_profile)
    return safety_profile


def _action_level(action: Action | None) -> Level:
    if action is None:
        return None
    if action.automation_profile is not None:
        return ProfileRef(action.automation_profile)
    if action.safety_profile is not None:
        return SafetyProfile.model_validate(action.safety_profile)
    return None


async def resolve_stored(
    session: AsyncSession,
    *,
    plan: Level,
    action: Action | None,
    project: str | None,
) -> Resolved:
    """Resolve plan > action > project > global against the stored configuration."""
    project_row = await profile_service.get_project(session, project) if project else None
    config = await profile_service.get_config(session)
    levels = {
        "plan": plan,
        "action": _action_level(action),
        "project": ProfileRef(project_row.automation_profile)
        if project_row and project_row.automation_profile else None,
        "global_": ProfileRef(config.automation_profile)
        if config and config.automation_profile else None,
    }
    # Only the winning level's name is ever looked up; fetch it before the pure resolve().
    winner = next((held for held in levels.values() if held is not None), None)
    named: dict[str, NamedProfile] = {}
    if isinstance(winner, ProfileRef):
        row = await profile_service.get_profile(session, winner.name)
        if row is not None:
            named[row.name] = NamedProfile(
                row.name, row.version, SafetyProfile.model_validate(row.safety)
            )
    try:
        return resolve(**levels, lookup=named.get)
    except UnknownProfileError as missing:
        raise InvalidInput(
            f"profile '{missing.name}' (named at the {missing.level.value} level) does not exist",
            code="unknown_profile", profile=missing.name, level=missing.level.value,
        ) from None


async def get_action_or_404(session: AsyncSession, action_id: str) -> Action:
    action = await profile_service.get_action(session, action_id)
    if action is None:
        raise NotFound(f"action '{action_id}' does not exist", action_id=action_id)
    return action


async def use_plan(
    session: AsyncSession,
    *,
    plan_id: str,
    action_id: str,
    automation_profile: str | None,
    safety_profile: SafetyProfile | None,
    generated_id: bool,
    tighten_only: bool = False,
) -> tuple[Plan, bool]:
    """Resolve and lock a plan. Returns (plan, created); a repeat of the same request is
    idempotent, a different request for an existing plan_id is a conflict. With
    `tighten_only` (a non-admin key), a plan-level profile must be no looser than what the
    action resolves to without it."""
    request = {
        "action_id": action_id,
        "automation_profile": automation_profile,
        "safety_profile": safety_profile.as_dict() if safety_profile is not None else None,
    }
    if not generated_id:
        await lock_key(session, f"plan:{plan_id}")
    existing = None if generated_id else await plan_repo.get_plan(session, plan_id)
    if existing is not None:
        return _same_or_conflict(existing, request), False
    action = await get_action_or_404(session, action_id)
    resolved = await resolve_stored(
        session,
        plan=plan_level(automation_profile, safety_profile),
        action=action,
        project=action.project,
    )
    if tighten_only and resolved.provenance is Provenance.PLAN:
        await _refuse_loosening(session, resolved.safety, action)
    now = utcnow()
    plan = Plan(
        plan_id=plan_id,
        action_id=action_id,
        project=action.project,
        read_only=action.read_only,
        safety=resolved.safety.as_dict(),
        provenance=resolved.provenance.value,
        profile_name=resolved.name,
        profile_version=resolved.version,
        is_default=resolved.is_default,
        request=request,
        state="created",
        created_at=now,
        updated_at=now,
    )
    try:
        async with session.begin_nested():
            await plan_repo.insert_plan(session, plan)
    except IntegrityError:
        # Another request created the same plan_id between our read and our insert (the
        # savepoint's rollback already took `plan` out of the session).
        existing = await plan_repo.get_plan(session, plan_id)
        if existing is None:
            raise
        return _same_or_conflict(existing, request), False
    return plan, True


async def _refuse_loosening(session: AsyncSession, chosen: SafetyProfile,
                            action: Action) -> None:
    """403 profile_loosening_forbidden naming the first field in which the plan's own
    profile is looser than the action's: an agent can tighten, never loosen (SPEC §17)."""
    baseline = await resolve_stored(session, plan=None, action=action,
                                    project=action.project)
    field = first_looser_field(chosen, baseline.safety)
    if field is not None:
        raise Forbidden(
            f"the plan's profile is looser than action '{action.action_id}''s in '{field}' "
            f"({getattr(chosen, field)!r} where it resolves to "
            f"{getattr(baseline.safety, field)!r}): a non-admin key may only tighten it",
            code="profile_loosening_forbidden", field=field,
            requested=getattr(chosen, field), resolved=getattr(baseline.safety, field),
            resolved_provenance=baseline.provenance.value, resolved_name=baseline.name)


def _same_or_conflict(existing: Plan, request: dict[str, Any]) -> Plan:
    if existing.request != request:
        raise Conflict(
            f"plan '{existing.plan_id}' already exists with a different request",
            code="plan_conflict", plan_id=existing.plan_id, existing=existing.request,
        )
    return existing


def plan_out(plan: Plan) -> dict[str, Any]:
    return {
        "plan_id": plan.plan_id,
        "action_id": plan.action_id,
        "project": plan.project,
        "read_only": plan.read_only,
        "safety_profile": plan.safety,
        "provenance": plan.provenance,
        "name": plan.profile_name,
        "version": plan.profile_version,
        "is_default": plan.is_default,
        "state": plan.state,
        "created_at": _iso(plan.created_at),
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
