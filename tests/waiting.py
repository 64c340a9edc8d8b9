"""Waiting for an event in a test: poll a condition with a generous deadline, never sleep
a fixed time and hope (a loaded 2-core machine is slow, never wrong)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


async def until(condition: Callable[[], Any], what: str = "the condition",
                seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {seconds:g} s"
        await asyncio.sleep(0.005)
