"""client.guard(...) decorator and client.guarded(...) context manager (sync Client)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from _toolgate_client_testkit import (
    WRITE_TOOL,
    FakeToolgate,
    allow_payload,
    deny_payload,
    make_client,
)
from toolgate_client import (
    ToolAccessDeniedError,
    ToolExecutionError,
    ToolgateUnavailableError,
    ToolSandboxRequiredError,
)


def test_guard_allows_and_runs() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    calls = []
    with make_client(fake) as client:

        @client.guard(tool={"name": "fs.read"}, plan_id="p-1", context={"sandbox_id": "sb"})
        def read(path: str) -> str:
            calls.append(path)
            return f"content of {path}"

        assert read("/tmp/a") == "content of /tmp/a"
    assert calls == ["/tmp/a"]
    assert fake.body() == {
        "tool": {"name": "fs.read"},
        "plan_id": "p-1",
        "context": {"sandbox_id": "sb"},
    }
    assert read.__name__ == "read"


def test_guard_denies_and_does_not_run() -> None:
    fake = FakeToolgate(httpx.Response(200, json=deny_payload()))
    calls = []
    with make_client(fake) as client:

        @client.guard(tool=WRITE_TOOL, plan_id="p-1")
        def write(path: str, data: str) -> None:
            calls.append(path)

        with pytest.raises(ToolSandboxRequiredError):
            write("/tmp/a", "x")
    assert calls == []


def test_guard_unavailable_does_not_run() -> None:
    fake = FakeToolgate(httpx.ConnectError("refused"))
    calls = []
    with make_client(fake, retries=1) as client:

        @client.guard(tool=WRITE_TOOL)
        def write() -> None:
            calls.append(1)

        with pytest.raises(ToolgateUnavailableError):
            write()
    assert calls == []


def test_guard_with_builders_from_the_function_arguments() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:

        @client.guard(
            tool=lambda path, **_: {
                "name": "fs.write",
                "capability": {"writes": True, "checkpointable": True, "unsafe": False},
                "args": {"output": path},
            },
            plan_id=lambda plan: plan,  # only the arguments it names are passed
            context=lambda sandbox, dry_run: {"sandbox_id": sandbox, "dry_run": dry_run},
        )
        def write(plan, path, data, *, sandbox="sb-default", dry_run=False, **extra):
            return (plan, path, data, sandbox, dry_run, extra)

        assert write("p-9", "/work/out.txt", "x", dry_run=True, note="n") == (
            "p-9",
            "/work/out.txt",
            "x",
            "sb-default",
            True,
            {"note": "n"},
        )
    assert fake.body() == {
        "tool": {
            "name": "fs.write",
            "capability": {"writes": True, "checkpointable": True, "unsafe": False},
            "args": {"output": "/work/out.txt"},
        },
        "plan_id": "p-9",
        "context": {"sandbox_id": "sb-default", "dry_run": True},
    }


def test_guard_extra_kwargs_reach_kwargs_builders() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:

        @client.guard(tool=lambda **kw: {"name": kw["tool_name"]}, safety_profile=lambda **kw: None)
        def run(**kwargs):
            return kwargs

        assert run(tool_name="shell.exec") == {"tool_name": "shell.exec"}
    assert fake.body() == {"tool": {"name": "shell.exec"}, "context": {}}


def test_guard_on_a_method() -> None:
    fake = FakeToolgate(
        httpx.Response(200, json=deny_payload("ToolAccessDeniedError", "read_only"))
    )
    with make_client(fake) as client:

        class Agent:
            plan = "p-ro"

            @client.guard(tool=WRITE_TOOL, plan_id=lambda self: self.plan)
            def write(self) -> str:
                return "wrote"

        with pytest.raises(ToolAccessDeniedError):
            Agent().write()
    assert fake.body()["plan_id"] == "p-ro"


def test_each_guarded_call_enforces_again() -> None:
    fake = FakeToolgate(
        httpx.Response(200, json=allow_payload()),
        httpx.Response(200, json=deny_payload()),
    )
    with make_client(fake) as client:

        @client.guard(tool=WRITE_TOOL)
        def write() -> str:
            return "ok"

        assert write() == "ok"
        with pytest.raises(ToolSandboxRequiredError):
            write()
    assert len(fake.requests) == 2
    assert len(set(fake.request_ids())) == 2


def test_sync_client_guards_async_functions() -> None:
    fake = FakeToolgate(
        httpx.Response(200, json=allow_payload()), httpx.Response(200, json=deny_payload())
    )
    calls = []
    with make_client(fake) as client:

        @client.guard(tool=lambda name: {"name": name})
        async def act(name: str) -> str:
            calls.append(name)
            return name.upper()

        assert asyncio.run(act("fs.read")) == "FS.READ"
        with pytest.raises(ToolSandboxRequiredError):
            asyncio.run(act("fs.write"))
    assert calls == ["fs.read"]
    assert [r.url.path for r in fake.requests] == ["/v1/authorize-tool"] * 2


def test_guard_needs_a_tool() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        with pytest.raises(TypeError):
            client.guard(tool=None)  # type: ignore[arg-type]


def test_guarded_context_manager() -> None:
    fake = FakeToolgate(
        httpx.Response(200, json=allow_payload()), httpx.Response(200, json=deny_payload())
    )
    ran = []
    with make_client(fake) as client:
        with client.guarded(
            tool={"name": "fs.read"}, plan_id="p-1", context={"sandbox_id": "s"}
        ) as decision:
            ran.append(decision)
        assert ran[0].allowed is True
        with pytest.raises(ToolSandboxRequiredError) as info:
            with client.guarded(tool=WRITE_TOOL, plan_id="p-1", request_id="rid-g"):
                ran.append("should not run")
    assert len(ran) == 1
    assert info.value.decision.request_id == "rid-g"
    assert fake.body(0) == {
        "tool": {"name": "fs.read"},
        "plan_id": "p-1",
        "context": {"sandbox_id": "s"},
    }


def test_guarded_does_not_swallow_body_exceptions() -> None:
    # SPEC §11: reported as execution_failed, re-raised as ToolExecutionError with the
    # original as its cause; with report=False the original passes through untouched.
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        with pytest.raises(ToolExecutionError) as info:
            with client.guarded(tool={"name": "fs.read"}):
                raise KeyError("boom")
        assert isinstance(info.value.__cause__, KeyError)
        assert info.value.code == "execution_failed"
        with pytest.raises(KeyError):
            with client.guarded(tool={"name": "fs.read"}, report=False):
                raise KeyError("boom")
    assert [body["status"] for _, body in fake.outcomes] == ["execution_failed"]
