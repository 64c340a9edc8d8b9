"""Webhooks are independent (SPEC §17), on SQLite and Postgres: a receiver that accepts the
connection and never answers delays only its own deliveries, each attempt ends at the
per-attempt deadline; delivered rows are pruned after the retention by the job that
delivers."""

from __future__ import annotations

import asyncio
import socket
import threading
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.store.base import utcnow
from app.webhooks.tables import WebhookDelivery
from tests.approvals.test_approvals import authorize, call, new_key, setup
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_webhooks import attempted, rounds

SECRET = "s3cret-s3cret-s3cret"


class Silent:
    """Accepts connections on 127.0.0.1, reads what comes and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.accepted = threading.Event()
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.accepted.set()

    def __enter__(self) -> Silent:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def with_timeout(settings, seconds: float):
    return settings.model_copy(update={"webhook_poll_seconds": 60,
                                       "webhook_timeout_seconds": seconds,
                                       "webhook_allow_hosts": ["127.0.0.1"]})


@pytest.fixture
def settings(settings):
    # Far longer than the test takes: the healthy receiver must be served while the silent
    # one's first attempt is still open, not after it timed out.
    return with_timeout(settings, 120)


async def test_a_silent_receiver_does_not_hold_a_healthy_one(client):
    with Silent() as silent, Receiver() as healthy:
        for name, url in (("silent", silent.url), ("healthy", healthy.url)):
            r = await client.put(f"/v1/webhooks/{name}", json={
                "url": url, "events": ["decision.denied"], "secret": SECRET})
            assert r.status_code == 201, r.text
        agent = await new_key(client, "agent", principal="bot")
        plan = await setup(client, mode="client_flag")
        for n in range(5):
            await authorize(client, agent, call(plan, args={"n": n}))
        # Bounded by wait_for: before, the round itself waited on the silent receiver.
        await asyncio.wait_for(
            rounds(client, lambda: len(healthy.events()) == 5 and silent.accepted.is_set()),
            timeout=90)
        await asyncio.wait_for(rounds(client, attempted(client, "healthy", 5)), timeout=90)
        # The healthy receiver got everything while the silent one still holds its first
        # attempt open: nothing of the silent webhook was recorded yet.
        silent_items = (await client.get("/v1/webhooks/silent/deliveries")).json()["items"]
        assert len(silent_items) == 5
        assert all(d["attempts"] == 0 and d["state"] == "pending" for d in silent_items)
        healthy_items = (await client.get("/v1/webhooks/healthy/deliveries")).json()["items"]
        assert all(d["state"] == "delivered" for d in healthy_items)


@pytest.fixture
async def short_client(settings):
    from tests.conftest import app_client
    async with app_client(with_timeout(settings, 0.5)) as c:
        yield c


async def test_an_attempt_ends_at_its_deadline(short_client):
    client = short_client
    with Silent() as silent:
        await client.put("/v1/webhooks/silent", json={
            "url": silent.url, "events": ["decision.denied"], "secret": SECRET})
        agent = await new_key(client, "agent", principal="bot")
        plan = await setup(client, mode="client_flag")
        await authorize(client, agent, call(plan))
        await rounds(client, attempted(client, "silent", 1))
        [delivery] = (await client.get("/v1/webhooks/silent/deliveries")).json()["items"]
        first = delivery["history"][0]
        assert first["error"] == "timeout" and first["status"] is None
        assert first["duration_ms"] >= 500
        assert delivery["state"] == "pending"


async def test_delivered_rows_are_pruned_after_the_retention(client):
    with Receiver() as receiver:
        await client.put("/v1/webhooks/ops", json={
            "url": receiver.url, "events": ["decision.denied"], "secret": SECRET})
        agent = await new_key(client, "agent", principal="bot")
        plan = await setup(client, mode="client_flag")
        for n in range(3):
            await authorize(client, agent, call(plan, args={"n": n}))
        await rounds(client, attempted(client, "ops", 3))
        items = (await client.get("/v1/webhooks/ops/deliveries")).json()["items"]
        old, kept, recent = (i["id"] for i in items)
        now = utcnow()
        async with client.app.state.sessions() as session, session.begin():
            for row_id, age in ((old, 31), (kept, 29)):
                await session.execute(update(WebhookDelivery)
                                      .where(WebhookDelivery.id == row_id)
                                      .values(delivered_at=now - timedelta(days=age)))
        client.app.state.background.webhooks.dispatcher.prune_every = 0
        await client.app.state.background.run_once()
        async with client.app.state.sessions() as session:
            left = set((await session.execute(select(WebhookDelivery.id))).scalars())
        assert left == {kept, recent}
