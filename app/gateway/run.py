"""`toolgate gateway -c FILE`: wire the parts and serve until stopped (SPEC §14).

The upstreams' supervisors, the listener and the toolgate client share one event loop.
Logs go to standard error: on the stdio listener standard output is the protocol."""

from __future__ import annotations

import hmac
import logging
import os
import sys
import warnings
from typing import Any

import anyio
from toolgate_client import AsyncClient

from app.gateway.calls import Gate
from app.gateway.config import GatewayConfig, HttpListen
from app.gateway.server import ToolsChanged, build_server
from app.gateway.upstream import Upstream

log = logging.getLogger("toolgate.gateway")


class StartError(Exception):
    """The gateway cannot start as configured (a token missing from the environment)."""


def _env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise StartError(f"{what}: the environment variable {name} is not set")
    return value


class BearerToken:
    """Every request needs `Authorization: Bearer <token>` (401 otherwise)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = (b'{"error": {"code": "unauthenticated", "message": '
                        b'"this gateway needs Authorization: Bearer <token>", "details": {}}}')
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def serve(config: GatewayConfig) -> None:
    token = _env(config.toolgate.token_env, "toolgate.token_env")
    http = config.listen.http
    listener_token = _env(http.token_env, "listen.http.token_env") \
        if http is not None and http.token_env else None
    # retries=2: a 502/503/504 or a dropped connection is tried again within the timeout;
    # past it the call fails closed.
    toolgate = AsyncClient(config.toolgate.url, token, timeout=config.toolgate.timeout_seconds)
    tools_changed = ToolsChanged()
    upstreams = {name: Upstream(name, server, config.deadline(name),
                                on_change=tools_changed.changed)
                 for name, server in config.servers.items()}
    gate = Gate(config, toolgate, upstreams)
    try:
        await gate.ensure_plan()
    except Exception as exc:  # toolgate down at start: calls fail closed until it is back
        log.warning("gateway: no plan yet (calls fail closed until one is made): %s", exc)
    server = build_server(gate, tools_changed)
    async with toolgate, anyio.create_task_group() as tasks:
        gate.tasks = tasks  # each client's own upstream sessions run here (sessions.py)
        tasks.start_soon(tools_changed.run)
        for upstream in upstreams.values():
            tasks.start_soon(upstream.supervise)
        if http is not None:
            await _serve_http(server, http, listener_token)
        else:
            from mcp.server.runner import serve_dual_era_loop
            from mcp.server.stdio import stdio_server

            # No fixed initialization options: the capabilities are read at the client's
            # initialize (the union of what the upstreams declared by then).
            async with stdio_server() as (read, write), server.lifespan(server) as state:
                await serve_dual_era_loop(server, read, write, lifespan_state=state,
                                          init_options=None)
        await gate.drain_reports()
        tasks.cancel_scope.cancel()


async def _serve_http(server: Any, http: HttpListen, token: str | None) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(streamable_http_path=http.path, host=http.host)
    if token is not None:
        app = BearerToken(app, token)
    if http.oauth is not None:  # an OAuth 2.1 resource server (SPEC §21)
        from app.gateway.oauth import OAuthResource

        app = OAuthResource(app, http.oauth)
    config = uvicorn.Config(app, host=http.host, port=http.port, log_level="warning",
                            access_log=False, lifespan="on")
    web = uvicorn.Server(config)
    await web.serve()
    if web.started:
        return
    raise StartError(f"cannot listen on {http.host}:{http.port}")


def main(config: GatewayConfig) -> int:
    from mcp.shared.exceptions import MCPDeprecationWarning

    # The gateway relays the features 2026-07-28 deprecates (logging, roots, resource
    # subscriptions) for the handshake-era clients and servers that still use them.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    # httpx (the toolgate client) and httpx2 (the SDK's client to HTTP upstreams) log every
    # request at INFO ("HTTP Request: POST ... 200 OK"): three lines per relayed call (the
    # authorize, the upstream's call, the outcome), about 4 % of the gateway's CPU. Their
    # warnings still show; the gateway logs its own failures.
    for chatty in ("httpx", "httpx2"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        anyio.run(serve, config)
    except StartError as exc:
        print(f"toolgate gateway: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
