"""The MCP clients the tests drive: the SDK's `Client` (over stdio or Streamable HTTP) and
the independent one, `@modelcontextprotocol/inspector`'s CLI."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.conftest import TOOLGATE, npm_bin


def accept(answers: list[str]):
    async def callback(ctx: Any, params: Any) -> types.ElicitResult:
        answers.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})
    return callback


def decline(answers: list[str]):
    async def callback(ctx: Any, params: Any) -> types.ElicitResult:
        answers.append(params.message)
        return types.ElicitResult(action="decline")
    return callback


@asynccontextmanager
async def http_client(url: str, token: str, *, get_stream: Any = None,
                      **options: Any) -> AsyncIterator[Client]:
    """`get_stream`, an anyio.Event: set once the server has answered the standalone GET
    (the SSE stream a 2025-11-25 session's notifications come on)."""
    async def opened(response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            get_stream.set()

    hooks = {"response": [opened]} if get_stream is not None else None
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(120), event_hooks=hooks) as http:
        async with Client(streamable_http_client(url, http_client=http), cache=None,
                          **options) as client:
            yield client


def stdio_client(config: Path, env: dict[str, str], **options: Any) -> Client:
    return Client(StdioServerParameters(command=TOOLGATE, args=["gateway", "-c", str(config)],
                                        env=env), cache=None, **options)


def inspector(target: list[str], home: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 120) -> tuple[int, Any, str]:
    """One inspector CLI run: (exit code, its JSON answer or None, stderr)."""
    home.mkdir(exist_ok=True)
    full = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    full["HOME"] = str(home)
    extra = [part for k, v in (env or {}).items() for part in ("-e", f"{k}={v}")]
    done = subprocess.run([npm_bin("mcp-inspector"), "--cli", "--connect-timeout", "120000",
                           *extra, *target, *args],
                          capture_output=True, text=True, timeout=timeout, env=full)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    return done.returncode, answer, done.stderr


def text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


def decision_meta(result: types.CallToolResult) -> dict:
    return (result.meta or {}).get("toolgate/decision") or {}
