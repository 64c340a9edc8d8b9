"""Cross-process cache invalidation over PostgreSQL LISTEN/NOTIFY.

Each process keeps one asyncpg connection that LISTENs on every subscribed channel and
calls the subscribers' callbacks with the payload. A writer sends `NOTIFY channel` (or
`pg_notify`) in the transaction that made the change, so the message arrives exactly when
the change is committed, on every replica sharing the database.

When the connection drops, notifications sent meanwhile are lost. The listener reconnects
(every `retry_seconds`) and, once listening again, calls every callback with `None`
("something may have changed"), so caches drop what they hold; until then each cache's own
TTL bounds how stale it can be. On SQLite (one host, no NOTIFY) `start()` does nothing and
the TTLs alone bound staleness.

Usage: `notifier.subscribe(channel, callback)` before `await notifier.start()`; callbacks
run on the event loop and must be quick and never raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from app.config import asyncpg_dsn

log = logging.getLogger("toolgate.notify")

Callback = Callable[[str | None], None]


class Notifier:
    def __init__(self, database_url: str, *, retry_seconds: float = 1.0,
                 ping_seconds: float = 5.0, timeout: float = 5.0) -> None:
        self.dsn = asyncpg_dsn(database_url)
        self.timeout = timeout  # connecting, and each ping's answer
        self.retry_seconds = retry_seconds
        self.ping_seconds = ping_seconds
        self._subscribers: dict[str, list[Callback]] = {}
        self._task: asyncio.Task[None] | None = None
        # Set while a connection is listening on every subscribed channel.
        self.listening = asyncio.Event()
        self.connections = 0  # how many times a connection started listening
        self.server_pid: int | None = None  # the listening backend (pg_stat_activity.pid)

    def subscribe(self, channel: str, callback: Callback) -> None:
        self._subscribers.setdefault(channel, []).append(callback)

    @property
    def enabled(self) -> bool:
        return self.dsn is not None

    async def start(self) -> None:
        if self.dsn is None or not self._subscribers or self._task is not None:
            return
        self._task = asyncio.create_task(self._run(), name="toolgate-notify")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _deliver(self, channel: str, payload: str | None) -> None:
        for callback in self._subscribers.get(channel, ()):
            try:
                callback(payload)
            except Exception:  # one subscriber's bug must not silence the others
                log.exception("notification callback for %s failed", channel)

    def _on_notify(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        self._deliver(channel, payload)

    async def _run(self) -> None:
        failures = 0
        while True:
            connections = self.connections
            try:
                await self._listen_once()
                problem = "lost"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection refused, lost, timed out: retry below
                problem = f"unavailable ({type(exc).__name__}: {exc})"
            failures = 0 if self.connections != connections else failures + 1
            # One warning per outage, not one per retry.
            (log.warning if failures <= 1 else log.debug)(
                "LISTEN connection %s; retrying every %ss, caches fall back to their TTL "
                "meanwhile", problem, self.retry_seconds)
            self.listening.clear()
            await asyncio.sleep(self.retry_seconds)

    async def _listen_once(self) -> None:
        conn = await asyncpg.connect(self.dsn, timeout=self.timeout)
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _c: lost.set())
        try:
            for channel in self._subscribers:
                await conn.add_listener(channel, self._on_notify)
            # Whatever was sent while nobody listened is lost: treat it as a change.
            for channel in self._subscribers:
                self._deliver(channel, None)
            self.connections += 1
            self.server_pid = conn.get_server_pid()
            self.listening.set()
            while not lost.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lost.wait(), self.ping_seconds)
                    break
                # A half-open connection delivers nothing and reports nothing; a ping
                # with a deadline finds it.
                await conn.fetchval("SELECT 1", timeout=self.timeout)
        finally:
            self.listening.clear()
            conn.terminate()
