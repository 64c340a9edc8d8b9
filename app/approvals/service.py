"""Approvals held by the service (SPEC §10): what check 6 asks of them, and what people do
with them. Every state change is a conditional UPDATE (so two replicas never both use the
last use of a grant, decide one request twice, or expire it twice) made in the same
transaction as its record of kind `approval` in the hash chain."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from uuid_utils import uuid7

from app.approvals.tables import PENDING, Approval
from app.kit.caller import Caller
from app.log.audit import record_in_transaction
from app.log.records import iso
from app.store.base import utcnow
from app.store.engine import WRITE_OPTION, lock_key

log = logging.getLogger("toolgate.approvals")

CHANNEL = "toolgate_approvals"  # NOTIFY payload: the approval id whose state changed
LIVE_STATES = ("pending", "granted")
# The event a record of kind approval stands for, as webhooks name it (a use has none).
EVENTS = {"requested": "approval.pending", "granted": "approval.granted",
          "rejected": "approval.rejected", "cancelled": "approval.cancelled",
          "expired": "approval.expired"}
SYSTEM = Caller()  # expiry: noticed by a replica, not asked for by a key


def state_of(row: Approval, now: datetime) -> str:
    """The state a reader sees: a live approval past its expiry is expired, whether or not
    a replica has written its expiry record yet."""
    if row.state in LIVE_STATES and row.expires_at <= now:
        return "expired"
    return row.state


def approval_out(row: Approval, now: datetime | None = None) -> dict[str, Any]:
    now = now or utcnow()
    return {
        "approval_id": row.approval_id, "state": state_of(row, now),
        "project": row.project, "plan_id": row.plan_id, "action_id": row.action_id,
        "tool": row.tool, "request": row.request, "request_sha256": row.request_sha256,
        "args_sha256": row.args_sha256, "requested_by": row.requested_by,
        "requested_at": iso(row.requested_at), "decided_by": row.decided_by,
        "decided_at": iso(row.decided_at) if row.decided_at else None,
        "note": row.note, "reason": row.reason, "expires_at": iso(row.expires_at),
        "uses_left": row.uses_left, "decision_ids": list(row.decision_ids or []),
    }


def deny_details(row: Approval, now: datetime) -> dict[str, Any]:
    """What a deny's `details.approval` says about the approval it waits on."""
    details = {"approval_id": row.approval_id, "state": state_of(row, now),
               "expires_at": iso(row.expires_at)}
    if row.reason:
        details["reason"] = row.reason
    return details


async def _record(session: AsyncSession, caller: Caller, row: Approval, event: str,
                  **extra: Any) -> None:
    await record_in_transaction(
        session, caller, "approval", project=row.project, plan_id=row.plan_id,
        action_id=row.action_id, tool=row.tool,
        detail={"event": event, "approval": approval_out(row), **extra},
    )


async def _notify(session: AsyncSession, approval_id: str) -> None:
    """Tell the other replicas' waiters (GET ?wait) at commit; SQLite has no NOTIFY (its
    waiters poll)."""
    if session.bind.dialect.name == "postgresql":
        await session.execute(text("SELECT pg_notify(:channel, :id)"),
                              {"channel": CHANNEL, "id": approval_id})


class ApprovalService:
    """One per process (main.py puts it on app.state.approvals)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], *,
                 pending_ttl_seconds: int = 3600, max_pending_per_plan: int = 20,
                 max_pending_per_project: int = 200, notified: bool = False) -> None:
        self.sessions = sessions
        self.pending_ttl = timedelta(seconds=pending_ttl_seconds)
        self.max_pending = max_pending_per_plan
        self.max_pending_project = max_pending_per_project
        # Whether another replica's change reaches this process by NOTIFY (Postgres); if
        # not, waiters poll.
        self.notified = notified
        self._waiters: dict[str, set[asyncio.Event]] = {}

    # --- check 6 ---------------------------------------------------------------------

    async def usable_grants(self, plan_id: str, request_sha256: str) -> list[str]:
        """Granted, unexpired approvals with uses left for this binding, the
        soonest-expiring first (a read: nothing is locked)."""
        now = utcnow()
        async with self.sessions() as session:
            return list((await session.execute(
                select(Approval.approval_id)
                .where(Approval.plan_id == plan_id, Approval.request_sha256 == request_sha256,
                       Approval.state == "granted", Approval.uses_left > 0,
                       Approval.expires_at > now)
                .order_by(Approval.expires_at, Approval.approval_id)
            )).scalars())

    async def use(self, approval_ids: list[str], *, decision_id: str,
                  caller: Caller) -> Approval | None:
        """Take one use of the first of these grants that still has one: a conditional
        update, so of N concurrent calls on a one-use grant exactly one gets it (on any
        replica). None when every one was used up, expired or withdrawn meanwhile."""
        now = utcnow()
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            for approval_id in approval_ids:
                taken = await session.execute(
                    update(Approval)
                    .where(Approval.approval_id == approval_id, Approval.state == "granted",
                           Approval.uses_left > 0, Approval.expires_at > now)
                    .values(uses_left=Approval.uses_left - 1,
                            state=case((Approval.uses_left == 1, "used"), else_="granted"))
                )
                if taken.rowcount != 1:
                    continue
                row = await session.get(Approval, approval_id, populate_existing=True)
                assert row is not None
                row.decision_ids = [*(row.decision_ids or []), decision_id]
                await session.flush()
                await _record(session, caller, row, "used", decision_id=decision_id)
                if row.state == "used":
                    await _notify(session, approval_id)
                return row
        return None

    async def pending_for(self, *, project: str | None, plan_id: str, action_id: str | None,
                          tool: str, request: dict[str, Any], request_sha256: str,
                          args_sha256: str | None, caller: Caller,
                          principal_name: str) -> dict[str, Any]:
        """`details.approval` for a call check 6 denied: the binding's rejection (it stays
        rejected for the plan's life), or its pending approval, created once (repeated or
        concurrent calls on any replica find the same one), or too_many_pending."""
        now = utcnow()
        async with self.sessions() as session:
            found = await self._standing(session, plan_id, request_sha256)
        if found is not None and (found.state == "rejected" or found.expires_at > now):
            return deny_details(found, now)
        created: Approval | None = None
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            await lock_key(session, f"approvals:{plan_id}")  # exact count per plan
            now = utcnow()
            found = await self._standing(session, plan_id, request_sha256)
            if found is not None and found.state == "pending" and found.expires_at <= now:
                await self._expire(session, found, now)
                found = None
            if found is not None:
                return deny_details(found, now)
            pending = (await session.execute(
                select(func.count()).select_from(Approval)
                .where(Approval.plan_id == plan_id, Approval.state == "pending",
                       Approval.expires_at > now))).scalar_one()
            if pending >= self.max_pending:
                return {"state": "too_many_pending", "max_pending": self.max_pending}
            if project is not None:  # new plans must not multiply the per-plan cap
                await lock_key(session, f"approvals-project:{project}")
                in_project = (await session.execute(
                    select(func.count()).select_from(Approval)
                    .where(Approval.project == project, Approval.state == "pending",
                           Approval.expires_at > now))).scalar_one()
                if in_project >= self.max_pending_project:
                    return {"state": "too_many_pending", "scope": "project",
                            "max_pending": self.max_pending_project}
            values = {
                "approval_id": str(uuid7()), "state": "pending", "project": project,
                "plan_id": plan_id, "action_id": action_id, "tool": tool, "request": request,
                "request_sha256": request_sha256, "args_sha256": args_sha256,
                "requested_by": caller.key_id, "requested_principal": principal_name,
                "requested_at": now, "expires_at": now + self.pending_ttl, "uses_left": 0,
                "decision_ids": [],
            }
            dialect = session.bind.dialect.name
            insert = pg_insert if dialect == "postgresql" else sqlite_insert
            inserted = await session.execute(
                insert(Approval).values(**values).on_conflict_do_nothing(
                    index_elements=["plan_id", "request_sha256"], index_where=PENDING))
            if inserted.rowcount == 1:
                created = await session.get(Approval, values["approval_id"])
                assert created is not None
                await _record(session, caller, created, "requested")
            else:  # another call created it first
                created = await self._standing(session, plan_id, request_sha256)
                if created is None:  # decided in between: ask again next call
                    return {"state": "pending"}
            return deny_details(created, now)

    @staticmethod
    async def _standing(session: AsyncSession, plan_id: str,
                        request_sha256: str) -> Approval | None:
        """The binding's rejection if it has one, else its pending approval (or None)."""
        rows = (await session.execute(
            select(Approval).where(Approval.plan_id == plan_id,
                                   Approval.request_sha256 == request_sha256,
                                   Approval.state.in_(("rejected", "pending")))
            .order_by(Approval.state.desc(), Approval.approval_id.desc()).limit(1)
            .execution_options(populate_existing=True)
        )).scalars().first()
        return rows

    # --- people -----------------------------------------------------------------------

    async def get(self, session: AsyncSession, approval_id: str) -> Approval | None:
        return await session.get(Approval, approval_id, populate_existing=True)

    async def decide(self, session: AsyncSession, row: Approval, *, to: str, caller: Caller,
                     note: str | None = None, reason: str | None = None,
                     ttl_seconds: int = 900, uses: int = 1) -> bool:
        """Grant, reject or cancel (`to`), if the approval is still in a state that allows
        it; False when it was decided (or expired) first. The caller checked who may."""
        now = utcnow()
        allowed_from = ("pending", "granted") if to == "cancelled" else ("pending",)
        values: dict[str, Any] = {"state": to, "decided_by": caller.key_id,
                                   "decided_at": now}
        if to == "granted":
            values.update(note=note, expires_at=now + timedelta(seconds=ttl_seconds),
                          uses_left=uses)
        else:
            values.update(reason=reason, uses_left=0)
            if note is not None:
                values["note"] = note
        changed = await session.execute(
            update(Approval).where(Approval.approval_id == row.approval_id,
                                   Approval.state.in_(allowed_from),
                                   Approval.expires_at > now).values(**values))
        if changed.rowcount != 1:
            return False
        await session.refresh(row)
        await _record(session, caller, row, to)
        await _notify(session, row.approval_id)
        return True

    # --- expiry -----------------------------------------------------------------------

    async def _expire(self, session: AsyncSession, row: Approval, now: datetime) -> bool:
        changed = await session.execute(
            update(Approval).where(Approval.approval_id == row.approval_id,
                                   Approval.state.in_(LIVE_STATES),
                                   Approval.expires_at <= now)
            .values(state="expired", uses_left=0))
        if changed.rowcount != 1:
            return False  # another replica noticed first, or it was decided
        await session.refresh(row)
        await _record(session, SYSTEM, row, "expired")
        await _notify(session, row.approval_id)
        return True

    async def sweep(self, *, limit: int = 100) -> int:
        """Expire live approvals past their time: one record each, whichever replica
        notices first. Returns how many this call expired."""
        now = utcnow()
        async with self.sessions() as session:
            due = list((await session.execute(
                select(Approval.approval_id)
                .where(Approval.state.in_(LIVE_STATES), Approval.expires_at <= now)
                .order_by(Approval.expires_at).limit(limit))).scalars())
        if not due:
            return 0
        expired = 0
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            for approval_id in due:
                row = await session.get(Approval, approval_id, populate_existing=True)
                if row is not None and await self._expire(session, row, now):
                    expired += 1
        for approval_id in due:
            self.wake(approval_id)
        return expired

    async def pending_count(self) -> int:
        """Approvals waiting for a person now (GET /metrics' toolgate_approvals_pending)."""
        async with self.sessions() as session:
            return int(await session.scalar(
                select(func.count()).select_from(Approval)
                .where(Approval.state == "pending", Approval.expires_at > utcnow())) or 0)

    @staticmethod
    async def pending_summary(session: AsyncSession, *, projects: list[str] | None,
                              project: str | None = None) -> tuple[int, datetime | None]:
        """How many approvals wait for a person now, and since when the oldest has (the
        operators' page's overview), within `projects` (None: every project)."""
        query = select(func.count(), func.min(Approval.requested_at)).where(
            Approval.state == "pending", Approval.expires_at > utcnow())
        if projects is not None:
            query = query.where(Approval.project.in_(projects))
        if project is not None:
            query = query.where(Approval.project == project)
        count, oldest = (await session.execute(query)).one()
        return int(count or 0), oldest

    # --- waiting (GET /v1/approvals/{id}?wait=S) ----------------------------------------

    def wake(self, approval_id: str | None) -> None:
        """A state may have changed (None: any of them, e.g. after a NOTIFY reconnect)."""
        targets = (self._waiters.get(approval_id, ()) if approval_id is not None
                   else [e for events in self._waiters.values() for e in events])
        for event in list(targets):
            event.set()

    async def wait(self, approval_id: str, seconds: float,
                   until: datetime | None = None) -> None:
        """Return when this approval may have changed, after `seconds`, or at `until` (a
        pending approval's expiry), whichever comes first. Holds no database connection.
        Without NOTIFY (SQLite, whose other workers' changes this process cannot hear) it
        returns every quarter second so the caller reads again."""
        if until is not None:
            seconds = min(seconds, max(0.0, (until - utcnow()).total_seconds()) + 0.01)
        if not self.notified:
            seconds = min(seconds, 0.25)
        event = asyncio.Event()
        self._waiters.setdefault(approval_id, set()).add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=seconds)
        finally:
            events = self._waiters.get(approval_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiters[approval_id]
