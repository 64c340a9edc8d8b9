"""A small MCP server built with the SDK that records every call it receives (one JSON line
per call, written and fsynced before the tool runs): the proof that nothing reached an
upstream without an allow. `python recording_server.py RECORD [--http PORT] [--legacy]`
(RECORD `-`: none; `--legacy`: over HTTP, 2025-11-25 only, as the npm servers are).

Tools: `read_note` (read-only), `write_note` (destructive), `fail` (answers isError),
`crash` (the process exits mid-call), `hang` (never answers), `echo` (no annotations),
`steps` (reports progress `n` times), `shell` (takes a `command`: recorded and
echoed, never executed), `grow` (adds a tool `grown_N` and says the list
changed: `notifications/tools/list_changed` on 2025-11-25, its `subscriptions/listen`
stream on 2026-07-28).

Resources: `note://first` listed, and the template `file:///{+path}` whose reads return
the URI (never a file); every read is recorded as the tool `resources:read`."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

RECORD = sys.argv[1]
NOTES: dict[str, str] = {}
BUS = InMemorySubscriptionBus()


def _record(name: str, arguments: dict[str, Any]) -> None:
    if RECORD == "-":  # the benchmark: no recording
        return
    with open(RECORD, "a") as out:
        out.write(json.dumps({"tool": name, "arguments": arguments, "pid": os.getpid()}) + "\n")
        out.flush()
        os.fsync(out.fileno())


def _schema(**props: str) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}


TOOLS = [
    types.Tool(name="read_note", description="Read a note", input_schema=_schema(key="string"),
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="write_note", description="Write a note",
               input_schema=_schema(key="string", text="string"),
               annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True)),
    types.Tool(name="fail", description="Always fails", input_schema=_schema(),
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="crash", description="Exits mid-call", input_schema=_schema(),
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="hang", description="Never answers", input_schema=_schema(),
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="echo", description="Echoes its arguments", input_schema=_schema()),
    types.Tool(name="grow", description="Adds a tool", input_schema=_schema(),
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="shell", description="Records a shell command (never runs it)",
               input_schema=_schema(command="string")),
    types.Tool(name="steps", description="Reports progress `n` times, then answers",
               input_schema=_schema(n="integer"),
               annotations=types.ToolAnnotations(read_only_hint=True)),
]


async def on_list_tools(ctx: ServerRequestContext[Any],
                        params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def on_call_tool(ctx: ServerRequestContext[Any],
                       params: types.CallToolRequestParams) -> types.CallToolResult:
    args = dict(params.arguments or {})
    _record(params.name, args)
    if params.name == "crash":
        os._exit(3)
    if params.name == "hang":
        await anyio.sleep_forever()
    if params.name == "grow":
        name = f"grown_{sum(t.name.startswith('grown_') for t in TOOLS) + 1}"
        TOOLS.append(types.Tool(name=name, description="A grown tool", input_schema=_schema(),
                                annotations=types.ToolAnnotations(read_only_hint=True)))
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await BUS.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(text=name)])
    if params.name == "steps":
        n = int(args.get("n") or 0)
        for step in range(1, n + 1):
            await ctx.session.report_progress(step, n)
        return types.CallToolResult(content=[types.TextContent(text=f"{n} steps")])
    if params.name == "fail":
        return types.CallToolResult(content=[types.TextContent(text="it failed")],
                                    is_error=True)
    if params.name == "write_note":
        NOTES[str(args.get("key"))] = str(args.get("text"))
        text = "written"
    elif params.name == "read_note":
        text = NOTES.get(str(args.get("key")), "")
    else:
        text = json.dumps(args, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def on_list_resources(ctx: ServerRequestContext[Any],
                            params: types.PaginatedRequestParams | None
                            ) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="note://first",
                                                               name="first")])


async def on_list_templates(ctx: ServerRequestContext[Any],
                            params: types.PaginatedRequestParams | None
                            ) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
        uri_template="file:///{+path}", name="files")])


async def on_read_resource(ctx: ServerRequestContext[Any],
                           params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    _record("resources:read", {"uri": str(params.uri)})
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=str(params.uri), text=f"contents of {params.uri}")])


def input_schema(name: str) -> dict[str, Any] | None:
    return next((t.input_schema for t in TOOLS if t.name == name), None)


server = Server("recording", on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                on_list_resources=on_list_resources,
                on_list_resource_templates=on_list_templates,
                on_read_resource=on_read_resource,
                on_subscriptions_listen=ListenHandler(BUS), get_tool_input_schema=input_schema)


class LegacyOnly:
    """Refuses 2026-07-28 requests (HTTP 400, no JSON-RPC body): a client in `auto` mode
    falls back to the 2025-11-25 handshake, as with the npm reference servers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if headers.get(b"mcp-protocol-version", b"").decode() in MODERN_PROTOCOL_VERSIONS:
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"2025-11-25 only"})
            return
        await self.app(scope, receive, send)


async def main() -> None:
    if "--http" in sys.argv:
        import uvicorn

        port = int(sys.argv[sys.argv.index("--http") + 1])
        app: Any = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
        if "--legacy" in sys.argv:
            app = LegacyOnly(app)
        await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                            log_level="warning")).serve()
        return
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
