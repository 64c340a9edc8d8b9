"""Webhook deliveries, at least once (SPEC §10).

Events come from the hash-chained log: approval records (kind `approval`) and denied
decisions. `enqueue` turns the records after the cursor into delivery rows and moves the
cursor, in one transaction: a record is durable before any event for it exists, and a crash
between the two loses nothing (the cursor did not move). `deliver_due` claims due rows with
a lease (so two processes never send one at once, and a process killed mid-attempt leaves a
row that is retried when the lease ends), POSTs each one signed, follows no redirect, keeps
each attempt's status and duration only, and backs off on failure.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from datetime import timedelta
from typing import Any

import httpx
import orjson
from sqlalchemy import and_, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals.service import EVENTS as APPROVAL_EVENTS
from app.log.records import iso
from app.log.tables import ChainHead, LogRecord
from app.store.base import utcnow
from app.store.engine import WRITE_OPTION
from app.webhooks.tables import Webhook, WebhookCursor, WebhookDelivery

log = logging.getLogger("toolgate.webhooks")

EVENTS = (*APPROVAL_EVENTS.values(), "decision.denied")
SCAN = 5000  # log records looked at per enqueue: bounded work whatever the backlog
CLAIM = 20  # deliveries claimed per round
HISTORY = 20  # attempts kept per delivery
MAX_BACKOFF = 300.0


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def backoff(attempts: int) -> float:
    return min(MAX_BACKOFF, 2.0 ** max(0, attempts - 1))


def _event(row: Any) -> tuple[str, dict[str, Any]] | None:
    """(event name, data) of a log record, or None when it is no event."""
    detail = orjson.loads(row.detail)
    if row.kind == "approval":
        name = APPROVAL_EVENTS.get(detail.get("event"))
        return (name, detail["approval"]) if name else None
    if row.kind == "authorize" and row.allowed is False:
        return "decision.denied", {
            "decision_id": row.decision_id, "project": row.project, "plan_id": row.plan_id,
            "action_id": row.action_id, "tool": row.tool, "code": row.code,
            "error": row.error, "check": row.check, "message": detail.get("message"),
            "approval": (detail.get("deny_details") or {}).get("approval"),
        }
    return None


def _wanted(hook: Webhook, event: str, project: str | None) -> bool:
    return event in hook.events and (hook.projects is None or project in hook.projects)


async def start_cursor(session: AsyncSession, head: int | None = None) -> None:
    """Create the outbox cursor at the chain's head unless it exists. Called when a webhook is
    created, in its transaction: every record after that is an event for it, even when no
    background round ran in between (the first round would otherwise place the cursor after
    records made since, and their events would never be sent)."""
    if head is None:
        head = (await session.execute(
            select(ChainHead.seq).where(ChainHead.id == 1))).scalar_one_or_none() or 0
    insert = pg_insert if session.bind.dialect.name == "postgresql" else sqlite_insert
    await session.execute(insert(WebhookCursor).values(id=1, seq=head)
                          .on_conflict_do_nothing(index_elements=["id"]))


class Webhooks:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, timeout: float = 10.0,
                 max_attempts: int = 30) -> None:
        self.sessions = sessions
        self.timeout = timeout
        self.max_attempts = max_attempts
        self._client: httpx.AsyncClient | None = None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # --- the outbox ------------------------------------------------------------------

    async def enqueue(self) -> int:
        """Turn the next records after the cursor into deliveries; how many were queued."""
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            head = (await session.execute(
                select(ChainHead.seq).where(ChainHead.id == 1))).scalar_one_or_none()
            if head is None:
                return 0
            cursor = await self._cursor(session, head)
            if cursor >= head:
                return 0
            hooks = list((await session.execute(select(Webhook))).scalars())
            upto = min(head, cursor + SCAN)
            queued = 0
            if hooks:
                wanted = {e for hook in hooks for e in hook.events}
                kinds = [LogRecord.kind == "approval"]
                if "decision.denied" in wanted:
                    kinds.append(and_(LogRecord.kind == "authorize",
                                      LogRecord.allowed.is_(False)))
                rows = (await session.execute(
                    select(LogRecord.seq, LogRecord.decision_id, LogRecord.kind,
                           LogRecord.created_at, LogRecord.project, LogRecord.plan_id,
                           LogRecord.action_id, LogRecord.tool, LogRecord.allowed,
                           LogRecord.code, LogRecord.error, LogRecord.check, LogRecord.detail)
                    .where(LogRecord.seq > cursor, LogRecord.seq <= upto, or_(*kinds))
                    .order_by(LogRecord.seq))).all()
                queued = await self._queue(session, hooks, rows)
            await session.execute(update(WebhookCursor).where(WebhookCursor.id == 1)
                                  .values(seq=upto))
            return queued

    @staticmethod
    async def _cursor(session: AsyncSession, head: int) -> int:
        """The cursor, locked; created at the chain's head (events start now)."""
        await start_cursor(session, head)
        return (await session.execute(
            select(WebhookCursor.seq).where(WebhookCursor.id == 1).with_for_update()
        )).scalar_one()

    @staticmethod
    async def _queue(session: AsyncSession, hooks: list[Webhook], rows: list[Any]) -> int:
        now = utcnow()
        values = []
        for row in rows:
            found = _event(row)
            if found is None:
                continue
            name, data = found
            body = orjson.dumps({"event_id": row.decision_id, "event": name,
                                 "created_at": iso(row.created_at), "data": data})
            values.extend(
                {"webhook": hook.name, "event_id": row.decision_id, "event": name,
                 "body": body.decode(), "state": "pending", "attempts": 0,
                 "next_attempt_at": now, "history": [], "created_at": now}
                for hook in hooks if _wanted(hook, name, row.project))
        if not values:
            return 0
        dialect = session.bind.dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        await session.execute(insert(WebhookDelivery).values(values).on_conflict_do_nothing(
            index_elements=["webhook", "event_id"]))
        return len(values)

    # --- sending ---------------------------------------------------------------------

    async def deliver_due(self) -> int:
        """Claim and send the due deliveries; how many were attempted."""
        claimed = await self._claim()
        if not claimed:
            return 0
        # One webhook's deliveries are sent one after another in the log's order (a receiver
        # sees pending before granted, unless a retry intervenes); webhooks in parallel.
        results: list[dict[str, Any]] = [{}] * len(claimed)
        by_hook: dict[str, list[int]] = {}
        for i, (delivery, _) in enumerate(claimed):
            by_hook.setdefault(delivery.webhook, []).append(i)

        async def send_in_order(indexes: list[int]) -> None:
            for i in indexes:
                results[i] = await self._send(*claimed[i])

        await asyncio.gather(*(send_in_order(ix) for ix in by_hook.values()))
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            for (delivery, _), result in zip(claimed, results, strict=True):
                await self._settle(session, delivery, result)
        return len(claimed)

    async def _claim(self) -> list[tuple[WebhookDelivery, Webhook | None]]:
        now = utcnow()
        lease = now + timedelta(seconds=self.timeout + 5)
        claimed = []
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            due = list((await session.execute(
                select(WebhookDelivery)
                .where(WebhookDelivery.state == "pending",
                       WebhookDelivery.next_attempt_at <= now)
                .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
                .limit(CLAIM))).scalars())
            for delivery in due:
                taken = await session.execute(
                    update(WebhookDelivery)
                    .where(WebhookDelivery.id == delivery.id, WebhookDelivery.state == "pending",
                           WebhookDelivery.next_attempt_at == delivery.next_attempt_at)
                    .values(next_attempt_at=lease))
                if taken.rowcount == 1:
                    hook = await session.get(Webhook, delivery.webhook)
                    claimed.append((delivery, hook))
        return claimed

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False, timeout=self.timeout,
                                             trust_env=False)
        return self._client

    async def _send(self, delivery: WebhookDelivery,
                    hook: Webhook | None) -> dict[str, Any]:
        at = utcnow()
        if hook is None:
            return {"at": iso(at), "status": None, "duration_ms": 0,
                    "error": "the webhook was deleted"}
        body = delivery.body.encode()
        timestamp = str(int(time.time()))
        headers = {"content-type": "application/json",
                   "user-agent": "toolgate-webhooks",
                   "x-toolgate-event": delivery.event,
                   "x-toolgate-event-id": delivery.event_id,
                   "x-toolgate-timestamp": timestamp,
                   "x-toolgate-signature": signature(hook.secret, timestamp, body)}
        started = time.perf_counter()
        try:
            answer = await self._http().post(hook.url, content=body, headers=headers)
            status: int | None = answer.status_code
            error = None if 200 <= answer.status_code < 300 else f"HTTP {answer.status_code}"
        except httpx.HTTPError as failed:
            status, error = None, (type(failed).__name__ + (f": {failed}" if str(failed)
                                                           else ""))[:200]
        except Exception as failed:  # a URL httpx refuses, say: never stop the loop
            status, error = None, f"{type(failed).__name__}: {failed}"[:200]
        duration = round((time.perf_counter() - started) * 1000, 1)
        attempt: dict[str, Any] = {"at": iso(at), "status": status, "duration_ms": duration}
        if error is not None:
            attempt["error"] = error
        return attempt

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
        elif attempts >= self.max_attempts or attempt["error"] == "the webhook was deleted":
            values.update(state="failed")
        else:
            values.update(next_attempt_at=now + timedelta(seconds=backoff(attempts)))
        await session.execute(update(WebhookDelivery)
                              .where(WebhookDelivery.id == delivery.id).values(**values))


def delivery_out(row: WebhookDelivery) -> dict[str, Any]:
    return {"id": row.id, "event_id": row.event_id, "event": row.event, "state": row.state,
            "attempts": row.attempts, "last_status": row.last_status,
            "last_error": row.last_error, "history": row.history or [],
            "created_at": iso(row.created_at),
            "next_attempt_at": iso(row.next_attempt_at) if row.state == "pending" else None,
            "delivered_at": iso(row.delivered_at) if row.delivered_at else None}


def webhook_out(row: Webhook) -> dict[str, Any]:
    """A webhook as the API shows it: never its secret."""
    return {"name": row.name, "url": row.url, "events": row.events,
            "projects": row.projects, "created_at": iso(row.created_at),
            "updated_at": iso(row.updated_at)}
