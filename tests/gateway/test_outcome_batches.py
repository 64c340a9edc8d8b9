"""The gateway reports the outcome of every call it forwarded (SPEC §14), in batches: the
reports booked while one is on its way go together in the next `POST /v1/outcomes` (SPEC §11,
at most 100 a request); a toolgate that refuses the batch as a whole gets each report on its
own route, and a report toolgate refuses is logged with its decision. Against a recorded
toolgate (httpx's MockTransport behind the gateway's own client)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from toolgate_client import AsyncClient

from app.gateway.calls import REPORT_BATCH, Gate, args_sha256
from app.gateway.config import load_config

CONFIG = """
version: 1
toolgate: {url: "http://toolgate.test", timeout_seconds: 5}
listen: {stdio: true}
plan: {plan_id: p-1}
servers:
  rec:
    command: [python, -c, pass]
    tools: {charge: {cost: 0.25}}
"""


class Toolgate:
    """Answers /v1/outcomes item by item (`refuse`: decision ids answered 409), or with
    `batch_status` for the whole batch; records every request."""

    def __init__(self, batch_status: int = 200, refuse: frozenset[str] = frozenset()) -> None:
        self.batch_status, self.refuse = batch_status, refuse
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append((request.url.path, body))
        if request.url.path == "/v1/outcomes":
            if self.batch_status != 200:
                return httpx.Response(self.batch_status, json={"error": {
                    "code": "not_found", "message": "no such route"}})
            return httpx.Response(200, json={"items": [
                {"decision_id": o["decision_id"], "status_code": 409, "error": {
                    "code": "outcome_conflict", "message": "another outcome is recorded"}}
                if o["decision_id"] in self.refuse else
                {"decision_id": o["decision_id"], "status_code": 201,
                 "outcome": {"status": o["status"]}}
                for o in body["outcomes"]]})
        decision_id = request.url.path.split("/")[3]
        return httpx.Response(201, json={"decision_id": decision_id, "status": body["status"]})


def _gate(toolgate: Toolgate) -> tuple[Gate, AsyncClient, Any]:
    config = load_config(CONFIG)
    client = AsyncClient("http://toolgate.test", "t", transport=httpx.MockTransport(toolgate))
    upstream = type("Up", (), {"name": "rec", "config": config.servers["rec"]})()
    return Gate(config, client, {}), client, upstream


async def test_reports_booked_together_go_in_one_request_in_order() -> None:
    toolgate = Toolgate()
    gate, client, upstream = _gate(toolgate)
    async with client:
        gate.book("d1", upstream, "charge", {"n": 1}, None)
        gate.book("d2", upstream, "charge", {"n": 2}, "upstream said no")
        gate.book("d3", upstream, "other", {"n": 3}, None)
        await gate.drain_reports()
    assert [path for path, _ in toolgate.requests] == ["/v1/outcomes"]
    assert toolgate.requests[0][1]["outcomes"] == [
        {"decision_id": "d1", "status": "succeeded", "cost": 0.25,
         "args_sha256": args_sha256({"n": 1})},
        {"decision_id": "d2", "status": "execution_failed", "cost": 0.25,
         "error": "upstream said no", "args_sha256": args_sha256({"n": 2})},
        {"decision_id": "d3", "status": "succeeded", "args_sha256": args_sha256({"n": 3})}]


async def test_a_report_alone_is_sent_at_once_and_a_later_one_in_the_next_request() -> None:
    toolgate = Toolgate()
    gate, client, upstream = _gate(toolgate)
    async with client:
        gate.book("d1", upstream, "charge", {}, None)
        await gate.drain_reports()
        gate.book("d2", upstream, "charge", {}, None)
        await gate.drain_reports()
    assert [[o["decision_id"] for o in body["outcomes"]] for _, body in toolgate.requests] \
        == [["d1"], ["d2"]]


async def test_more_than_a_batch_holds_are_split() -> None:
    toolgate = Toolgate()
    gate, client, upstream = _gate(toolgate)
    async with client:
        for n in range(REPORT_BATCH + 5):
            gate.book(f"d{n}", upstream, "charge", {}, None)
        await gate.drain_reports()
    sizes = [len(body["outcomes"]) for _, body in toolgate.requests]
    assert sizes == [REPORT_BATCH, 5]


@pytest.mark.parametrize("status", [404, 405, 413, 422])
async def test_a_batch_refused_whole_is_reported_one_by_one(status: int) -> None:
    toolgate = Toolgate(batch_status=status)
    gate, client, upstream = _gate(toolgate)
    async with client:
        gate.book("d1", upstream, "charge", {"n": 1}, None)
        gate.book("d2", upstream, "charge", {"n": 2}, "boom")
        await gate.drain_reports()
    singles = [(path, body) for path, body in toolgate.requests if path != "/v1/outcomes"]
    assert singles == [
        ("/v1/decisions/d1/outcome", {"status": "succeeded", "cost": 0.25,
                                      "args_sha256": args_sha256({"n": 1})}),
        ("/v1/decisions/d2/outcome", {"status": "execution_failed", "cost": 0.25,
                                      "error": "boom", "args_sha256": args_sha256({"n": 2})})]


async def test_a_refused_report_is_logged_with_its_decision(
        caplog: pytest.LogCaptureFixture) -> None:
    toolgate = Toolgate(refuse=frozenset({"d2"}))
    gate, client, upstream = _gate(toolgate)
    with caplog.at_level(logging.WARNING, logger="toolgate.gateway"):
        async with client:
            for n in (1, 2, 3):
                gate.book(f"d{n}", upstream, "charge", {}, None)
            await asyncio.wait_for(gate.drain_reports(), 10)
    warned = [r.getMessage() for r in caplog.records if "not reported" in r.getMessage()]
    assert len(warned) == 1 and "d2" in warned[0] and "outcome_conflict" in warned[0]
