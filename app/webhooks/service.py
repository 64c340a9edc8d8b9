"""Webhook deliveries, at least once (SPEC §10).

Events come from the hash-chained log: approval records (kind `approval`) and denied
decisions. `enqueue` turns the records after the cursor into delivery rows and moves the
cursor, in one transaction: a record is durable before any event for it exists, and a crash
between the two loses nothing (the cursor did not move). `deliver_due` starts one worker per
webhook with due rows (app/webhooks/sender.py): each claims its rows with a lease, POSTs
them signed to the checked address (app/webhooks/guard.py), follows no redirect, keeps each
attempt's status and duration only, and backs off on failure.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from sqlalchemy import and_, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals.service import EVENTS as APPROVAL_EVENTS
from app.config import Settings
from app.log.records import iso
from app.log.tables import ChainHead, LogRecord
from app.store.base import utcnow
from app.store.engine import WRITE_OPTION
from app.webhooks.guard import AllowList
from app.webhooks.sender import Dispatcher
from app.webhooks.tables import Webhook, WebhookCursor, WebhookDelivery

log = logging.getLogger("toolgate.webhooks")

EVENTS = (*APPROVAL_EVENTS.values(), "decision.denied")
SCAN = 5000  # log records looked at per enqueue: bounded work whatever the backlog


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


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
                 max_attempts: int = 30, allow_hosts: Iterable[str] = (),
                 retention_days: int = 30) -> None:
        self.sessions = sessions
        self.dispatcher = Dispatcher(sessions, timeout=timeout, max_attempts=max_attempts,
                                     allow=AllowList.parse(allow_hosts),
                                     retention_days=retention_days, headers=signed_headers)

    @classmethod
    def from_settings(cls, sessions: async_sessionmaker[AsyncSession],
                      settings: Settings) -> Webhooks:
        return cls(sessions, timeout=settings.webhook_timeout_seconds,
                   max_attempts=settings.webhook_max_attempts,
                   allow_hosts=settings.webhook_allow_hosts,
                   retention_days=settings.webhook_delivery_retention_days)

    async def close(self) -> None:
        await self.dispatcher.close()

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

    # --- sending (app/webhooks/sender.py) --------------------------------------------

    async def deliver_due(self) -> int:
        """Start the deliveries that are due, one worker per webhook; how many workers were
        started (0 once every webhook with due deliveries has one running)."""
        return await self.dispatcher.start_due()


def signed_headers(delivery: WebhookDelivery, hook: Webhook) -> dict[str, str]:
    body = delivery.body.encode()
    timestamp = str(int(time.time()))
    return {"content-type": "application/json",
            "user-agent": "toolgate-webhooks",
            "x-toolgate-event": delivery.event,
            "x-toolgate-event-id": delivery.event_id,
            "x-toolgate-timestamp": timestamp,
            "x-toolgate-signature": signature(hook.secret, timestamp, body)}


def delivery_out(row: WebhookDelivery) -> dict[str, Any]:
    return {"id": row.id, "event_id": row.event_id, "event": row.event, "state": row.state,
            "attempts": row.attempts, "last_status": row.last_status,
            "last_error": row.last_error, "history": row.history or [],
            "created_at": iso(row.created_at),
            "next_attempt_at": iso(row.next_attempt_at) if row.state == "pending" else None,
            "delivered_at": iso(row.delivered_at) if row.delivered_at else None}


def shown_url(url: str) -> str:
    """`url` with any user info replaced by `***`."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def webhook_out(row: Webhook) -> dict[str, Any]:
    """A webhook as the API shows it: never its secret, nor credentials in its URL (refused
    since SPEC §17, but a row stored before that may still hold some)."""
    return {"name": row.name, "url": shown_url(row.url), "events": row.events,
            "projects": row.projects, "created_at": iso(row.created_at),
            "updated_at": iso(row.updated_at)}
