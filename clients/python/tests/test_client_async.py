"""AsyncClient: same API, awaitable. Every test is marked explicitly (no asyncio_mode reliance)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from _toolgate_client_testkit import (
    BASE_URL,
    TOKEN,
    WRITE_TOOL,
    FakeToolgate,
    allow_payload,
    deny_payload,
    envelope,
    make_async_client,
)
from toolgate_client import (
    CODES,
    AsyncClient,
    PlanReadOnlyError,
    ToolgateDeny,
    ToolgateRequestError,
    ToolgateUnavailableError,
    ToolRuntimeError,
    ToolSandboxRequiredError,
    error_class_for,
    hierarchy_of,
)


@pytest.mark.asyncio
async def test_enforce_allowed_and_request_shape() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    async with make_async_client(fake) as client:
        decision = await client.enforce(plan_id="p-1", tool={"name": "fs.read"}, explain=True)
    assert decision.allowed is True
    assert fake.last.url == httpx.URL(f"{BASE_URL}/v1/authorize-tool")
    assert fake.last.headers["authorization"] == f"Bearer {TOKEN}"
    assert fake.body() == {
        "plan_id": "p-1",
        "tool": {"name": "fs.read"},
        "context": {},
        "explain": True,
    }
    assert client._http.is_closed


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "code"), [(n, c) for n, cs in CODES.items() for c in cs])
async def test_enforce_raises_exact_class(name: str, code: str) -> None:
    fake = FakeToolgate(
        httpx.Response(200, json=deny_payload(name, code, hierarchy=hierarchy_of(name)))
    )
    async with make_async_client(fake) as client:
        with pytest.raises(ToolgateDeny) as info:
            await client.enforce(tool=WRITE_TOOL)
    assert type(info.value) is error_class_for(name)
    assert info.value.code == code


@pytest.mark.asyncio
async def test_unknown_class_fails_closed() -> None:
    fake = FakeToolgate(
        httpx.Response(
            200, json=deny_payload("ToolQuantumError", "q", hierarchy=["ToolQuantumError"])
        )
    )
    async with make_async_client(fake) as client:
        with pytest.raises(ToolRuntimeError) as info:
            await client.enforce(tool=WRITE_TOOL)
    assert type(info.value) is ToolRuntimeError
    assert info.value.error == "ToolQuantumError"


@pytest.mark.asyncio
async def test_retry_then_success_keeps_request_id() -> None:
    fake = FakeToolgate(
        httpx.ConnectError("refused"),
        envelope(503, "unavailable"),
        httpx.Response(200, json=allow_payload()),
    )
    async with make_async_client(fake, retries=2) as client:
        assert (await client.enforce(tool={"name": "a"})).allowed
    assert len(fake.requests) == 3
    assert len(set(fake.request_ids())) == 1
    assert len(client.sleeps) == 2


@pytest.mark.asyncio
async def test_503_forever_is_unavailable() -> None:
    fake = FakeToolgate(envelope(503, "unavailable"))
    async with make_async_client(fake, retries=3) as client:
        with pytest.raises(ToolgateUnavailableError) as info:
            await client.enforce(tool={"name": "a"})
    assert info.value.status == 503
    assert len(fake.requests) == 4


@pytest.mark.asyncio
async def test_timeouts_forever_are_unavailable() -> None:
    fake = FakeToolgate(httpx.ReadTimeout("slow"))
    async with make_async_client(fake, retries=1) as client:
        with pytest.raises(ToolgateUnavailableError):
            await client.authorize_tool(tool={"name": "a"})
    assert len(fake.requests) == 2


@pytest.mark.asyncio
async def test_4xx_not_retried() -> None:
    fake = FakeToolgate(envelope(404, "not_found", "plan 'nope' does not exist"))
    async with make_async_client(fake, retries=3) as client:
        with pytest.raises(ToolgateRequestError) as info:
            await client.enforce(plan_id="nope", tool={"name": "a"})
    assert info.value.status == 404
    assert len(fake.requests) == 1


@pytest.mark.asyncio
async def test_409_plan_read_only() -> None:
    fake = FakeToolgate(envelope(409, "plan_read_only", "read-only"))
    async with make_async_client(fake) as client:
        with pytest.raises(PlanReadOnlyError):
            await client.request("POST", "/v1/plans/p/execute", {})


@pytest.mark.asyncio
async def test_other_methods() -> None:
    def route(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/authorize-tools":
            return httpx.Response(200, json={"items": [allow_payload(), deny_payload()]})
        if path == "/v1/errors":
            return httpx.Response(200, json={"errors": [{"error": "ToolRuntimeError"}]})
        return httpx.Response(200, json={"path": path})

    fake = FakeToolgate(route)
    async with make_async_client(fake) as client:
        decisions = await client.authorize_tools([{"tool": {"name": "a"}}, {"tool": WRITE_TOOL}])
        assert [d.allowed for d in decisions] == [True, False]
        assert (await client.create_plan("a-1", plan_id="p-1")) == {"path": "/v1/plans"}
        assert fake.body() == {"action_id": "a-1", "plan_id": "p-1"}
        assert (await client.get_plan("p-1")) == {"path": "/v1/plans/p-1"}
        assert (await client.resolve(plan_id="p-1")) == {"path": "/v1/resolve"}
        assert fake.body() == {"plan_id": "p-1"}
        assert (await client.screen("rm -rf", skill="sh")) == {"path": "/v1/screen"}
        assert fake.body() == {"text": "rm -rf", "skill": "sh"}
        assert (await client.errors())["errors"][0]["error"] == "ToolRuntimeError"


@pytest.mark.asyncio
async def test_async_guard_and_guarded() -> None:
    fake = FakeToolgate(
        httpx.Response(200, json=allow_payload()),
        httpx.Response(200, json=deny_payload()),
        httpx.Response(200, json=allow_payload()),
        httpx.Response(200, json=deny_payload()),
    )
    calls = []
    async with make_async_client(fake) as client:

        @client.guard(
            tool=lambda path: {"name": "fs.write", "args": {"output": path}}, plan_id="p-1"
        )
        async def write(path: str) -> str:
            calls.append(path)
            return "ok"

        assert await write("/a") == "ok"
        with pytest.raises(ToolSandboxRequiredError):
            await write("/b")
        assert calls == ["/a"]
        assert fake.body(0)["tool"] == {"name": "fs.write", "args": {"output": "/a"}}

        async with client.guarded(tool={"name": "fs.read"}) as decision:
            assert decision.allowed
        with pytest.raises(ToolSandboxRequiredError):
            async with client.guarded(tool=WRITE_TOOL):
                calls.append("never")
    assert calls == ["/a"]


@pytest.mark.asyncio
async def test_async_guard_refuses_sync_functions() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    async with make_async_client(fake) as client:
        with pytest.raises(TypeError):

            @client.guard(tool={"name": "a"})
            def sync_fn() -> None:  # pragma: no cover - never called
                pass


@pytest.mark.asyncio
async def test_sync_client_guard_in_event_loop_runs_in_thread() -> None:
    from _toolgate_client_testkit import make_client

    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:

        @client.guard(tool={"name": "a"})
        async def act() -> int:
            return 1

        assert await act() == 1


def test_async_client_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGATE_URL", "http://env:1")
    monkeypatch.setenv("TOOLGATE_TOKEN", "tok")
    client = AsyncClient()
    try:
        assert client.base_url == "http://env:1"
        assert client.token == "tok"
        assert client._default_headers["Authorization"] == "Bearer tok"
    finally:
        asyncio.run(client.aclose())
