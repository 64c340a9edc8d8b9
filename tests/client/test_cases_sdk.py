"""The decision cases (tests/cases/*.json) through the Python client, against the app in
process: the same corpus as the core runner (tests/policy/test_cases.py) and the HTTP runner
(tests/authorize/test_cases_http.py), with the same expectations, now as the SDK parses them.

Both clients talk to the app through the constructor's ``transport=``: the AsyncClient over
``httpx.ASGITransport``; the sync Client, used from a worker thread, over a transport that
runs each request on the test's event loop. On top of the HTTP runner's checks, every deny
must raise, from ``decision.raise_for_deny()``, exactly the SDK's class the case names.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import toolgate_client
from toolgate_client import AsyncClient, Client, Decision, ToolgateDeny, hierarchy_of

from tests.casefiles import load_cases
from tests.conftest import ADMIN_TOKEN

DECISIONS = load_cases("decision")
BATCH = 100  # the service's batch limit


class LoopTransport(httpx.BaseTransport):
    """A sync transport onto an ASGI app: each request runs on `loop` (the caller must be
    another thread, e.g. asyncio.to_thread, while the loop is free)."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._asgi = httpx.ASGITransport(app=app)
        self._loop = loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def send() -> httpx.Response:
            response = await self._asgi.handle_async_request(request)
            body = b"".join([chunk async for chunk in response.stream])
            return httpx.Response(response.status_code, headers=response.headers,
                                  stream=httpx.ByteStream(body))

        return asyncio.run_coroutine_threadsafe(send(), self._loop).result()


@pytest.fixture(params=["Client", "AsyncClient"])
async def sdk(request: pytest.FixtureRequest,
              client: httpx.AsyncClient) -> AsyncIterator[Client | AsyncClient]:
    """A toolgate_client client of the in-process app (its lifespan run by `client`)."""
    app = client.app  # type: ignore[attr-defined]
    options: dict[str, Any] = {"token": ADMIN_TOKEN, "retries": 0}
    if request.param == "AsyncClient":
        async with AsyncClient("http://toolgate", transport=httpx.ASGITransport(app=app),
                               **options) as tg:
            yield tg
    else:
        loop = asyncio.get_running_loop()
        with Client("http://toolgate", transport=LoopTransport(app, loop), **options) as tg:
            yield tg


async def call(sdk: Client | AsyncClient, method: str, *args: Any, **kwargs: Any) -> Any:
    if isinstance(sdk, AsyncClient):
        return await getattr(sdk, method)(*args, **kwargs)
    return await asyncio.to_thread(functools.partial(getattr(sdk, method), *args, **kwargs))


def problems(case: dict[str, Any], decision: Decision, *, explained: bool) -> list[str]:
    """What differs from the case's expectations (test_cases_http.py's, plus the raise);
    `explained`: asked with explain=True, so the expected check outcomes are compared too."""
    expect = case["expect"]
    deny = decision.deny
    found: list[str] = []
    got = {
        "allowed": decision.allowed,
        "code": deny.code if deny else None,
        "error": deny.error if deny else None,
        "check": deny.check if deny else None,
    }
    found += [f"{key}: wanted {expect[key]!r}, got {got[key]!r}"
              for key in got if expect[key] != got[key]]
    if "message" in expect and (deny.message if deny else None) != expect["message"]:
        found.append(f"message: wanted {expect['message']!r}, got {deny and deny.message!r}")
    for key, value in (expect.get("details") or {}).items():
        if (deny.details if deny else {}).get(key) != value:
            found.append(f"details.{key}: wanted {value!r}, got {deny and deny.details!r}")
    if explained:
        got_outcomes = {c.get("check"): c.get("outcome") for c in decision.checks or ()}
        for check, outcome in expect.get("outcomes", {}).items():
            if got_outcomes.get(check) != outcome:
                found.append(f"outcome of {check}: wanted {outcome}, got {got_outcomes}")
    if not decision.decision_id:
        found.append("no decision_id")
    if deny is None:
        if decision.raise_for_deny() is not decision:
            found.append("raise_for_deny() did not return the allowed decision")
        return found
    if deny.hierarchy[-1] != deny.error or deny.hierarchy != hierarchy_of(deny.error):
        found.append(f"hierarchy {deny.hierarchy} is not the client's {hierarchy_of(deny.error)}")
    wanted = getattr(toolgate_client, expect["error"], None)
    if not (isinstance(wanted, type) and issubclass(wanted, ToolgateDeny)):
        return [*found, f"toolgate_client has no deny class {expect['error']}"]
    try:
        decision.raise_for_deny()
    except ToolgateDeny as exc:
        if type(exc) is not wanted:
            found.append(f"raise_for_deny() raised {type(exc).__name__}, not {wanted.__name__}")
        if (exc.code, exc.check, exc.decision_id) != (deny.code, deny.check,
                                                      decision.decision_id):
            found.append(f"the exception carries {(exc.code, exc.check, exc.decision_id)}")
    else:
        found.append("raise_for_deny() did not raise")
    return found


async def test_decision_cases_through_the_sdk(sdk: Client | AsyncClient) -> None:
    failures = []
    for case_id, case in DECISIONS:
        explain = "outcomes" in case["expect"]  # then compare the checks' outcomes too
        decision = await call(sdk, "authorize_tool", **case["request"], explain=explain)
        failures += [f"{case_id}: {p}" for p in problems(case, decision, explained=explain)]
    assert not failures, "\n".join(failures)
    assert len(DECISIONS) >= 120

    # The same cases as batches (authorize_tools answers in order).
    for start in range(0, len(DECISIONS), BATCH):
        chunk = DECISIONS[start:start + BATCH]
        decisions = await call(sdk, "authorize_tools", [case["request"] for _, case in chunk])
        assert len(decisions) == len(chunk)
        failures += [f"{case_id} (batch): {p}"
                     for (case_id, case), decision in zip(chunk, decisions, strict=True)
                     for p in problems(case, decision, explained=False)]
    assert not failures, "\n".join(failures)
