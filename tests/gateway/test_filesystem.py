"""Done when (issue 32): an unmodified MCP client pointed at the gateway in front of the
real filesystem server (npm, stdio) gets reads, is refused writes outside the sandbox and
destructive writes without confirmation, every call is a decision named SERVER.TOOL, and
no call gets through while toolgate is down. With the SDK's client over Streamable HTTP
and over stdio, and the inspector's CLI, on SQLite and Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.gateway.clients import (
    accept,
    decision_meta,
    decline,
    http_client,
    inspector,
    stdio_client,
    text,
)
from tests.gateway.conftest import (
    HttpGateway,
    Toolgate,
    gateway_env,
    http_gateway,
    npm_bin,
    stop_gateway,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.slow

PATHS = {"write_file": ["path"], "edit_file": ["path"], "create_directory": ["path"],
         "move_file": ["source", "destination"]}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, module_database: str) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fs")  # one per database: nothing left by the other run
    work, outside = root / "work", root / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "notes.txt").write_text("hello from the sandbox\n")
    return {"root": root, "work": work, "outside": outside}


def fs_servers(work: Path) -> dict:
    return {"fs": {"command": [npm_bin("mcp-server-filesystem"), str(work)],
                   "trust_annotations": True,
                   "sandbox": {"id": "fs-work", "root": str(work)},
                   "tools": {name: {"path_args": args} for name, args in PATHS.items()}}}


@pytest.fixture(scope="module")
def gateway(toolgate: Toolgate, folders: dict[str, Path]) -> Iterator[HttpGateway]:
    gw = http_gateway(toolgate, folders["root"], fs_servers(folders["work"]))
    yield gw
    stop_gateway(gw)


async def test_reads_pass_and_are_decisions_with_the_gateways_outcome(
        gateway: HttpGateway, toolgate: Toolgate, folders: dict[str, Path]) -> None:
    async with http_client(gateway.url, gateway.token) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "fs.read_text_file" in names and "fs.write_file" in names
        assert all(name.startswith("fs.") for name in names)
        result = await client.call_tool("fs.read_text_file",
                                        {"path": str(folders["work"] / "notes.txt")})
    assert not result.is_error, text(result)
    assert "hello from the sandbox" in text(result)
    meta = decision_meta(result)
    assert meta["allowed"] is True
    record = wait_for(lambda: (toolgate.decision(meta["decision_id"]).get("outcome")
                               and toolgate.decision(meta["decision_id"])), 30, "the outcome")
    assert record["tool"] == "fs.read_text_file"
    assert record["outcome"]["status"] == "succeeded"
    assert record["outcome"]["args_mismatch"] is False
    assert record["key_id"] == toolgate.decisions()[0]["key_id"]  # the gateway's key


async def test_a_write_outside_the_sandbox_is_refused_and_not_made(
        gateway: HttpGateway, toolgate: Toolgate, folders: dict[str, Path]) -> None:
    target = folders["outside"] / "escape"
    async with http_client(gateway.url, gateway.token) as client:
        result = await client.call_tool("fs.create_directory", {"path": str(target)})
    assert result.is_error
    meta = decision_meta(result)
    assert meta["allowed"] is False and meta["deny"]["code"] == "sandbox_path_escape"
    assert text(result).startswith("ToolSandboxEscapeError (sandbox_path_escape): ")
    assert f"[decision {meta['decision_id']}]" in text(result)
    assert not target.exists()
    assert toolgate.decision(meta["decision_id"])["tool"] == "fs.create_directory"


async def test_a_destructive_write_needs_a_confirmation_by_elicitation(
        gateway: HttpGateway, toolgate: Toolgate, folders: dict[str, Path]) -> None:
    target = folders["work"] / "confirmed.txt"
    args = {"path": str(target), "content": "written after a yes\n"}
    # An unmodified client without elicitation: the deny stands, nothing is written.
    async with http_client(gateway.url, gateway.token) as client:
        refused = await client.call_tool("fs.write_file", args)
    assert refused.is_error and decision_meta(refused)["deny"]["code"] == \
        "confirmation_required"
    assert not target.exists()
    # A user who declines: still nothing.
    asked: list[str] = []
    async with http_client(gateway.url, gateway.token,
                           elicitation_callback=decline(asked)) as client:
        declined = await client.call_tool("fs.write_file", args)
    assert declined.is_error and asked and "fs.write_file" in asked[0]
    assert not target.exists()
    # A user who accepts, on either protocol revision: written, after a second decision
    # whose record says the confirmation came by elicitation.
    for mode in ("auto", "legacy"):
        target.unlink(missing_ok=True)
        asked.clear()
        async with http_client(gateway.url, gateway.token, mode=mode,
                               elicitation_callback=accept(asked)) as client:
            written = await client.call_tool("fs.write_file", args)
        assert not written.is_error, text(written)
        assert asked and target.read_text() == "written after a yes\n"
        record = toolgate.decision(decision_meta(written)["decision_id"])
        assert record["allowed"] is True and record["detail"]["context"]["confirmed"] is True
        assert record["detail"]["context"]["metadata"]["toolgate_gateway"][
            "confirmed_by"] == "elicitation"


async def test_every_call_is_a_decision_named_server_tool(
        gateway: HttpGateway, toolgate: Toolgate, folders: dict[str, Path]) -> None:
    """Each call, allowed or denied, is one decision the page lists (GET /v1/decisions,
    what it reads), under the name the client called, and found by that name."""
    calls = [("fs.list_allowed_directories", {}, True),
             ("fs.read_text_file", {"path": str(folders["work"] / "notes.txt")}, True),
             ("fs.create_directory", {"path": str(folders["outside"] / "listed")}, False),
             ("fs.write_file", {"path": str(folders["work"] / "listed.txt"),
                                "content": "x"}, False)]
    made: dict[str, tuple[str, bool]] = {}
    async with http_client(gateway.url, gateway.token) as client:
        for name, args, allowed in calls:
            meta = decision_meta(await client.call_tool(name, args))
            assert meta["allowed"] is allowed, (name, meta)
            made[meta["decision_id"]] = (name, allowed)
    listed = {item["decision_id"]: (item["tool"], item["allowed"])
              for item in toolgate.decisions() if item["kind"] == "authorize"}
    assert {d: listed.get(d) for d in made} == made
    assert all(tool.startswith("fs.") for tool, _ in listed.values()), listed
    by_name = {item["decision_id"] for item in toolgate.decisions(tool="fs.write_file")}
    assert {d for d, (name, _) in made.items() if name == "fs.write_file"} <= by_name


async def test_no_call_gets_through_while_toolgate_is_down(
        gateway: HttpGateway, toolgate: Toolgate, folders: dict[str, Path]) -> None:
    target = folders["work"] / "created-while-down"
    async with http_client(gateway.url, gateway.token) as client:
        from tests.serving import stop

        stop(toolgate.proc)
        try:
            read = await client.call_tool("fs.read_text_file",
                                          {"path": str(folders["work"] / "notes.txt")})
            made = await client.call_tool("fs.create_directory", {"path": str(target)})
            # The independent client too: a call toolgate would allow is not made.
            by_inspector = folders["work"] / "inspector-while-down"
            code, answer, err = await anyio.to_thread.run_sync(lambda: inspector(
                [gateway.url], folders["root"] / "inspector-home", "--transport", "http",
                "--header", f"Authorization: Bearer {gateway.token}", "--method",
                "tools/call", "--tool-name", "fs.create_directory", "--tool-arg",
                f"path={by_inspector}"))
        finally:
            toolgate.restart()
        for result in (read, made):
            assert result.is_error
            assert text(result).startswith("ToolgateUnavailableError")
            assert decision_meta(result)["decision_id"] is None
        assert "hello" not in text(read)
        assert not target.exists()
        assert answer is not None and answer.get("isError") is True, (code, answer, err)
        assert "ToolgateUnavailableError" in str(answer)
        assert not by_inspector.exists()
        # Back up: the same session works again.
        again = await client.call_tool("fs.read_text_file",
                                       {"path": str(folders["work"] / "notes.txt")})
    assert not again.is_error and "hello" in text(again)


async def test_the_sdk_client_over_stdio(toolgate: Toolgate, folders: dict[str, Path]) -> None:
    config = write_config(folders["root"], toolgate.url, fs_servers(folders["work"]))
    async with stdio_client(config, gateway_env(toolgate)) as client:
        read = await client.call_tool("fs.read_text_file",
                                      {"path": str(folders["work"] / "notes.txt")})
        escape = await client.call_tool("fs.create_directory",
                                        {"path": str(folders["outside"] / "stdio")})
    assert not read.is_error and "hello" in text(read)
    assert escape.is_error and decision_meta(escape)["deny"]["code"] == "sandbox_path_escape"


def test_the_inspector_cli_as_an_independent_client(
        gateway: HttpGateway, toolgate: Toolgate, folders: dict[str, Path]) -> None:
    home = folders["root"] / "inspector-home"
    config = write_config(folders["root"], toolgate.url, fs_servers(folders["work"]))
    from tests.serving import TOOLGATE

    code, answer, err = inspector(
        [TOOLGATE, "gateway", "-c", str(config)], home, "--method", "tools/call",
        "--tool-name", "fs.read_text_file", "--tool-arg",
        f"path={folders['work'] / 'notes.txt'}",
        env={"GW_TOOLGATE_TOKEN": toolgate.agent_token})
    assert code == 0, err
    assert "hello from the sandbox" in str(answer)
    target = folders["work"] / "by-inspector.txt"
    code, answer, err = inspector(
        [gateway.url], home, "--transport", "http", "--header",
        f"Authorization: Bearer {gateway.token}", "--method", "tools/call",
        "--tool-name", "fs.write_file", "--tool-arg", f"path={target}", "content=x")
    assert answer is not None and answer.get("isError") is True, (code, answer, err)
    assert "confirmation_required" in str(answer)
    assert not target.exists()
    escape = folders["outside"] / "by-inspector"
    code, answer, err = inspector(
        [gateway.url], home, "--transport", "http", "--header",
        f"Authorization: Bearer {gateway.token}", "--method", "tools/call",
        "--tool-name", "fs.create_directory", "--tool-arg", f"path={escape}")
    assert answer is not None and answer.get("isError") is True, (code, answer, err)
    assert "sandbox_path_escape" in str(answer)
    assert not escape.exists()
