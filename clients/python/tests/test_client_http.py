"""Client requests and answers against a scripted fake (httpx.MockTransport)."""

from __future__ import annotations

import json
import re

import httpx
import pytest

import toolgate_client
from _toolgate_client_testkit import (
    BASE_URL,
    TOKEN,
    WRITE_TOOL,
    FakeToolgate,
    allow_payload,
    deny_payload,
    envelope,
    make_client,
)
from toolgate_client import (
    CODES,
    Client,
    Decision,
    PlanReadOnlyError,
    SkillExecutionError,
    ToolgateDeny,
    ToolgateError,
    ToolgateRequestError,
    ToolgateUnavailableError,
    ToolRuntimeError,
    ToolSafetyViolationError,
    error_class_for,
    hierarchy_of,
)

EVERY_CODE = [(name, code) for name, codes in CODES.items() for code in codes]


def test_every_code_is_covered() -> None:
    assert len(EVERY_CODE) == 22  # rule_denied (SPEC §18), unregistered_tool (issue 45)


@pytest.mark.parametrize(("name", "code"), EVERY_CODE)
def test_enforce_raises_the_exact_class_for_every_code(name: str, code: str) -> None:
    details = {"error_type": "PERMISSION_DENIED"} if name == "SkillExecutionError" else {"k": code}
    payload = deny_payload(
        name,
        code,
        check=f"check-{code}",
        message=f"Tool 'fs.write' denied: {code} (plan 'p-1')",
        details=details,
        hierarchy=hierarchy_of(name),
    )
    fake = FakeToolgate(httpx.Response(200, json=payload))
    with make_client(fake) as client:
        with pytest.raises(ToolgateDeny) as info:
            client.enforce(plan_id="p-1", tool=WRITE_TOOL, context={"sandbox_id": None})
    exc = info.value
    assert type(exc) is error_class_for(name)
    assert type(exc).__name__ == name
    assert exc.code == code
    assert exc.message == payload["deny"]["message"] == str(exc)
    assert exc.decision_id == payload["decision_id"]
    assert exc.details == details
    assert exc.check == f"check-{code}"
    assert exc.hierarchy == hierarchy_of(name)
    assert exc.error == name
    assert isinstance(exc.decision, Decision) and exc.decision.allowed is False
    assert not isinstance(exc, ToolgateError)
    if name == "SkillExecutionError":
        assert exc.error_type == "PERMISSION_DENIED"
    if hierarchy_of(name)[0] == "ToolRuntimeError":
        assert isinstance(exc, ToolRuntimeError)
    else:
        assert not isinstance(exc, ToolRuntimeError)
    assert len(fake.requests) == 1  # a deny is an answer: never retried


@pytest.mark.parametrize(
    ("error", "hierarchy", "expected"),
    [
        ("ToolQuantumError", ["ToolRuntimeError", "ToolQuantumError"], ToolRuntimeError),
        ("ToolQuantumError", None, ToolRuntimeError),
        ("BrandNewTopLevelError", ["BrandNewTopLevelError"], ToolRuntimeError),
        (
            "ToolNewSafetyError",
            ["ToolRuntimeError", "ToolSafetyViolationError", "ToolNewSafetyError"],
            ToolSafetyViolationError,
        ),
    ],
)
def test_unknown_deny_class_fails_closed(error, hierarchy, expected) -> None:
    payload = deny_payload(error, "some_new_code", hierarchy=hierarchy or [error])
    if hierarchy is None:
        del payload["deny"]["hierarchy"]
    fake = FakeToolgate(httpx.Response(200, json=payload))
    with make_client(fake) as client:
        decision = client.authorize_tool(tool=WRITE_TOOL)
        assert decision.allowed is False
        with pytest.raises(expected) as info:
            client.enforce(tool=WRITE_TOOL)
    assert type(info.value) is expected
    assert info.value.code == "some_new_code"
    assert info.value.error == error
    assert info.value.decision_id == payload["decision_id"]


def test_enforce_returns_the_decision_when_allowed() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        decision = client.enforce(plan_id="p-1", tool={"name": "fs.read"})
    assert isinstance(decision, Decision)
    assert decision.allowed is True
    assert decision.decision_id == allow_payload()["decision_id"]


def test_authorize_tool_returns_a_deny_without_raising() -> None:
    fake = FakeToolgate(httpx.Response(200, json=deny_payload()))
    with make_client(fake) as client:
        decision = client.authorize_tool(plan_id="p-1", tool=WRITE_TOOL)
    assert decision.allowed is False
    assert decision.deny.error == "ToolSandboxRequiredError"
    assert decision.deny.code == "sandbox_required"


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, content=b"not json"),
        httpx.Response(200, content=b""),
        httpx.Response(200, json=[]),
        httpx.Response(200, json={"allowed": "true", "deny": None}),
        httpx.Response(200, json={"decision_id": "d", "allowed": False, "deny": None}),
        httpx.Response(200, content=b'{"allowed": true, "deny": {"error": "X"}}'),
    ],
)
def test_unparseable_answers_are_unavailable(response: httpx.Response) -> None:
    fake = FakeToolgate(response)
    with make_client(fake) as client:
        with pytest.raises(ToolgateUnavailableError):
            client.enforce(tool=WRITE_TOOL)
        with pytest.raises(ToolgateUnavailableError):
            client.authorize_tool(tool=WRITE_TOOL)


def test_authorize_tool_request_shape() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        client.authorize_tool(
            plan_id="p-1",
            tool=WRITE_TOOL,
            context={"sandbox_id": "sb-1", "metadata": {"human_approved": True}},
            layer="skill",
            explain=True,
            request_id="req-123",
        )
        client.authorize_tool(tool={"name": "fs.read"}, safety_profile={"require_sandbox": False})
    first, second = fake.requests
    assert first.method == "POST"
    assert str(first.url) == f"{BASE_URL}/v1/authorize-tool"
    assert first.headers["content-type"] == "application/json"
    assert first.headers["authorization"] == f"Bearer {TOKEN}"
    assert first.headers["x-request-id"] == "req-123"
    assert json.loads(first.content) == {
        "plan_id": "p-1",
        "tool": WRITE_TOOL,
        "context": {"sandbox_id": "sb-1", "metadata": {"human_approved": True}},
        "layer": "skill",
        "explain": True,
    }
    # None arguments are omitted; context defaults to {}; explain only when asked.
    assert json.loads(second.content) == {
        "tool": {"name": "fs.read"},
        "context": {},
        "safety_profile": {"require_sandbox": False},
    }
    assert re.fullmatch(r"[0-9a-f]{32}", second.headers["x-request-id"])


def test_request_ids_differ_between_calls() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        client.authorize_tool(tool={"name": "a"})
        client.authorize_tool(tool={"name": "a"})
    a, b = fake.request_ids()
    assert a != b


def test_decision_carries_the_request_id() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        decision = client.authorize_tool(tool={"name": "a"}, request_id="abc")
    assert decision.request_id == "abc"


def test_non_finite_numbers_are_refused_before_sending() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        with pytest.raises(ValueError):
            client.authorize_tool(tool={"name": "a"}, context={"accumulated_cost": float("nan")})
    assert fake.requests == []


def test_tool_must_be_a_mapping() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    with make_client(fake) as client:
        with pytest.raises(TypeError):
            client.enforce(tool="fs.write")  # type: ignore[arg-type]
    assert fake.requests == []


def test_authorize_tools_batch() -> None:
    items = [allow_payload(), deny_payload("ToolAccessDeniedError", "read_only", check="read_only")]
    fake = FakeToolgate(httpx.Response(200, json={"items": items}))
    reqs = [
        {"plan_id": "p-1", "tool": {"name": "fs.read"}},
        {"plan_id": "p-1", "tool": WRITE_TOOL, "context": {}},
    ]
    with make_client(fake) as client:
        decisions = client.authorize_tools(reqs)
    assert fake.last.url.path == "/v1/authorize-tools"
    assert fake.body() == {"requests": reqs}
    assert [d.allowed for d in decisions] == [True, False]
    assert decisions[1].deny.exception_class is toolgate_client.ToolAccessDeniedError
    assert all(d.request_id == fake.last.headers["x-request-id"] for d in decisions)


@pytest.mark.parametrize(
    "answer",
    [
        {"items": [allow_payload()]},  # fewer items than requests
        {"items": [allow_payload(), {"allowed": "yes"}]},  # one item unparseable
        {"decisions": []},
        [],
    ],
)
def test_authorize_tools_bad_answers_are_unavailable(answer) -> None:
    fake = FakeToolgate(httpx.Response(200, json=answer))
    with make_client(fake) as client:
        with pytest.raises(ToolgateUnavailableError):
            client.authorize_tools([{"tool": {"name": "a"}}, {"tool": {"name": "b"}}])


def test_plans_resolve_screen_errors() -> None:
    plan = {"plan_id": "p:1@x", "action_id": "a-1", "read_only": False}

    def route(request: httpx.Request) -> httpx.Response:
        key = (request.method, request.url.raw_path.decode())
        answers = {
            ("POST", "/v1/plans"): httpx.Response(201, json=plan),
            ("GET", "/v1/plans/p:1@x"): httpx.Response(200, json=plan),
            ("GET", "/v1/plans/a%2Fb"): httpx.Response(200, json=plan),
            ("POST", "/v1/resolve"): httpx.Response(200, json={"provenance": "global"}),
            ("POST", "/v1/screen"): httpx.Response(200, json={"rejected": True}),
            ("GET", "/v1/errors"): httpx.Response(200, json={"errors": []}),
        }
        return answers.get(key) or envelope(404, "not_found", str(key))

    fake = FakeToolgate(route)
    with make_client(fake) as client:
        assert client.create_plan("a-1", plan_id="p:1@x", automation_profile="strict") == plan
        assert fake.body() == {
            "action_id": "a-1",
            "plan_id": "p:1@x",
            "automation_profile": "strict",
        }
        client.create_plan("a-1", safety_profile={"require_sandbox": False})
        assert fake.body() == {"action_id": "a-1", "safety_profile": {"require_sandbox": False}}
        client.create_plan("a-1")
        assert fake.body() == {"action_id": "a-1"}
        assert client.get_plan("p:1@x") == plan
        assert client.get_plan("a/b") == plan  # path segment is quoted
        assert client.resolve(action_id="a-1", project="proj") == {"provenance": "global"}
        assert fake.body() == {"action_id": "a-1", "project": "proj"}
        assert client.resolve() == {"provenance": "global"}
        assert fake.body() == {}
        assert client.screen("please rm -rf /", skill="shell") == {"rejected": True}
        assert fake.body() == {"text": "please rm -rf /", "skill": "shell"}
        client.screen("hello")
        assert fake.body() == {"text": "hello"}
        assert client.errors() == {"errors": []}
        assert fake.last.content == b""
        with pytest.raises(ValueError):
            client.get_plan("")


def test_generic_request_helper() -> None:
    fake = FakeToolgate(
        httpx.Response(200, json={"items": [], "next_cursor": None}),
        httpx.Response(204),
    )
    with make_client(fake) as client:
        page = client.request("GET", "/v1/decisions", params={"limit": 5, "allowed": "false"})
        assert page == {"items": [], "next_cursor": None}
        assert fake.last.url.params["limit"] == "5"
        assert client.request("DELETE", "/v1/keys/k1") is None
        assert fake.last.method == "DELETE"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 422, 429])
def test_4xx_raise_request_error_and_are_not_retried(status: int) -> None:
    fake = FakeToolgate(envelope(status, f"code_{status}", "refused", field="tool.name"))
    with make_client(fake, retries=3) as client:
        with pytest.raises(ToolgateRequestError) as info:
            client.authorize_tool(tool={"name": "a"}, request_id="rid-4xx")
    err = info.value
    assert (err.status, err.code, err.message, err.details) == (
        status,
        f"code_{status}",
        "refused",
        {"field": "tool.name"},
    )
    assert err.request_id == "rid-4xx"
    assert not isinstance(err, (ToolgateDeny, ToolgateUnavailableError))
    assert len(fake.requests) == 1
    assert client.sleeps == []


def test_4xx_without_envelope() -> None:
    fake = FakeToolgate(httpx.Response(422, json={"detail": [{"loc": ["body", "tool"]}]}))
    with make_client(fake) as client:
        with pytest.raises(ToolgateRequestError) as info:
            client.authorize_tool(tool={"name": "a"})
    assert info.value.status == 422
    assert info.value.code == "http_422"
    fake = FakeToolgate(httpx.Response(400, content=b"<html>bad</html>"))
    with make_client(fake) as client:
        with pytest.raises(ToolgateRequestError) as info:
            client.errors()
    assert info.value.code == "http_400"


def test_409_plan_read_only_raises_plan_read_only_error() -> None:
    fake = FakeToolgate(
        envelope(
            409,
            "plan_read_only",
            "Plan 'p-ro' is read-only",
            plan_id="p-ro",
            decision_id="d-409",
        )
    )
    with make_client(fake) as client:
        with pytest.raises(PlanReadOnlyError) as info:
            client.request("POST", "/v1/plans/p-ro/execute", {})
    exc = info.value
    assert type(exc) is PlanReadOnlyError
    assert isinstance(exc, ToolgateDeny)
    assert not isinstance(exc, ToolgateRequestError)
    assert (exc.code, exc.message, exc.status) == (
        "plan_read_only",
        "Plan 'p-ro' is read-only",
        409,
    )
    assert exc.details["plan_id"] == "p-ro"
    assert exc.decision_id == "d-409"


def test_other_409_is_a_request_error() -> None:
    fake = FakeToolgate(envelope(409, "conflict", "plan exists with another body"))
    with make_client(fake) as client:
        with pytest.raises(ToolgateRequestError) as info:
            client.create_plan("a-1", plan_id="p-1")
    assert info.value.status == 409 and info.value.code == "conflict"


def test_500_is_unavailable_without_retry() -> None:
    fake = FakeToolgate(httpx.Response(500, text="boom"))
    with make_client(fake, retries=3) as client:
        with pytest.raises(ToolgateUnavailableError) as info:
            client.enforce(tool={"name": "a"})
    assert info.value.status == 500
    assert len(fake.requests) == 1


def test_redirect_is_unavailable() -> None:
    fake = FakeToolgate(httpx.Response(302, headers={"location": "http://elsewhere/"}))
    with make_client(fake) as client:
        with pytest.raises(ToolgateUnavailableError):
            client.enforce(tool={"name": "a"})


def test_token_and_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGATE_URL", "http://env-host:9000/")
    monkeypatch.setenv("TOOLGATE_TOKEN", "env-token")
    fake = FakeToolgate(httpx.Response(200, json={"errors": []}))
    with Client(transport=fake.transport) as client:
        assert client.base_url == "http://env-host:9000"
        assert "env-token" not in repr(client)
        client.errors()
    assert str(fake.last.url) == "http://env-host:9000/v1/errors"
    assert fake.last.headers["authorization"] == "Bearer env-token"


def test_defaults_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLGATE_URL", raising=False)
    monkeypatch.delenv("TOOLGATE_TOKEN", raising=False)
    fake = FakeToolgate(httpx.Response(200, json={"errors": []}))
    with Client(transport=fake.transport) as client:
        assert client.base_url == "http://127.0.0.1:8000"
        assert client.token is None
        client.errors()
    assert "authorization" not in fake.last.headers
    assert re.fullmatch(r"[0-9a-f]{32}", fake.last.headers["x-request-id"])


def test_base_url_with_a_path_prefix_and_extra_headers() -> None:
    fake = FakeToolgate(httpx.Response(200, json={"errors": []}))
    with Client(
        "http://gw.test/toolgate/",
        token="t",
        transport=fake.transport,
        headers={"X-Tenant": "acme"},
    ) as client:
        client.errors()
    assert str(fake.last.url) == "http://gw.test/toolgate/v1/errors"
    assert fake.last.headers["x-tenant"] == "acme"
    assert fake.last.headers["user-agent"].startswith("toolgate-client/")


def test_context_manager_closes_the_pool() -> None:
    fake = FakeToolgate(httpx.Response(200, json={"errors": []}))
    with make_client(fake) as client:
        pass
    assert client._http.is_closed


@pytest.mark.parametrize(
    "kwargs", [{"retries": -1}, {"retries": 1.5}, {"retries": True}, {"backoff": -0.1}]
)
def test_invalid_configuration(kwargs) -> None:
    with pytest.raises(ValueError):
        Client(BASE_URL, **kwargs)


def test_skill_layer_deny_carries_error_type() -> None:
    payload = deny_payload(
        "SkillExecutionError",
        "write_denied",
        check="write_guard",
        message=(
            "Write operation denied: tool 'fs.write' cannot write in read-only context (plan=p-1)"
        ),
        details={"error_type": "PERMISSION_DENIED"},
        hierarchy=["SkillExecutionError"],
    )
    fake = FakeToolgate(httpx.Response(200, json=payload))
    with make_client(fake) as client:
        with pytest.raises(SkillExecutionError) as info:
            client.enforce(plan_id="p-1", tool=WRITE_TOOL, layer="skill")
    assert info.value.error_type == "PERMISSION_DENIED"
    assert fake.body()["layer"] == "skill"
