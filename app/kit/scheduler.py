"""A small scheduler for each feature's periodic work (Polar's tasks.py and its worker, at
the scale of one process): every job is its own asyncio task on its own interval, so a
job that fails, or hangs on a database that does not answer, delays no other. Each job is
safe to run on every replica at once (its feature's business: conditional updates,
leases); a failure is logged once, then every 100th in a row, and the job runs again on
its next turn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("toolgate.background")


@dataclass
class Job:
    name: str
    run: Callable[[], Awaitable[object]]
    interval: float  # seconds between the end of one run and the start of the next
    runs: int = field(default=0, compare=False)  # finished runs (failed ones included)
    failures: int = field(default=0, compare=False)  # failed runs in a row

    async def once(self) -> None:
        """Run once; a failure is counted and logged, never raised."""
        try:
            await self.run()
            self.failures = 0
        except asyncio.CancelledError:
            raise
        except Exception as failed:
            self.failures += 1
            # Once, then every 100th: a database that is down must not flood the log.
            if self.failures == 1 or self.failures % 100 == 0:
                log.warning("background job %s failed (%d in a row): %s", self.name,
                            self.failures, failed)
        self.runs += 1


class Scheduler:
    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._loop(job), name=f"toolgate-{job.name}")
                           for job in self.jobs]

    async def run_once(self) -> None:
        """Every job once, in order, each whatever the others did (tests, `toolgate`)."""
        for job in self.jobs:
            await job.once()

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @staticmethod
    async def _loop(job: Job) -> None:
        while True:
            await job.once()
            await asyncio.sleep(job.interval)
