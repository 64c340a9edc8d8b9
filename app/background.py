"""Each process's periodic work, wired like main.py: every feature's jobs (its tasks.py)
run by one small scheduler (app/kit/scheduler.py), each job on its own, so one failing
(a sweep on a database that refuses it) stops no other (webhook delivery). Every job is
safe to run on every replica at once (conditional updates, leases)."""

from __future__ import annotations

from typing import Any

from app.approvals import tasks as approval_tasks
from app.approvals.service import ApprovalService
from app.config import Settings
from app.kit.scheduler import Scheduler
from app.ledger import tasks as ledger_tasks
from app.ledger.service import Ledger
from app.webhooks import tasks as webhook_tasks
from app.webhooks.service import Webhooks


class Background:
    def __init__(self, settings: Settings, sessions: Any, *,
                 approvals: ApprovalService, ledger: Ledger | None = None) -> None:
        self.approvals = approvals
        self.ledger = ledger
        self.webhooks = Webhooks.from_settings(sessions, settings)
        # Each job as often as the one round ran before them (TOOLGATE_WEBHOOK_POLL_SECONDS).
        interval = settings.webhook_poll_seconds
        jobs = approval_tasks.jobs(approvals, interval=interval)
        if ledger is not None:
            jobs += ledger_tasks.jobs(ledger, interval=interval)
        jobs += webhook_tasks.jobs(self.webhooks, interval=interval)
        self.scheduler = Scheduler(jobs)

    @property
    def jobs(self) -> dict[str, Any]:
        return {job.name: job for job in self.scheduler.jobs}

    def start(self) -> None:
        self.scheduler.start()

    async def run_once(self) -> None:
        """Every job once, each whatever the others did."""
        await self.scheduler.run_once()

    async def close(self) -> None:
        await self.scheduler.close()
        await self.webhooks.close()
