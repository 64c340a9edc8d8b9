"""Sending webhook deliveries: one worker per webhook, so a receiver that is slow or never
answers delays only its own deliveries (SPEC §17).

Each round, `Dispatcher.start_due` starts a worker for every webhook that has a due delivery
and no worker running. A worker claims its webhook's oldest due delivery with a lease (two
processes never send one at once; a process killed mid-attempt leaves a row retried when
the lease ends), sends it within one deadline for the whole attempt (resolution, connection,
request and answer: a receiver that trickles bytes cannot hold it longer), records the
attempt and claims the next one in the same transaction, until none is due. One webhook's
deliveries go out one after another in the log's order (a receiver sees pending before
granted, unless a retry intervenes); webhooks go out in parallel, up to `max_workers`.

An attempt keeps its status and duration and a coarse reason, never the connection error's
text: that text would tell whoever chose the URL what answered there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.log.records import iso
from app.store.base import utcnow
from app.store.engine import WRITE_OPTION
from app.webhooks import guard
from app.webhooks.tables import Webhook, WebhookDelivery

log = logging.getLogger("toolgate.webhooks")

HISTORY = 20  # attempts kept per delivery
MAX_BACKOFF = 300.0
PRUNE_EVERY = 60.0  # seconds between two prunings of old delivered rows, per process
PRUNE_BATCH = 1000
DELETED = "the webhook was deleted"


def backoff(attempts: int) -> float:
    return min(MAX_BACKOFF, 2.0 ** max(0, attempts - 1))


class Dispatcher:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, timeout: float,
                 max_attempts: int, allow: guard.AllowList, retention_days: int,
                 max_workers: int = 32, headers: Any = None) -> None:
        self.sessions = sessions
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.allow = allow
        self.retention = timedelta(days=retention_days)
        self.max_workers = max_workers
        self.headers = headers  # (delivery, hook) -> the signed headers
        self.workers: dict[str, asyncio.Task[None]] = {}
        self._client: httpx.AsyncClient | None = None
        self.prune_every = PRUNE_EVERY
        self._pruned_at = float("-inf")

    async def close(self) -> None:
        for task in list(self.workers.values()):
            task.cancel()
        for task in list(self.workers.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.workers.clear()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def start_due(self) -> int:
        """Start a worker for each webhook with a due delivery and none running; how many
        were started (0 when every due webhook already has one)."""
        await self._prune()
        now = utcnow()
        async with self.sessions() as session:
            due = list((await session.execute(
                select(WebhookDelivery.webhook)
                .where(WebhookDelivery.state == "pending",
                       WebhookDelivery.next_attempt_at <= now)
                .group_by(WebhookDelivery.webhook)
                .order_by(WebhookDelivery.webhook))).scalars())
        started = 0
        for name in due:
            if name in self.workers or len(self.workers) >= self.max_workers:
                continue
            task = asyncio.create_task(self._work(name), name=f"toolgate-webhook-{name}")
            self.workers[name] = task
            task.add_done_callback(lambda _t, n=name: self.workers.pop(n, None))
            started += 1
        return started

    async def idle(self) -> None:
        """Wait until no worker runs (tests, shutdown)."""
        while self.workers:
            await asyncio.gather(*list(self.workers.values()), return_exceptions=True)

    async def _work(self, name: str) -> None:
        try:
            claimed = await self._settle_and_claim(name, None)
            while claimed is not None:
                attempt = await self._send(*claimed)
                claimed = await self._settle_and_claim(name, (claimed[0], attempt))
        except asyncio.CancelledError:
            raise
        except Exception as failed:  # the database, say: the next round starts it again
            log.warning("webhook %s: delivery worker stopped: %s", name, failed)

    # --- the rows --------------------------------------------------------------------

    async def _settle_and_claim(
        self, name: str, done: tuple[WebhookDelivery, dict[str, Any]] | None,
    ) -> tuple[WebhookDelivery, Webhook | None] | None:
        """Record the attempt just made (if any) and claim the webhook's next due
        delivery, in one transaction."""
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            if done is not None:
                await self._settle(session, *done)
            now = utcnow()
            delivery = (await session.execute(
                select(WebhookDelivery)
                .where(WebhookDelivery.webhook == name, WebhookDelivery.state == "pending",
                       WebhookDelivery.next_attempt_at <= now)
                .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
                .limit(1))).scalar_one_or_none()
            if delivery is None:
                return None
            taken = await session.execute(
                update(WebhookDelivery)
                .where(WebhookDelivery.id == delivery.id, WebhookDelivery.state == "pending",
                       WebhookDelivery.next_attempt_at == delivery.next_attempt_at)
                .values(next_attempt_at=now + timedelta(seconds=self.timeout + 5)))
            if taken.rowcount != 1:
                return None  # another process has it; its worker goes on with the rest
            return delivery, await session.get(Webhook, name)

    async def _settle(self, session: AsyncSession, delivery: WebhookDelivery,
                      attempt: dict[str, Any]) -> None:
        attempts = delivery.attempts + 1
        history = [*(delivery.history or []), attempt][-HISTORY:]
        values: dict[str, Any] = {"attempts": attempts, "history": history,
                                  "last_status": attempt["status"],
                                  "last_error": attempt.get("error")}
        now = utcnow()
        if "error" not in attempt:
            values.update(state="delivered", delivered_at=now)
        elif attempts >= self.max_attempts or attempt["error"] == DELETED:
            values.update(state="failed")
        else:
            values.update(next_attempt_at=now + timedelta(seconds=backoff(attempts)))
        await session.execute(update(WebhookDelivery)
                              .where(WebhookDelivery.id == delivery.id).values(**values))

    async def _prune(self) -> None:
        """Delete delivered rows older than the retention (TOOLGATE_WEBHOOK_DELIVERY_
        RETENTION_DAYS), a batch at a time and at most once a minute per process: the
        table stays bounded by the traffic of the retention window."""
        if time.monotonic() - self._pruned_at < self.prune_every:
            return
        self._pruned_at = time.monotonic()
        cutoff = utcnow() - self.retention
        # Looked for without the write lock (SQLite's is the log writer's too); deleted in
        # a write transaction only when there is something to delete.
        async with self.sessions() as session:
            old = (await session.execute(
                select(WebhookDelivery.id)
                .where(WebhookDelivery.state == "delivered",
                       WebhookDelivery.delivered_at < cutoff)
                .limit(PRUNE_BATCH))).scalars().all()
        if old:
            async with self.sessions() as session, session.begin():
                await session.connection(execution_options={WRITE_OPTION: True})
                await session.execute(delete(WebhookDelivery).where(
                    WebhookDelivery.id.in_(old), WebhookDelivery.state == "delivered"))
        if len(old) == PRUNE_BATCH:
            self._pruned_at = float("-inf")  # more to do: next round again

    # --- HTTP ------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False, timeout=self.timeout,
                                             trust_env=False)
        return self._client

    async def _send(self, delivery: WebhookDelivery,
                    hook: Webhook | None) -> dict[str, Any]:
        at = utcnow()
        if hook is None:
            return {"at": iso(at), "status": None, "duration_ms": 0, "error": DELETED}
        started = time.perf_counter()
        status: int | None = None
        try:
            async with asyncio.timeout(self.timeout):
                status = await self._post(delivery, hook)
            error = None if 200 <= status < 300 else f"HTTP {status}"
        except guard.Refused:
            error = "refused: the address is not allowed"
        except TimeoutError:
            error = "timeout"
        except Exception:  # noqa: BLE001 - any failure is one attempt, never the loop's end
            error = "no answer"
        duration = round((time.perf_counter() - started) * 1000, 1)
        attempt: dict[str, Any] = {"at": iso(at), "status": status, "duration_ms": duration}
        if error is not None:
            attempt["error"] = error
        return attempt

    async def _post(self, delivery: WebhookDelivery, hook: Webhook) -> int:
        """POST to the address that was checked, with the URL's own Host and TLS name."""
        address = await guard.check_url(hook.url, self.allow, must_resolve=True)
        url = httpx.URL(hook.url)
        headers = {**self.headers(delivery, hook), "host": url.netloc.decode("ascii")}
        extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
        answer = await self._http().post(url.copy_with(host=str(address)),
                                         content=delivery.body.encode(), headers=headers,
                                         extensions=extensions)
        return answer.status_code
