"""Webhook URLs that point inside (SPEC §17), on SQLite and Postgres: refused at creation
(422 naming `url`, nothing stored) and again before each attempt, after resolution, so a
DNS answer that moves inside later sends nothing; allowed only by
TOOLGATE_WEBHOOK_ALLOW_HOSTS (hosts and CIDRs), and then sent to the address that was
checked. Attempts keep a status, a duration and a coarse reason, never an error's text."""

from __future__ import annotations

import ipaddress

import pytest
from sqlalchemy import update

from app.webhooks import guard
from app.webhooks.tables import Webhook
from tests.approvals.test_approvals import authorize, call, new_key, setup
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_webhooks import attempted, rounds

SECRET = "s3cret-s3cret-s3cret"
PUBLIC = "93.184.215.14"

INSIDE = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/hook",
    "http://10.0.0.1/hook",
    "http://192.168.1.10/hook",
    "http://172.16.0.1/hook",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://127.0.0.1:5432/",
    "http://localhost:8000/v1/keys",
    "http://0.0.0.0/hook",
    "http://2130706433/hook",        # 127.0.0.1 as one decimal integer
    "http://0x7f.1/hook",            # and in hex
    "http://0177.0.0.1/hook",        # and in octal
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[::]/hook",
    "http://224.0.0.1/hook",
    "http://100.100.100.200/latest/meta-data/",  # Alibaba's metadata, shared space
    "http://[fd00:ec2::254]/latest/meta-data/",   # AWS's metadata over IPv6
    "http://127.0.0.1\u3002:19199/",  # an ideographic full stop: IDNA reads it as a dot
    "http://127\uff0e0\uff0e0\uff0e1/hook",  # fullwidth full stops
    "http://\uff11\uff12\uff17.0.0.1/hook",  # fullwidth digits
    "http://[fec0::1]/hook",  # IPv6 site-local (deprecated, yet routed inside)
]


@pytest.mark.parametrize("url", INSIDE)
async def test_urls_inside_are_refused_at_creation(client, url):
    r = await client.put("/v1/webhooks/inside", json={
        "url": url, "events": ["decision.denied"], "secret": SECRET})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input"
    assert [f["field"] for f in error["details"]["fields"]] == ["url"]
    assert (await client.get("/v1/webhooks/inside")).status_code == 404


@pytest.mark.parametrize("url", ["http://user:pw-k3pt-s3cret@93.184.215.14/hook",
                                 "https://pw-k3pt-s3cret@93.184.215.14/hook"])
async def test_urls_with_credentials_are_refused(client, url):
    r = await client.put("/v1/webhooks/creds", json={
        "url": url, "events": ["decision.denied"], "secret": SECRET})
    assert r.status_code == 422, r.text
    assert "url" in r.text and "pw-k3pt-s3cret" not in r.text
    assert (await client.get("/v1/webhooks/creds")).status_code == 404
    assert "pw-k3pt-s3cret" not in (await client.get("/v1/decisions?kind=config")).text


async def test_credentials_of_a_row_stored_before_the_rule_are_never_shown(client):
    """A webhook stored before URLs with credentials were refused keeps its row, but no
    read shows the credentials (they are never sent either: see the delivery tests)."""
    r = await client.put("/v1/webhooks/old", json={
        "url": f"https://{PUBLIC}/hook", "events": ["decision.denied"], "secret": SECRET})
    assert r.status_code == 201, r.text
    async with client.app.state.sessions() as session, session.begin():
        await session.execute(update(Webhook).where(Webhook.name == "old").values(
            url=f"https://user:pw-k3pt-s3cret@{PUBLIC}/hook"))
    one, listed = await client.get("/v1/webhooks/old"), await client.get("/v1/webhooks")
    assert one.json()["url"] == f"https://***@{PUBLIC}/hook"
    assert "pw-k3pt-s3cret" not in one.text + listed.text
    assert (await client.delete("/v1/webhooks/old")).status_code == 204
    assert "pw-k3pt-s3cret" not in (await client.get("/v1/decisions?kind=config")).text


async def test_a_public_address_is_accepted(client):
    r = await client.put("/v1/webhooks/out", json={
        "url": f"https://{PUBLIC}/hook", "events": ["decision.denied"], "secret": SECRET})
    assert r.status_code == 201, r.text


async def test_a_name_resolving_inside_is_refused_at_creation(client, monkeypatch):
    async def inside(host, port):
        return [ipaddress.ip_address("10.1.2.3")]
    monkeypatch.setattr(guard, "resolve", inside)
    r = await client.put("/v1/webhooks/named", json={
        "url": "https://hooks.example.com/x", "events": ["decision.denied"],
        "secret": SECRET})
    assert r.status_code == 422, r.text
    assert "10.1.2.3" in r.json()["error"]["message"]


@pytest.fixture
def allowed(settings):
    """Loopback allowed as a network, the way local receivers are configured."""
    return settings.model_copy(update={"webhook_poll_seconds": 60,
                                       "webhook_allow_hosts": ["127.0.0.0/8", "hooks.test"]})


@pytest.fixture
async def allowed_client(allowed):
    from tests.conftest import app_client
    async with app_client(allowed) as c:
        yield c


async def test_allow_hosts_lets_a_local_receiver_in(allowed_client):
    client = allowed_client
    for url in ("http://127.0.0.1:9/hook", "http://2130706433:9/hook", "http://hooks.test/"):
        r = await client.put("/v1/webhooks/local", json={
            "url": url, "events": ["decision.denied"], "secret": SECRET})
        assert r.status_code in (200, 201), (url, r.text)
    r = await client.put("/v1/webhooks/local", json={
        "url": "http://10.0.0.1/hook", "events": ["decision.denied"], "secret": SECRET})
    assert r.status_code == 422, r.text


async def test_a_dns_answer_that_moves_inside_sends_nothing(client, monkeypatch):
    """Public when created, 127.0.0.1 when sent: the attempt is refused after resolution
    and the receiver on 127.0.0.1 never hears of it."""
    answers = {"now": PUBLIC}

    async def resolve(host, port):
        return [ipaddress.ip_address(answers["now"])]
    monkeypatch.setattr(guard, "resolve", resolve)
    with Receiver() as receiver:
        r = await client.put("/v1/webhooks/rebind", json={
            "url": f"http://rebind.example.com:{receiver.port}/hook",
            "events": ["decision.denied"], "secret": SECRET})
        assert r.status_code == 201, r.text
        answers["now"] = "127.0.0.1"
        agent = await new_key(client, "agent", principal="bot")
        plan = await setup(client, mode="client_flag")
        await authorize(client, agent, call(plan))
        await rounds(client, attempted(client, "rebind", 1))
        [delivery] = (await client.get("/v1/webhooks/rebind/deliveries")).json()["items"]
        assert delivery["state"] == "pending" and delivery["last_status"] is None
        assert delivery["history"][0]["error"] == "refused: the address is not allowed"
        assert receiver.received == []


async def test_the_checked_address_is_the_one_connected_to(allowed_client, monkeypatch):
    """A name the machine cannot resolve, answered 127.0.0.1 by the guard's resolution:
    the receiver gets the POST with the URL's own Host, so nothing resolved it twice."""
    client = allowed_client

    async def resolve(host, port):
        assert host == "hooks.test"
        return [ipaddress.ip_address("127.0.0.1")]
    monkeypatch.setattr(guard, "resolve", resolve)
    with Receiver() as receiver:
        r = await client.put("/v1/webhooks/named", json={
            "url": f"http://hooks.test:{receiver.port}/hook",
            "events": ["decision.denied"], "secret": SECRET})
        assert r.status_code == 201, r.text
        agent = await new_key(client, "agent", principal="bot")
        plan = await setup(client, mode="client_flag")
        await authorize(client, agent, call(plan))
        await rounds(client, lambda: len(receiver.received) == 1)
        headers = {k.lower(): v for k, v in receiver.received[0]["headers"].items()}
        assert headers["host"] == f"hooks.test:{receiver.port}"


async def test_attempts_keep_no_connection_error_text(allowed_client):
    """Nothing listens on the port: the attempt says "no answer", not the OS's words."""
    from tests.serving import free_port
    client = allowed_client
    port = free_port()
    await client.put("/v1/webhooks/closed", json={
        "url": f"http://127.0.0.1:{port}/hook", "events": ["decision.denied"],
        "secret": SECRET})
    agent = await new_key(client, "agent", principal="bot")
    plan = await setup(client, mode="client_flag")
    await authorize(client, agent, call(plan))
    await rounds(client, attempted(client, "closed", 1))
    [delivery] = (await client.get("/v1/webhooks/closed/deliveries")).json()["items"]
    assert delivery["history"][0]["error"] == "no answer"
    assert delivery["last_error"] == "no answer"
    assert delivery["history"][0]["status"] is None


@pytest.mark.parametrize(("address", "inside"), [
    ("8.8.8.8", False), (PUBLIC, False), ("2606:4700:4700::1111", False),
    ("127.0.0.2", True), ("10.255.0.1", True), ("169.254.169.254", True),
    ("100.64.0.1", True), ("::1", True), ("fe80::1", True), ("fc00::1", True),
    ("::ffff:10.0.0.1", True), ("2002:7f00:1::", True), ("64:ff9b::a00:1", True),
    ("ff02::1", True), ("0.0.0.0", True), ("240.0.0.1", True), ("fec0::1", True),
])
def test_inside_addresses(address, inside):
    assert guard.inside(ipaddress.ip_address(address)) is inside


def test_the_allow_list_takes_hosts_and_networks():
    allow = guard.AllowList.parse(["127.0.0.0/8", " Receiver.Test ", "[::1]", ""])
    assert allow.allows_host("receiver.test")
    assert allow.allows_address(ipaddress.ip_address("127.9.9.9"))
    assert allow.allows_address(ipaddress.ip_address("::1"))
    assert not allow.allows_address(ipaddress.ip_address("10.0.0.1"))


@pytest.fixture
async def impatient_client(settings):
    """Writes wait at most 0.5 s for a lock (a write blocked behind another fails fast)."""
    from tests.conftest import app_client
    async with app_client(settings.model_copy(update={"db_timeout_seconds": 0.5})) as c:
        yield c


async def test_a_slow_dns_answer_at_creation_holds_no_write_lock(impatient_client,
                                                                 monkeypatch):
    """The URL is checked (resolved: up to guard.RESOLVE_SECONDS) before the change's write
    transaction begins: on SQLite that transaction holds the database's write lock, which
    the decision log's writer and every other change wait for. Before, a name that took
    seconds to resolve held it that long: a change made meanwhile failed (503)."""
    import asyncio
    client = impatient_client
    resolving, answer = asyncio.Event(), asyncio.Event()

    async def slow(host, port):
        resolving.set()
        await answer.wait()
        return [ipaddress.ip_address(PUBLIC)]
    monkeypatch.setattr(guard, "resolve", slow)
    creating = asyncio.create_task(client.put("/v1/webhooks/slow", json={
        "url": "https://slow.example.com/hook", "events": ["decision.denied"],
        "secret": SECRET}))
    try:
        await asyncio.wait_for(resolving.wait(), 30)
        # While the name resolves (longer than any write waits for a lock), other changes
        # go through.
        r = await client.put("/v1/actions/meanwhile", json={"project": "web"})
        assert r.status_code in (200, 201), r.text
    finally:
        answer.set()
    r = await creating
    assert r.status_code == 201, r.text
    assert (await client.get("/v1/webhooks/slow")).json()["url"] == \
        "https://slow.example.com/hook"


async def test_a_nul_in_the_secret_is_refused_by_the_strict_bodies_rule(client):
    """Issue 45 item 16: schemathesis found PUT /v1/webhooks/{name} with a NUL in `secret`
    answered 503 on PostgreSQL (which cannot store it). Every Strict body refuses NUL in
    its strings now (app/kit/schemas.py): 422 naming the field, nothing stored, on both."""
    r = await client.put("/v1/webhooks/nul", json={
        "url": f"http://{PUBLIC}/hook", "events": ["decision.denied"],
        "secret": SECRET + "\x00"})
    assert r.status_code == 422, r.text
    assert [f["field"] for f in r.json()["error"]["details"]["fields"]] == ["secret"]
    assert (await client.get("/v1/webhooks/nul")).status_code == 404
