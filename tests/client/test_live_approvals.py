"""The client's side of approvals held by the service (SPEC §10) against a real toolgate:
`enforce(..., wait_for_approval=S)` waits for a person and retries once granted, and raises
ToolHumanApprovalRequiredError carrying the approval when it is rejected or the wait runs
out; an approver works the queue with the same client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time

import pytest
from toolgate_client import AsyncClient, Client, ToolHumanApprovalRequiredError

from tests.serving import TOOLGATE, serve, stop

pytestmark = pytest.mark.slow

TOKEN = "client-approvals-admin-token"
WRITER = {"writes": True, "checkpointable": True, "unsafe": False}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("approvals")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{directory}/t.db",
                       "TOOLGATE_ADMIN_TOKEN": TOKEN}, directory / "server.log")
    try:
        with Client(url, token=TOKEN, timeout=10) as admin:
            admin.request("PUT", "/v1/projects/ops/settings", {"approval_mode": "server"})
            admin.request("PUT", "/v1/actions/deploy", {"project": "ops", "safety_profile": {
                "require_human_approval": True, "require_sandbox": False,
                "require_checkpoints": False}})
            agent = admin.request("POST", "/v1/keys", {"name": "bot", "role": "agent",
                                                       "projects": ["ops"],
                                                       "principal": "bot"})["key"]
            approver = admin.request("POST", "/v1/keys", {"name": "alice", "role": "approver",
                                                          "projects": ["ops"],
                                                          "principal": "alice"})["key"]
        yield url, agent, approver
    finally:
        stop(proc)


def _plan(url: str) -> str:
    with Client(url, token=TOKEN, timeout=10) as admin:
        return admin.create_plan("deploy")["plan_id"]


def _decide_first_pending(url: str, token: str, plan: str, how: str) -> None:
    """The approver's side: wait for the plan's pending approval, then decide it."""
    with Client(url, token=token, timeout=10) as approver:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            items = approver.list_approvals(state="pending", plan_id=plan)["items"]
            if items:
                if how == "grant":
                    approver.grant_approval(items[0]["approval_id"], note="go")
                else:
                    approver.reject_approval(items[0]["approval_id"], "not today")
                return
            time.sleep(0.1)
    raise AssertionError("no pending approval appeared")


def test_enforce_waits_for_the_grant_then_is_allowed(server):
    url, agent, approver = server
    plan = _plan(url)
    person = threading.Thread(target=_decide_first_pending, args=(url, approver, plan, "grant"))
    person.start()
    with Client(url, token=agent, timeout=5) as client:
        decision = client.enforce(plan_id=plan, wait_for_approval=30, tool={
            "name": "deploy", "capability": WRITER, "args": {"service": "web"}})
    person.join(timeout=30)
    assert decision.allowed is True


def test_enforce_raises_with_the_rejected_approval(server):
    url, agent, approver = server
    plan = _plan(url)
    person = threading.Thread(target=_decide_first_pending,
                              args=(url, approver, plan, "reject"))
    person.start()
    with Client(url, token=agent, timeout=5) as client, pytest.raises(
            ToolHumanApprovalRequiredError) as raised:
        client.enforce(plan_id=plan, wait_for_approval=30, tool={
            "name": "deploy", "capability": WRITER, "args": {"service": "api"}})
    person.join(timeout=30)
    assert raised.value.approval["state"] == "rejected"
    assert raised.value.approval["reason"] == "not today"


def test_enforce_raises_when_the_wait_runs_out(server):
    url, agent, _ = server
    plan = _plan(url)
    with Client(url, token=agent, timeout=5) as client, pytest.raises(
            ToolHumanApprovalRequiredError) as raised:
        client.enforce(plan_id=plan, wait_for_approval=1, tool={
            "name": "deploy", "capability": WRITER, "args": {"service": "db"}})
    assert raised.value.approval["state"] == "pending"
    assert raised.value.code == "human_approval_required"


def test_without_wait_the_deny_carries_the_pending_approval(server):
    url, agent, _ = server
    plan = _plan(url)
    with Client(url, token=agent, timeout=5) as client, pytest.raises(
            ToolHumanApprovalRequiredError) as raised:
        client.enforce(plan_id=plan, tool={"name": "deploy", "capability": WRITER})
    assert raised.value.approval["state"] == "pending"
    assert raised.value.approval["approval_id"]


def test_async_enforce_waits_for_the_grant(server):
    url, agent, approver = server
    plan = _plan(url)

    async def run() -> bool:
        async with AsyncClient(url, token=agent, timeout=5) as client:
            person = asyncio.to_thread(_decide_first_pending, url, approver, plan, "grant")
            decision, _ = await asyncio.gather(client.enforce(
                plan_id=plan, wait_for_approval=30,
                tool={"name": "deploy", "capability": WRITER, "args": {"n": 1}}), person)
            return decision.allowed

    assert asyncio.run(run()) is True


def test_a_guarded_function_waits_and_names_the_approval_while_it_waits(server):
    url, agent, approver = server
    plan = _plan(url)
    seen: list[dict] = []
    person = threading.Thread(target=_decide_first_pending, args=(url, approver, plan, "grant"))
    person.start()
    with Client(url, token=agent, timeout=5) as client:
        @client.guard(tool=lambda service: {"name": "deploy", "capability": WRITER,
                                            "args": {"service": service}},
                      plan_id=plan, wait_for_approval=30, on_pending=seen.append)
        def deploy(service: str) -> str:
            return f"deployed {service}"

        assert deploy("cache") == "deployed cache"
    person.join(timeout=30)
    assert len(seen) == 1 and seen[0]["approval_id"]
    assert seen[0]["state"] == "pending"


def test_guarded_block_waits_for_the_grant_and_reports(server):
    url, agent, approver = server
    plan = _plan(url)
    seen: list[str] = []
    person = threading.Thread(target=_decide_first_pending, args=(url, approver, plan, "grant"))
    person.start()
    with Client(url, token=agent, timeout=5) as client:
        with client.guarded(plan_id=plan, wait_for_approval=30,
                            on_pending=lambda approval: seen.append(approval["approval_id"]),
                            tool={"name": "deploy", "capability": WRITER,
                                  "args": {"service": "queue"}}) as decision:
            assert decision.allowed is True
    person.join(timeout=30)
    assert len(seen) == 1


def test_async_guard_awaits_an_async_on_pending(server):
    url, agent, approver = server
    plan = _plan(url)
    seen: list[str] = []

    async def note(approval: dict) -> None:
        seen.append(approval["approval_id"])

    async def run() -> str:
        async with AsyncClient(url, token=agent, timeout=5) as client:
            @client.guard(tool={"name": "deploy", "capability": WRITER, "args": {"n": 2}},
                          plan_id=plan, wait_for_approval=30, on_pending=note)
            async def deploy() -> str:
                return "ok"

            person = asyncio.to_thread(_decide_first_pending, url, approver, plan, "grant")
            result, _ = await asyncio.gather(deploy(), person)
            return result

    assert asyncio.run(run()) == "ok"
    assert len(seen) == 1


def test_without_a_wait_on_pending_is_not_called(server):
    url, agent, _ = server
    plan = _plan(url)
    seen: list[dict] = []
    with Client(url, token=agent, timeout=5) as client, pytest.raises(
            ToolHumanApprovalRequiredError):
        client.enforce(plan_id=plan, on_pending=seen.append,
                       tool={"name": "deploy", "capability": WRITER, "args": {"n": 3}})
    assert seen == []


def _cli(*args: str, token: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([TOOLGATE, "approvals", *args, "--url", url, "--token", token],
                          capture_output=True, text=True, timeout=60)


def test_the_cli_lists_shows_grants_and_rejects(server):
    url, agent, approver = server
    plan = _plan(url)
    with Client(url, token=agent, timeout=5) as client:
        ids = []
        for service in ("one", "two"):
            with pytest.raises(ToolHumanApprovalRequiredError) as raised:
                client.enforce(plan_id=plan, tool={"name": "deploy", "capability": WRITER,
                                                   "args": {"service": service}})
            ids.append(raised.value.approval["approval_id"])
    listed = _cli("list", "--plan-id", plan, token=approver, url=url)
    assert listed.returncode == 0, listed.stderr
    assert all(i in listed.stdout for i in ids) and "pending" in listed.stdout
    shown = _cli("show", ids[0], token=approver, url=url)
    assert shown.returncode == 0 and '"service": "one"' in shown.stdout
    granted = _cli("grant", ids[0], "--uses", "2", "--note", "ok", token=approver, url=url)
    assert granted.returncode == 0 and "2 use(s)" in granted.stdout, granted.stderr
    rejected = _cli("reject", ids[1], "--reason", "no", token=approver, url=url)
    assert rejected.returncode == 0, rejected.stderr
    # The agent's own key may not decide: the service's 403 is the exit code 2 and message.
    again = _cli("cancel", ids[0], token=agent, url=url)
    assert again.returncode == 2 and "403" in again.stderr
    as_json = _cli("list", "--all", "--plan-id", plan, "--json", token=approver, url=url)
    states = {i["approval_id"]: i["state"] for i in json.loads(as_json.stdout)["items"]}
    assert states == {ids[0]: "granted", ids[1]: "rejected"}
