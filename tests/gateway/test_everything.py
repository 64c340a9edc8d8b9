"""The reference `everything` server (npm) as a Streamable HTTP upstream, beside the
recording server over stdio, in one gateway driven by the SDK's client over stdio: the
union of their tools in a fixed order, trust in annotations per server, and an upstream
that goes away leaving the other one served. On SQLite."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.gateway.clients import decision_meta, stdio_client, text
from tests.gateway.conftest import (
    Toolgate,
    assert_all_forwarded_were_allowed,
    free_port,
    gateway_env,
    npm_bin,
    recorder_command,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["sqlite"])
def module_database(request, tmp_path_factory, sqlite_template) -> Iterator[str]:
    path = tmp_path_factory.mktemp("gwdb") / "toolgate.db"
    shutil.copyfile(sqlite_template, path)
    yield f"sqlite+aiosqlite:///{path}"


def start_everything(log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    with open(log, "ab") as out:
        proc = subprocess.Popen([npm_bin("mcp-server-everything"), "streamableHttp"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"

    def up() -> bool:
        try:
            httpx.get(url, timeout=1)
            return True
        except httpx.HTTPError:
            return False

    wait_for(up, 60, "server-everything")
    return proc, url


async def test_two_upstreams_one_over_http(toolgate: Toolgate, tmp_path: Path) -> None:
    everything, url = start_everything(tmp_path / "everything.log")
    record = tmp_path / "calls.jsonl"
    try:
        config = write_config(tmp_path, toolgate.url, {
            "ev": {"url": url, "trust_annotations": True},
            "evu": {"url": url},  # the same server, its annotations not trusted
            "rec": {"command": recorder_command(record), "trust_annotations": True,
                    "sandbox": {"id": "rec", "root": str(tmp_path)}},
        })
        async with stdio_client(config, gateway_env(toolgate)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            servers = [n.split(".", 1)[0] for n in names]
            assert servers == sorted(servers, key=["ev", "evu", "rec"].index)  # fixed order
            assert {"ev.echo", "evu.echo", "rec.read_note"} <= set(names)

            echo = await client.call_tool("ev.echo", {"message": "hi"})
            assert not echo.is_error and "hi" in text(echo)
            untrusted = await client.call_tool("evu.echo", {"message": "hi"})
            assert untrusted.is_error
            assert decision_meta(untrusted)["deny"]["code"] == "unsafe_tool"

            everything.terminate()
            everything.wait(timeout=30)
            with anyio.fail_after(60):
                while "ev.echo" in [t.name for t in (await client.list_tools()).tools]:
                    await anyio.sleep(0.2)
            names = [t.name for t in (await client.list_tools()).tools]
            assert "rec.read_note" in names and not any(n.startswith("ev") for n in names)
            gone = await client.call_tool("ev.echo", {"message": "anyone?"})
            assert gone.is_error
            still = await client.call_tool("rec.read_note", {"key": "k"})
            assert not still.is_error
    finally:
        if everything.poll() is None:
            everything.kill()
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


async def test_a_call_held_for_an_approval_is_forwarded_once_granted(
        toolgate: Toolgate, tmp_path: Path) -> None:
    """approval_mode server, a profile that requires approval, approvals.wait_seconds > 0:
    the gateway holds the call, a person grants it on the service, the call goes through;
    a rejected one does not, and its deny names the approval and its page."""
    assert toolgate.admin("PUT", "/v1/profiles/approve", {"safety": {
        "require_sandbox": True, "require_checkpoints": False,
        "require_human_approval": True}}).status_code in (200, 201)
    assert toolgate.admin("PUT", "/v1/actions/gw-approve", {
        "project": toolgate.project, "automation_profile": "approve"}).status_code in (200, 201)
    assert toolgate.admin("PUT", f"/v1/projects/{toolgate.project}/settings",
                          {"approval_mode": "server"}).status_code == 200
    record = tmp_path / "calls.jsonl"
    config = write_config(tmp_path, toolgate.url, {
        "rec": {"command": recorder_command(record), "trust_annotations": True,
                "sandbox": {"id": "rec", "root": str(tmp_path)}}},
        action="gw-approve", approvals={"wait_seconds": 120})

    def pending() -> dict | None:
        items = toolgate.admin("GET", f"/v1/approvals?state=pending&project="
                                      f"{toolgate.project}").json()["items"]
        return items[0] if items else None

    results: dict[str, object] = {}
    async with stdio_client(config, gateway_env(toolgate)) as client:
        async def call(key: str) -> None:
            results[key] = await client.call_tool("rec.read_note", {"key": key})

        for key, verdict in (("granted", "grant"), ("rejected", "reject")):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, key)
                approval = await anyio.to_thread.run_sync(
                    lambda: wait_for(pending, 120, "a pending approval"))
                assert key not in received_keys(record)  # held, not forwarded
                body = {"reason": "no"} if verdict == "reject" else {}
                assert toolgate.admin("POST", f"/v1/approvals/{approval['approval_id']}/"
                                              f"{verdict}", body).status_code == 200
    granted, rejected = results["granted"], results["rejected"]
    assert not granted.is_error and decision_meta(granted)["allowed"] is True
    assert rejected.is_error
    assert decision_meta(rejected)["deny"]["code"] == "human_approval_required"
    assert "/ui/#/approvals/" in text(rejected)
    assert decision_meta(rejected)["approval"]["url"].startswith(toolgate.url + "/ui/#/")
    assert received_keys(record) == ["granted"]
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


def received_keys(record: Path) -> list[str]:
    from tests.gateway.conftest import records

    return [r["arguments"]["key"] for r in records(record)]
