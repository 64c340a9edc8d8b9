"""Retries: only connection errors, timeouts and 502/503/504; bounded; same X-Request-ID."""

from __future__ import annotations

import httpx
import pytest

from _toolgate_client_testkit import (
    FakeToolgate,
    allow_payload,
    envelope,
    make_client,
)
from toolgate_client import Client, ToolgateRequestError, ToolgateUnavailableError


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError("connection refused"),
        httpx.ConnectTimeout("connect timeout"),
        httpx.ReadTimeout("read timeout"),
        httpx.RemoteProtocolError("server disconnected"),
        httpx.ReadError("connection reset"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transport_failure_then_success(failure: Exception) -> None:
    fake = FakeToolgate(failure, httpx.Response(200, json=allow_payload()))
    with make_client(fake, retries=2) as client:
        decision = client.enforce(tool={"name": "fs.read"}, plan_id="p-1")
    assert decision.allowed is True
    assert len(fake.requests) == 2
    assert len(client.sleeps) == 1
    ids = fake.request_ids()
    assert ids[0] == ids[1]
    assert fake.requests[0].content == fake.requests[1].content


@pytest.mark.parametrize("status", [502, 503, 504])
def test_retryable_status_then_success(status: int) -> None:
    fake = FakeToolgate(
        envelope(status, "unavailable"),
        envelope(status, "unavailable"),
        httpx.Response(200, json=allow_payload()),
    )
    with make_client(fake, retries=2) as client:
        assert client.enforce(tool={"name": "a"}, request_id="fixed-id").allowed is True
    assert len(fake.requests) == 3
    assert fake.request_ids() == ["fixed-id"] * 3


@pytest.mark.parametrize("retries", [0, 1, 2, 5])
def test_503_every_time_is_unavailable_after_retries(retries: int) -> None:
    fake = FakeToolgate(envelope(503, "storage_unavailable", "database unreachable"))
    with make_client(fake, retries=retries) as client:
        with pytest.raises(ToolgateUnavailableError) as info:
            client.enforce(tool={"name": "a"})
    err = info.value
    assert err.status == 503
    assert err.code == "storage_unavailable"
    assert "database unreachable" in err.message
    assert len(fake.requests) == retries + 1
    assert len(client.sleeps) == retries
    assert len(set(fake.request_ids())) == 1
    assert err.request_id == fake.request_ids()[0]


def test_connection_error_every_time_is_unavailable() -> None:
    fake = FakeToolgate(httpx.ConnectError("connection refused"))
    with make_client(fake, retries=2) as client:
        with pytest.raises(ToolgateUnavailableError) as info:
            client.authorize_tool(tool={"name": "a"})
    assert info.value.status is None
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert len(fake.requests) == 3
    assert len(set(fake.request_ids())) == 1


def test_4xx_after_a_retry_is_not_retried_further() -> None:
    fake = FakeToolgate(
        httpx.ConnectError("refused"),
        envelope(422, "invalid_input", "tool.name is required"),
        httpx.Response(200, json=allow_payload()),
    )
    with make_client(fake, retries=5) as client:
        with pytest.raises(ToolgateRequestError):
            client.enforce(tool={"name": "a"})
    assert len(fake.requests) == 2


def test_unsupported_protocol_is_not_retried() -> None:
    with Client("ftp://toolgate.test", token="t", backoff=0) as client:
        with pytest.raises(ToolgateUnavailableError):
            client.errors()


def test_backoff_is_exponential_with_jitter_and_bounded() -> None:
    fake = FakeToolgate(httpx.ConnectError("refused"))
    with make_client(fake, retries=4, backoff=0.1) as client:
        with pytest.raises(ToolgateUnavailableError):
            client.errors()
    assert len(client.sleeps) == 4
    for attempt, delay in enumerate(client.sleeps):
        ceiling = 0.1 * 2**attempt
        assert ceiling / 2 <= delay <= ceiling
    with make_client(FakeToolgate(httpx.ConnectError("x")), retries=12, backoff=1.0) as client:
        with pytest.raises(ToolgateUnavailableError):
            client.errors()
    assert max(client.sleeps) <= 2.0


def test_real_sleep_is_used_by_default() -> None:
    import time

    client = Client("http://toolgate.test", token="t")
    try:
        assert client._sleep is time.sleep
    finally:
        client.close()
