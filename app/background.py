"""Each process's background round (wiring, like main.py): expire lapsed approvals, charge
lapsed cost holds, turn
new log records into webhook deliveries, send the due ones. Every step is safe to run on
every replica at once (conditional updates, leases); a failing round is logged and the
next one runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from app.approvals.service import ApprovalService
from app.config import Settings
from app.ledger.service import Ledger
from app.webhooks.service import Webhooks

log = logging.getLogger("toolgate.background")


class Background:
    def __init__(self, settings: Settings, sessions: Any, *,
                 approvals: ApprovalService, ledger: Ledger | None = None) -> None:
        self.approvals = approvals
        self.ledger = ledger
        self.webhooks = Webhooks(sessions, timeout=settings.webhook_timeout_seconds,
                                 max_attempts=settings.webhook_max_attempts)
        self.interval = settings.webhook_poll_seconds
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="toolgate-background")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.webhooks.close()

    async def run_once(self) -> None:
        """Each job in turn; one that fails does not keep the others from running (a damaged
        ledger row must not stop webhooks: issue 30). The first failure is raised after
        all have run, for _run to log."""
        failed: Exception | None = None
        for job in self._jobs():
            try:
                await job()
            except Exception as exc:  # noqa: BLE001 - logged by _run
                failed = failed or exc
        if failed is not None:
            raise failed

    def _jobs(self) -> list[Any]:
        jobs: list[Any] = [self.approvals.sweep]
        if self.ledger is not None:
            jobs.append(self.ledger.sweep)  # lapsed holds charged as spent (SPEC §11)
        jobs.append(self._webhooks)
        return jobs

    async def _webhooks(self) -> None:
        await self.webhooks.enqueue()
        while await self.webhooks.deliver_due():
            pass

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self.run_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as failed:
                failures += 1
                # Once, then every 100th: a database that is down must not flood the log.
                if failures == 1 or failures % 100 == 0:
                    log.warning("background round failed (%d in a row): %s", failures, failed)
            self.rounds += 1
            await asyncio.sleep(self.interval)
