"""Outcome reports (SPEC §11): report_outcome, and guards reporting on return (with the
cost) and on an exception (ToolExecutionError caused by the original), sync and async."""

from __future__ import annotations

import httpx
import pytest

from _toolgate_client_testkit import (
    FakeToolgate,
    allow_payload,
    deny_payload,
    make_async_client,
    make_client,
)
from toolgate_client import ToolExecutionError, ToolSandboxRequiredError

DECISION = "0193a0c4-0000-7000-8000-000000000001"


def test_report_outcome_sends_only_the_given_fields() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        out = client.report_outcome(DECISION, "succeeded", cost=0.5, verified=False)
    assert out["status"] == "succeeded"
    assert fake.outcomes == [(DECISION, {"status": "succeeded", "cost": 0.5,
                                         "verified": False})]


def test_guard_reports_success_with_the_cost_from_the_result() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:

        @client.guard(tool={"name": "llm"}, plan_id="p-1", cost=lambda result: result["cost"])
        def ask() -> dict:
            return {"text": "hi", "cost": 0.03}

        assert ask() == {"text": "hi", "cost": 0.03}
    assert fake.outcomes == [(DECISION, {"status": "succeeded", "cost": 0.03})]


def test_guard_reports_a_failure_and_raises_tool_execution_error() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:

        @client.guard(tool={"name": "llm"}, plan_id="p-1")
        def ask() -> None:
            raise TimeoutError("model did not answer")

        with pytest.raises(ToolExecutionError) as info:
            ask()
    assert isinstance(info.value.__cause__, TimeoutError)
    assert info.value.decision_id == DECISION
    (decision_id, body), = fake.outcomes
    assert body["status"] == "execution_failed" and "model did not answer" in body["error"]


def test_a_denied_call_neither_runs_nor_reports() -> None:
    fake = FakeToolgate(httpx.Response(200, json=deny_payload()))
    ran = []
    with make_client(fake) as client:
        with pytest.raises(ToolSandboxRequiredError):
            with client.guarded(tool={"name": "fs.write"}, plan_id="p-1"):
                ran.append(1)
    assert ran == [] and fake.outcomes == []


def test_guarded_cost_is_read_at_exit() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    spent = {"total": 0.0}
    with make_client(fake) as client:
        with client.guarded(tool={"name": "llm"}, plan_id="p-1",
                            cost=lambda: spent["total"]):
            spent["total"] = 1.25
    assert fake.outcomes == [(DECISION, {"status": "succeeded", "cost": 1.25})]


@pytest.mark.asyncio
async def test_async_guard_and_guarded_report() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    async with make_async_client(fake) as client:

        @client.guard(tool={"name": "llm"}, plan_id="p-1", cost=2)
        async def ask() -> str:
            return "ok"

        assert await ask() == "ok"
        with pytest.raises(ToolExecutionError) as info:
            async with client.guarded(tool={"name": "llm"}, plan_id="p-1"):
                raise ValueError("bad")
        assert isinstance(info.value.__cause__, ValueError)
        await client.report_outcome(DECISION, "activation_failed")
    assert [body["status"] for _, body in fake.outcomes] == [
        "succeeded", "execution_failed", "activation_failed"]
    assert fake.outcomes[0][1]["cost"] == 2
