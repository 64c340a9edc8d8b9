"""Starting a writer process, from the process that starts it: the configuration it reads
on its stdin (`open_store` in loop.py), and the one shared writer of `toolgate serve
--workers N`. (A worker's writer of its own is started by DecisionLog.start.) This side may
import SQLAlchemy: the writer process never imports this module."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
from sqlalchemy.engine import make_url

from app.config import asyncpg_dsn


def writer_config(database_url: str, *, max_batch: int, timeout: float,
                  sqlite_synchronous: str, db_timeout: float | None = None,
                  checkpoint: dict[str, Any] | None = None) -> dict[str, Any]:
    """The writer process's configuration (sent on its stdin, not its command line).
    `db_timeout`: each statement's bound and SQLite's busy timeout (open_store);
    `checkpoint`: {"signing_key": file, "seconds": interval} (checkpoint_config)."""
    dsn = asyncpg_dsn(database_url)
    bound = {} if db_timeout is None else {"db_timeout": db_timeout}
    if checkpoint:
        bound["checkpoint"] = checkpoint
    if dsn is None:
        return {"sqlite": make_url(database_url).database or "toolgate.db",
                "synchronous": sqlite_synchronous, "max_batch": max_batch, **bound}
    return {"postgresql": dsn, "timeout": timeout, "max_batch": max_batch, **bound}


def checkpoint_config(signing_key: str | None, seconds: float) -> dict[str, Any] | None:
    """What a writer needs to sign checkpoints (SPEC §16): None without a signing key."""
    return None if signing_key is None else {"signing_key": signing_key, "seconds": seconds}


# Set by `toolgate serve` for its workers (not a setting: it is wiring, not configuration).
WRITER_SOCKET_ENV = "TOOLGATE_INTERNAL_DECISION_LOG_SOCKET"


def start_shared_writer(database_url: str, *, max_batch: int, timeout: float,
                        sqlite_synchronous: str, socket_path: str,
                        db_timeout: float | None = None,
                        checkpoint: dict[str, Any] | None = None) -> subprocess.Popen:
    """The one writer all of a server's workers connect to (`toolgate serve --workers N`);
    closing its stdin shuts it down once the workers have gone."""
    process = subprocess.Popen([sys.executable, "-m", "app.log.writer",
                                "--listen", socket_path], stdin=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(orjson.dumps(writer_config(
        database_url, max_batch=max_batch, timeout=timeout,
        sqlite_synchronous=sqlite_synchronous, db_timeout=db_timeout,
        checkpoint=checkpoint)) + b"\n")
    process.stdin.flush()
    return process
