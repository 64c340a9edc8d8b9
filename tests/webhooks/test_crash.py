"""Webhooks through a crash (SPEC §10: at least once, from a durable outbox): events made
while the receiver is down, the server killed with SIGKILL with deliveries pending,
restarted, the receiver back: every event arrives, signed, and the deliveries list shows
it delivered."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from tests.serving import free_port, serve, stop
from tests.webhooks.receiver import Receiver, verify

pytestmark = pytest.mark.slow

TOKEN = "webhook-crash-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
SECRET = "crash-test-secret-value"
WRITER = {"writes": True, "checkpointable": True, "unsafe": False}


def _until(check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def test_every_event_is_delivered_after_a_sigkill(database_url, tmp_path):
    port = free_port()  # nothing listens there yet: the receiver is down
    env = {"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": TOKEN,
           "TOOLGATE_WEBHOOK_POLL_SECONDS": "0.2", "TOOLGATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}
    proc, url = serve(env, tmp_path / "server.log")
    try:
        with httpx.Client(base_url=url, headers=ADMIN, timeout=10) as c:
            c.put("/v1/webhooks/ops", json={
                "url": f"http://127.0.0.1:{port}/hook", "secret": SECRET,
                "events": ["approval.pending", "decision.denied"]}).raise_for_status()
            c.put("/v1/projects/ops/settings",
                  json={"approval_mode": "server"}).raise_for_status()
            c.put("/v1/actions/deploy", json={"project": "ops", "safety_profile": {
                "require_human_approval": True, "require_sandbox": False,
                "require_checkpoints": False}}).raise_for_status()
            plan = c.post("/v1/plans", json={"action_id": "deploy"}).json()["plan_id"]
            denied = []
            for n in range(10):  # 10 denies, each with a new pending approval
                r = c.post("/v1/authorize-tool", json={"plan_id": plan, "tool": {
                    "name": "deploy", "capability": WRITER, "args": {"n": n}}})
                assert r.json()["allowed"] is False
                denied.append(r.json())
            # Wait until every event was tried at least once (and failed).
            def tried() -> bool:
                items = c.get("/v1/webhooks/ops/deliveries?limit=100").json()["items"]
                return len(items) == 20 and all(i["attempts"] >= 1 for i in items)
            _until(tried)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            stop(proc)

    with Receiver(port) as receiver:
        proc, url = serve(env, tmp_path / "server.log")
        try:
            expected = {d["decision_id"] for d in denied} | {
                d["deny"]["details"]["approval"]["approval_id"] for d in denied}
            def arrived() -> set[str]:
                return {e["data"].get("decision_id") if e["event"] == "decision.denied"
                        else e["data"]["approval_id"] for e in receiver.events()}
            # Retries back off (1, 2, 4 s...): bounded by the backoff, not by luck.
            _until(lambda: expected <= arrived(), timeout=90)
            assert all(verify(SECRET, r) for r in receiver.received)
            with httpx.Client(base_url=url, headers=ADMIN, timeout=10) as c:
                _until(lambda: all(i["state"] == "delivered" for i in c.get(
                    "/v1/webhooks/ops/deliveries?limit=100").json()["items"]))
                items = c.get("/v1/webhooks/ops/deliveries?limit=100").json()["items"]
                assert len(items) == 20
                assert all(i["history"][-1]["status"] == 200 for i in items)
        finally:
            stop(proc)
