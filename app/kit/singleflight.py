"""One read for concurrent callers who want the same thing from the database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedReads(Generic[T]):
    """`await reads.get(key, read)`: the first caller for `key` starts `read()`, callers
    arriving while it runs await the same result (or exception), and the next caller after
    it ends starts a new one. Used where many requests find the same cache entry missing at
    once (a worker just started, or resuming after a pause longer than a cache's ttl).
    Shielded: one caller going away (cancelled) does not cancel the read for the others."""

    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Task[T]] = {}

    async def get(self, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        task = self._running.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(read())  # type: ignore[arg-type]
            self._running[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(task)

    def _forget(self, key: Hashable, task: asyncio.Task[T]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
