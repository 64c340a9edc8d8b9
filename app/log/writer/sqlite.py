"""The writer's SQLite store: one transaction per group of frames, chained under the
`chain_head` row lock; and the text SQLite keeps a time as."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from app.log.chain import COLUMNS, QUOTED_COLUMNS, chain_values
from app.log.checkpoints import LAST_HELD
from app.log.records import sqlite_text, sqlite_time
from app.log.writer.common import _CHECKPOINT_COLUMNS, _now, checkpoint_due

_SQLITE_HEAD = "UPDATE chain_head SET updated_at = ? WHERE id = 1 RETURNING seq, hash"
_SQLITE_INSERT = (f"INSERT INTO decision_log ({QUOTED_COLUMNS}) "
                  f"VALUES ({', '.join('?' * len(COLUMNS))})")
_SQLITE_SET_HEAD = "UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1"
_SQLITE_CHECKPOINT = (f"INSERT INTO log_checkpoints ({', '.join(_CHECKPOINT_COLUMNS)}) "
                      f"VALUES ({', '.join('?' * len(_CHECKPOINT_COLUMNS))})")


class SQLiteStore:
    def __init__(self, path: str, synchronous: str, busy_timeout: float = 30.0) -> None:
        self._path, self._synchronous = path, synchronous
        self._busy_timeout = busy_timeout  # waiting for the write lock (db_timeout_seconds)
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA busy_timeout={max(1, round(self._busy_timeout * 1000))}")
        return conn

    async def commit(self, records: list[dict[str, Any]]) -> None:
        conn = self._conn = self._conn or self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            seq, prev = conn.execute(_SQLITE_HEAD, (sqlite_time(_now()),)).fetchone()
            rows, seq, prev = chain_values(records, seq, prev, time=sqlite_text)
            conn.executemany(_SQLITE_INSERT, rows)
            conn.execute(_SQLITE_SET_HEAD, (seq, prev))
            conn.execute("COMMIT")
        except BaseException:
            self.close()  # rolls back; reconnect on the next batch
            raise

    async def checkpoint(self, signer: Any, interval: float) -> int | None:
        """A signed checkpoint of the head, chained as the next record, if one is due
        (common.checkpoint_due); the seq it signed, or None."""
        conn = self._conn = self._conn or self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            moment = _now()
            seq, prev = conn.execute(_SQLITE_HEAD, (sqlite_time(moment),)).fetchone()
            last = conn.execute(LAST_HELD).fetchone()
            made = checkpoint_due(signer, interval, seq, prev, moment, last and (
                last[0], datetime.fromisoformat(last[1]).replace(tzinfo=UTC)), last)
            if made is None:
                conn.execute("ROLLBACK")
                return None
            record, row = made
            rows, new_seq, new_prev = chain_values([record], seq, prev, time=sqlite_text)
            conn.executemany(_SQLITE_INSERT, rows)
            conn.execute(_SQLITE_CHECKPOINT, tuple(
                sqlite_text(row[c]) if c == "time" else row[c] for c in _CHECKPOINT_COLUMNS))
            conn.execute(_SQLITE_SET_HEAD, (new_seq, new_prev))
            conn.execute("COMMIT")
            return seq
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    stop = close  # when the writer stops
