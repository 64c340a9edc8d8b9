"""The ledger (SPEC §11): what checks 7 and 8 know beyond what the agent submits, the holds
that make one budget across replicas, and outcome reports settling them.

A hold is a conditional UPDATE of the plan's ledger row (and, under max_total_cost, the
project's) in one transaction: `held = held + estimate WHERE spent + held < limit`. On
Postgres a concurrent UPDATE of the same row waits for the first to commit and then
re-evaluates its WHERE on the new row; SQLite serialises write transactions. So however
many calls race on however many replicas, each hold is granted only while spend and holds
are under the limit: they pass it by at most one call's estimate."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.edge.errors import Unavailable
from app.ledger.reader import PostgresKnown, SQLiteKnown
from app.ledger.tables import Hold, Outcome, PlanLedger, ProjectLedger, StepLedger, outcome_out
from app.store.base import utcnow
from app.store.engine import WRITE_OPTION

log = logging.getLogger("toolgate.ledger")
NO_PROJECT = ""  # the project ledger of plans in no project
ERROR_CLASSES = {"activation_failed": "ToolActivationError",
                 "execution_failed": "ToolExecutionError",
                 "deactivation_failed": "ToolDeactivationError"}


@dataclass(frozen=True, slots=True)
class Known:
    """What the ledger knows when a decision is made: plan spent + held, project spent +
    held, and the step's failed attempts (None without a step_id)."""

    plan: float = 0.0
    project: float = 0.0
    step_failures: int | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """An estimate to hold when a decision turns out allowed: taken just before the allow
    is final (for a call allowed by an approval, before its use is taken, so a refused hold
    never spends a use), released if the allow falls through after all."""

    ledger: Ledger
    plan_id: str
    project: str | None
    amount: float
    plan_limit: float | None
    total_limit: float | None

    async def take(self, decision_id: str) -> bool:
        return await self.ledger.hold(decision_id=decision_id, plan_id=self.plan_id,
                                      project=self.project, amount=self.amount,
                                      plan_limit=self.plan_limit,
                                      total_limit=self.total_limit)

    async def release(self, decision_id: str) -> None:
        await self.ledger.release(decision_id)


class _Refused(Exception):
    """A hold's conditional update matched no row: roll the transaction back."""


def _known(plan_id: str, project: str | None, plan: float | None, total: float | None,
           failures: int | None) -> Known:
    """Known from a read's totals (None: no row yet, nothing spent). A total that is not a
    finite number (a row damaged before costs were bounded, or written by hand) is refused:
    503, never read as 0 or as "no limit reached" (docs/ledger.md, "Bounds")."""
    for name, value in (("plan", plan), ("project", total)):
        if value is not None and not math.isfinite(value):
            raise ledger_invalid(name, plan_id if name == "plan" else project or NO_PROJECT)
    return Known(plan=plan or 0.0, project=total or 0.0, step_failures=failures)


def ledger_invalid(kind: str, name: str) -> Unavailable:
    return Unavailable(
        f"the {kind} ledger of '{name}' holds a total that is not a finite number; no "
        "metered decision is made on it until an operator repairs it (docs/ledger.md)",
        code="ledger_invalid", ledger=kind, name=name)


def needs_ledger(profile: Any, step_id: str | None) -> bool:
    """Whether checks 7/8 of this plan ask the ledger: a cost limit, or a step to count.
    Every other decision keeps the memory-only path."""
    return (profile.max_cost_per_plan is not None or profile.max_total_cost is not None
            or step_id is not None)


def _insert(session: AsyncSession) -> Any:
    return pg_insert if session.bind.dialect.name == "postgresql" else sqlite_insert


async def _ensure_rows(session: AsyncSession, plan_id: str, project: str | None) -> None:
    insert = _insert(session)
    await session.execute(insert(PlanLedger).values(
        plan_id=plan_id, project=project, spent=0.0, held=0.0).on_conflict_do_nothing())
    await session.execute(insert(ProjectLedger).values(
        project=project or NO_PROJECT, spent=0.0, held=0.0).on_conflict_do_nothing())


async def _add(session: AsyncSession, plan_id: str, project: str | None, *,
               spent: float = 0.0, held: float = 0.0) -> None:
    await _ensure_rows(session, plan_id, project)
    await session.execute(update(PlanLedger).where(PlanLedger.plan_id == plan_id).values(
        spent=PlanLedger.spent + spent, held=PlanLedger.held + held))
    await session.execute(update(ProjectLedger)
                          .where(ProjectLedger.project == (project or NO_PROJECT))
                          .values(spent=ProjectLedger.spent + spent,
                                  held=ProjectLedger.held + held))


# (session, plan_id) -> the plan (an object with `.project`) or None.
PlanLookup = Callable[[AsyncSession, str], Awaitable[Any]]


class Ledger:
    """One per process (main.py puts it on app.state.ledger)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], *,
                 hold_seconds: int = 3600, reader: SQLiteKnown | PostgresKnown | None = None,
                 plan_of: PlanLookup | None = None, book: Any = None) -> None:
        self.sessions = sessions
        # Outcome reports' own connection (app/ledger/book.py for_database); main.py
        # builds it, the routes and the hooks book through it.
        self.book = book
        # The ledger knows plans by id only; the route crediting a plan asks this for the
        # plan (its project): main.py wires app/plans/repository.py's get_plan, so the
        # ledger imports no feature that builds on it.
        self.plan_of = plan_of
        self.hold_for = timedelta(seconds=hold_seconds)
        self.reader = reader  # app/ledger/reader.py; None: read through the session

    async def close(self) -> None:
        if self.reader is not None:
            await self.reader.close()
        if self.book is not None:
            await self.book.close()

    # --- checks 7 and 8 ----------------------------------------------------------------

    def known_now(self, *, plan_id: str, project: str | None,
                  step_id: str | None) -> Known | None:
        """`known` without awaiting, where the reader can (SQLite); None elsewhere."""
        if not isinstance(self.reader, SQLiteKnown):
            return None
        plan, total, failures = self.reader.read_now(plan_id, project or NO_PROJECT, step_id)
        return _known(plan_id, project, plan, total,
                      None if step_id is None else failures or 0)

    async def known(self, *, plan_id: str, project: str | None,
                    step_id: str | None) -> Known:
        """The plan's and project's spent + held, and the step's failed attempts: what
        every replica committed before this read began."""
        if self.reader is not None:
            plan, total, failures = await self.reader.read(plan_id, project or NO_PROJECT,
                                                           step_id)
            return _known(plan_id, project, plan, total,
                          None if step_id is None else failures or 0)
        async with self.sessions() as session:
            # NULL sums read as infinity, as in reader.KNOWN_SQL: refused, never 0.
            plan = (await session.execute(
                select(func.coalesce(PlanLedger.spent + PlanLedger.held, math.inf))
                .where(PlanLedger.plan_id == plan_id))).scalar()
            total = (await session.execute(
                select(func.coalesce(ProjectLedger.spent + ProjectLedger.held, math.inf))
                .where(ProjectLedger.project == (project or NO_PROJECT)))).scalar()
            failures = None
            if step_id is not None:
                failures = (await session.execute(
                    select(StepLedger.failures).where(StepLedger.plan_id == plan_id,
                                                      StepLedger.step_id == step_id)
                )).scalar() or 0
        return _known(plan_id, project, plan, total, failures)

    async def hold(self, *, decision_id: str, plan_id: str, project: str | None,
                   amount: float, plan_limit: float | None,
                   total_limit: float | None) -> bool:
        """Hold `amount` for an allowed decision, before it is recorded. False (nothing
        held) when spend and holds reached a limit meanwhile: the caller decides again."""
        try:
            async with self.sessions() as session, session.begin():
                await session.connection(execution_options={WRITE_OPTION: True})
                await _ensure_rows(session, plan_id, project)
                query = update(PlanLedger).where(PlanLedger.plan_id == plan_id)
                if plan_limit is not None:
                    query = query.where(PlanLedger.spent + PlanLedger.held < plan_limit)
                if (await session.execute(query.values(held=PlanLedger.held + amount))
                        ).rowcount != 1:
                    raise _Refused
                query = update(ProjectLedger).where(
                    ProjectLedger.project == (project or NO_PROJECT))
                if total_limit is not None:
                    query = query.where(
                        ProjectLedger.spent + ProjectLedger.held < total_limit)
                if (await session.execute(query.values(held=ProjectLedger.held + amount))
                        ).rowcount != 1:
                    raise _Refused  # rolls the plan's hold back too
                session.add(Hold(decision_id=decision_id, plan_id=plan_id, project=project,
                                 amount=amount, state="held",
                                 expires_at=utcnow() + self.hold_for))
        except _Refused:
            return False
        return True

    async def release(self, decision_id: str) -> None:
        """Give back a hold taken for a decision that was then not allowed after all (its
        approval's use went to a concurrent call): as if it had never been held."""
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            hold = await session.get(Hold, decision_id, with_for_update=True,
                                     populate_existing=True)
            if hold is None or hold.state != "held":
                return
            await session.delete(hold)
            await _add(session, hold.plan_id, hold.project, held=-hold.amount)

    # --- outcomes ----------------------------------------------------------------------

    # --- lapsed holds ------------------------------------------------------------------

    async def sweep(self, *, limit: int = 100) -> int:
        """Charge holds unreported past their time as spent (spend + holds stay the same,
        so no decision changes). Conditional per hold: one charge whichever replica. Each
        hold in its own transaction: one that cannot be charged (its ledger row is damaged,
        docs/ledger.md "Bounds") is logged and put back a hold period, and the others, and
        every other background job, go on."""
        now = utcnow()
        async with self.sessions() as session:
            due = list((await session.execute(
                select(Hold.decision_id).where(Hold.state == "held", Hold.expires_at <= now)
                .order_by(Hold.expires_at).limit(limit))).scalars())
        charged = 0
        for decision_id in due:
            try:
                charged += await self._charge(decision_id)
            except Exception as failed:  # noqa: BLE001 - one row must not stop the rest
                log.warning("could not charge the lapsed hold of decision %s: %s",
                            decision_id, failed)
                async with self.sessions() as session, session.begin():
                    await session.connection(execution_options={WRITE_OPTION: True})
                    await session.execute(
                        update(Hold).where(Hold.decision_id == decision_id,
                                           Hold.state == "held")
                        .values(expires_at=utcnow() + self.hold_for))
        return charged

    async def _charge(self, decision_id: str) -> int:
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            changed = await session.execute(
                update(Hold).where(Hold.decision_id == decision_id, Hold.state == "held")
                .values(state="charged"))
            if changed.rowcount != 1:
                return 0
            hold = await session.get(Hold, decision_id, populate_existing=True)
            assert hold is not None
            await _add(session, hold.plan_id, hold.project, spent=hold.amount,
                       held=-hold.amount)
        return 1

    # --- credit --------------------------------------------------------------------------

    async def credit(self, session: AsyncSession, *, amount: float, plan_id: str | None,
                     project: str | None) -> None:
        """Lower spent: a plan's credit lowers its project's too (a project's totals are
        over its plans); a project's credit lowers only the project's."""
        if plan_id is not None:
            await _add(session, plan_id, project, spent=-amount)
            return
        await session.execute(_insert(session)(ProjectLedger).values(
            project=project or NO_PROJECT, spent=0.0, held=0.0).on_conflict_do_nothing())
        await session.execute(update(ProjectLedger)
                              .where(ProjectLedger.project == (project or NO_PROJECT))
                              .values(spent=ProjectLedger.spent - amount))


# --- reading ---------------------------------------------------------------------------

async def plan_ledger(session: AsyncSession, plan_id: str) -> dict[str, Any]:
    """`GET /v1/plans/{id}`'s "ledger"."""
    row = await session.get(PlanLedger, plan_id, populate_existing=True)
    steps = (await session.execute(
        select(StepLedger.step_id, StepLedger.failures)
        .where(StepLedger.plan_id == plan_id).order_by(StepLedger.step_id))).all()
    spent, held = _totals(row, "plan", plan_id)
    return {"spent": spent, "held": held,
            "steps": {step: {"failures": n} for step, n in steps}}


async def project_ledger(session: AsyncSession, project: str) -> dict[str, Any]:
    row = await session.get(ProjectLedger, project, populate_existing=True)
    spent, held = _totals(row, "project", project)
    return {"project": project, "spent": spent, "held": held}


def _totals(row: PlanLedger | ProjectLedger | None, kind: str, name: str
            ) -> tuple[float, float]:
    """(spent, held) as shown. Never null or infinite: a damaged row (docs/ledger.md
    "Bounds"), one whose sum a decision could not read either, is 503 as that decision is."""
    if row is None:
        return 0.0, 0.0
    spent, held = row.spent, row.held
    if spent is None or held is None or not math.isfinite(spent + held):
        raise ledger_invalid(kind, name)
    # Sums of floats leave residue (0.1 + 0.2 - 0.3); a ledger shows cents, not that.
    return round(spent, 9) + 0.0, round(held, 9) + 0.0


async def outcomes_of(session: AsyncSession, decision_ids: list[str], *,
                      projects: list[str] | None) -> dict[str, dict[str, Any]]:
    """The reported outcomes of these decisions (the operators' page's list), within
    `projects` (None: every project)."""
    query = select(Outcome).where(Outcome.decision_id.in_(decision_ids))
    if projects is not None:
        query = query.where(Outcome.project.in_(projects))
    return {row.decision_id: outcome_out(row) for row in (await session.scalars(query)).all()}
