"""The Postgres store's companion: summarising the created_at BRIN index's new ranges,
on a connection of its own beside the commits."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("toolgate.decisions.writer")

# The created_at BRIN index summarises a range of 128 heap pages once it is full. Postgres
# can queue that for autovacuum (autosummarize), but its queue holds 256 requests, served
# when autovacuum next visits the database (every autovacuum_naptime, a minute by default):
# at the log's sustained rates (a range fills every ~0.1 s) it overflows (at once with
# autovacuum off), and every request it drops is a LOG line in the server's log with the
# whole INSERT statement (7-11 a second under load, measured). So the writer summarises
# the new ranges itself, this often, on a connection of its own beside the commits
# (migration 0007 turned autosummarize off). Time-range queries read the unsummarised
# newest ranges in full: at most this many seconds of records.
SUMMARISE_SECONDS = 10.0
_PG_SUMMARISE = "SELECT brin_summarize_new_values('ix_decision_log_created_at'::regclass)"
# A summary waits for no one: autovacuum (or a second server's writer) holding the table's
# maintenance lock makes it give up until the next turn, never queue behind it. Well under
# deadlock_timeout (1 s by default), after which a waiter cancels an autovacuum of the table.
_PG_SUMMARY_SESSION = {"lock_timeout": "100ms"}


class Summariser:
    """Every `seconds`, on its own connection, summarises the BRIN ranges filled since the
    last time. It never touches a commit: a passing failure (the database away, the lock
    taken) is logged and tried again at the next turn; one that cannot pass (a schema
    without the BRIN index, a role that does not own it) is logged once and the summaries
    stop (brin_summarize_new_values needs the role to own the index). Started by the
    Postgres store with its first connection; `close` ends it, for good."""

    def __init__(self, dsn: str, timeout: float, seconds: float) -> None:
        self._dsn, self._timeout, self._seconds = dsn, timeout, seconds
        self._task: asyncio.Task | None = None
        self._closed = False
        self.summarised = 0  # ranges summarised so far
        self.turns = 0

    def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="toolgate-decision-log-brin")

    async def _run(self) -> None:
        import asyncpg

        lasting = (asyncpg.InsufficientPrivilegeError, asyncpg.WrongObjectTypeError,
                   asyncpg.UndefinedTableError, asyncpg.UndefinedObjectError)
        conn = None
        try:
            while True:
                await asyncio.sleep(self._seconds)
                try:
                    if conn is None or conn.is_closed():
                        conn = await asyncpg.connect(self._dsn, timeout=self._timeout,
                                                     server_settings=_PG_SUMMARY_SESSION)
                    self.summarised += await conn.fetchval(_PG_SUMMARISE)
                    self.turns += 1
                except lasting as exc:
                    log.warning("decision log: the created_at index cannot be summarised "
                                "(%s); time-range queries read its unsummarised ranges in "
                                "full until the writer restarts", exc)
                    return
                except Exception as exc:  # tried again at the next turn
                    log.warning("decision log: summarising the created_at index failed: %s",
                                exc)
                    if conn is not None and not isinstance(exc, asyncpg.PostgresError):
                        conn.terminate()  # not the server's answer: a new connection
                        conn = None
        finally:
            if conn is not None:
                conn.terminate()

    def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            self._task = None
