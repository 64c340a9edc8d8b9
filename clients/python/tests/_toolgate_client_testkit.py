"""Test helpers: a scripted fake toolgate behind httpx.MockTransport, and payload builders."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from toolgate_client import AsyncClient, Client, hierarchy_of

BASE_URL = "http://toolgate.test"
TOKEN = "tg-test-token"

Step = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class FakeToolgate:
    """Answers requests with the scripted steps, in order; the last step repeats.

    A step is an ``httpx.Response``, an exception to raise (e.g. ``httpx.ConnectError``),
    or a callable ``request -> Response``.
    """

    def __init__(self, *steps: Step) -> None:
        assert steps, "script at least one step"
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []
        # Outcome reports (guards send one after each guarded call) are answered here, not
        # from the script, and kept apart: (decision_id, body).
        self.outcomes: list[tuple[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path.endswith("/outcome"):
            decision_id = path.split("/")[-2]
            body = json.loads(request.content)
            self.outcomes.append((decision_id, body))
            return httpx.Response(201, json={"decision_id": decision_id, **body})
        self.requests.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return step(request)
        return step

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    # -- inspection ------------------------------------------------------------------
    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)

    def request_ids(self) -> list[str]:
        return [r.headers.get("x-request-id") for r in self.requests]


def make_client(fake: FakeToolgate, **kwargs: Any) -> Client:
    kwargs.setdefault("token", TOKEN)
    kwargs.setdefault("backoff", 0.0)
    client = Client(BASE_URL, transport=fake.transport, **kwargs)
    client.sleeps = []  # type: ignore[attr-defined]
    client._sleep = client.sleeps.append  # type: ignore[attr-defined]
    return client


def make_async_client(fake: FakeToolgate, **kwargs: Any) -> AsyncClient:
    kwargs.setdefault("token", TOKEN)
    kwargs.setdefault("backoff", 0.0)
    client = AsyncClient(BASE_URL, transport=fake.transport, **kwargs)
    sleeps: list[float] = []

    async def record(delay: float) -> None:
        sleeps.append(delay)

    client.sleeps = sleeps  # type: ignore[attr-defined]
    client._sleep = record  # type: ignore[attr-defined]
    return client


def allow_payload(**overrides: Any) -> dict[str, Any]:
    payload = {
        "decision_id": "0193a0c4-0000-7000-8000-000000000001",
        "allowed": True,
        "deny": None,
        "plan_id": "p-1",
        "profile": {"provenance": "plan", "name": "strict", "version": 3, "is_default": False},
        "checks": None,
    }
    payload.update(overrides)
    return payload


def deny_payload(
    error: str = "ToolSandboxRequiredError",
    code: str | None = "sandbox_required",
    *,
    check: str | None = "sandbox",
    message: str | None = None,
    details: dict[str, Any] | None = None,
    hierarchy: list[str] | None = None,
    decision_id: str = "0193a0c4-0000-7000-8000-0000000000d1",
    plan_id: str | None = "p-1",
) -> dict[str, Any]:
    return {
        "decision_id": decision_id,
        "allowed": False,
        "deny": {
            "error": error,
            "hierarchy": hierarchy if hierarchy is not None else hierarchy_of(error),
            "code": code,
            "check": check,
            "message": message
            if message is not None
            else f"Tool 'fs.write' denied ({code}) (plan '{plan_id}')",
            "details": details if details is not None else {},
        },
        "plan_id": plan_id,
        "profile": None,
        "checks": None,
    }


def envelope(status: int, code: str, message: str = "nope", **details: Any) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"code": code, "message": message, "details": details}}
    )


WRITE_TOOL = {
    "name": "fs.write",
    "capability": {"writes": True, "checkpointable": True, "unsafe": False},
}
