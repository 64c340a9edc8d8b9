"""Requests per key: a token bucket per key id in this process's memory.

Per process, on purpose: no shared state on the hot path. With N processes (workers or
replicas) behind a balancer a key can make up to N times the rate; docs/auth.md says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from app.edge.errors import RateLimited


class RateLimiter:
    def __init__(self, *, rate: float, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst) if burst is not None else max(1.0, rate)
        self._clock = clock
        # key id -> (tokens, when they were counted). One entry per key that made a request:
        # bounded by the number of keys, since only authenticated callers get here.
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key_id: str) -> None:
        """Spend one token of `key_id`'s bucket, or raise RateLimited with Retry-After."""
        now = self._clock()
        tokens, then = self._buckets.get(key_id, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if tokens < 1.0:
            self._buckets[key_id] = (tokens, now)
            wait = (1.0 - tokens) / self.rate
            raise RateLimited(
                f"rate limit of {self.rate:g} requests per second (burst {self.burst:g}) "
                f"exceeded for this key; retry in {wait:.2f}s",
                retry_after=max(1, math.ceil(wait)), key_id=key_id,
            )
        self._buckets[key_id] = (tokens - 1.0, now)
