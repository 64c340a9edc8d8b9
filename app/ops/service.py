"""Each worker's metrics upkeep (wiring, like app/background.py): the tally of what the
hot path counted is moved into the metrics about once a second, and before a scrape."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from app.kit import metrics
from app.kit.metrics import Tally
from app.policy.denies import DENY_CODES

log = logging.getLogger("toolgate.metrics")
FLUSH_SECONDS = 1.0


class Metrics:
    """The tally this worker's ways of serving add to, and its flush. `decision_log` and
    `approvals` are read for the gauges (None: not there)."""

    def __init__(self, *, max_tools: int, max_projects: int, decision_log: Any = None,
                 approvals: Any = None, db_timeout: float = 5.0) -> None:
        self.tally = Tally(max_tools=max_tools, max_projects=max_projects,
                           codes=frozenset(DENY_CODES))
        self.decision_log = decision_log
        self.approvals = approvals
        self.db_timeout = db_timeout
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        for name in ("queue_depth", "approval_waits"):
            metrics.metric(name)  # made now: the scrape lists every metric at once
        self._task = asyncio.get_running_loop().create_task(self._run(),
                                                            name="toolgate-metrics")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.flush()
        metrics.process_exited()

    def flush(self) -> None:
        self.tally.flush()
        if self.decision_log is not None:
            metrics.metric("queue_depth").set(self.decision_log.queued())

    async def scrape(self) -> tuple[bytes, str]:
        """The exposition, with this worker's tally flushed and the pending approvals read
        (the others' tallies are at most FLUSH_SECONDS old)."""
        self.flush()
        if self.approvals is not None:
            try:
                pending = await asyncio.wait_for(self.approvals.pending_count(),
                                                 self.db_timeout)
                metrics.metric("approvals_pending").set(pending)
            except Exception as exc:  # the database is down: the rest is still worth reading
                log.warning("metrics: cannot count pending approvals: %s", exc)
        return metrics.exposition()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except Exception:  # never let the metrics stop the worker
                log.exception("metrics flush failed")
