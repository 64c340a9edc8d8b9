"""Each feature's periodic work is its own job (app/kit/scheduler.py, app/background.py):
a job that fails, or hangs, stops no other."""

from __future__ import annotations

import asyncio
import time

from app.kit.scheduler import Job, Scheduler


async def _until(condition, seconds: float = 30.0) -> None:
    """Poll with a generous deadline: a loaded machine is slow, never wrong."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        await asyncio.sleep(0.01)


async def test_a_failing_job_and_a_hanging_one_stop_no_other():
    done = []

    async def fails():
        raise RuntimeError("the database refused it")

    async def hangs():
        await asyncio.Event().wait()

    async def works():
        done.append(1)

    failing, hanging = Job("fails", fails, 0.01), Job("hangs", hangs, 0.01)
    working = Job("works", works, 0.01)
    scheduler = Scheduler([failing, hanging, working])
    scheduler.start()
    try:
        await _until(lambda: len(done) >= 3 and failing.failures >= 3)
    finally:
        await scheduler.close()
    assert working.failures == 0 and hanging.runs == 0


async def test_run_once_runs_every_job_whatever_the_others_do(caplog):
    order = []

    async def fails():
        order.append("fails")
        raise RuntimeError("boom")

    async def works():
        order.append("works")

    failing = Job("fails", fails, 1)
    scheduler = Scheduler([failing, Job("works", works, 1)])
    await scheduler.run_once()
    await scheduler.run_once()
    assert order == ["fails", "works", "fails", "works"] and failing.failures == 2
    assert [r.getMessage() for r in caplog.records] == [  # logged once, not per failure
        "background job fails failed (1 in a row): boom"]


async def test_the_apps_jobs_are_each_features_own(client, monkeypatch):
    """A failing approvals sweep no longer skips the ledger's sweep or webhook delivery
    (they were one try-block, paced by the webhook setting)."""
    background = client.app.state.background
    await background.close()  # rounds only by hand
    jobs = background.jobs
    assert set(jobs) == {"approvals.sweep", "ledger.sweep", "webhooks.deliver"}
    swept, delivered = [], []

    async def refused():
        raise RuntimeError("approvals table locked")

    async def sweep():
        swept.append(1)

    async def enqueue():
        delivered.append(1)

    monkeypatch.setattr(jobs["approvals.sweep"], "run", refused)
    monkeypatch.setattr(client.app.state.ledger, "sweep", sweep)
    jobs["ledger.sweep"].run = client.app.state.ledger.sweep
    monkeypatch.setattr(background.webhooks, "enqueue", enqueue)
    await background.run_once()
    assert jobs["approvals.sweep"].failures == 1
    assert swept == [1] and delivered == [1]
