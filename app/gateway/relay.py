"""Everything the upstreams offer besides tools (SPEC §19): resources (list, templates,
read, subscribe), prompts (`SERVER.PROMPT`), completions and the log level, relayed on the
client's own upstream sessions (sessions.py) or, for a stateless 2026-07-28 request, the
gateway's shared ones.

Resource URIs are kept as the upstream gives them; a read goes to the upstream that listed
the URI, or whose template matches it. A read is a decision: the tool
`SERVER.resources:read` with args `{"uri": ...}` (read-only unless the registry says
otherwise; a file:// URI also as the path argument `path`), and a denied read is a
JSON-RPC error (DENIED) whose message is the deny text and whose `data` holds
`toolgate/decision`. Prompts, completions and logging are not decided."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.shared.uri_template import UriTemplate
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from app.gateway import mapping
from app.gateway.calls import META, UNAVAILABLE, Gate, NoDecision
from app.gateway.sessions import Via, on_session, open_link
from app.gateway.upstream import Upstream, UpstreamUnavailable

log = logging.getLogger("toolgate.gateway")

DENIED = -32001  # a resources/read toolgate denied (or could not decide: fail closed)
RESOURCE_NOT_FOUND = -32002  # the spec's code for a resource no upstream serves
PAGES = 100  # a paginator that never ends cannot hang the gateway
FIRST_CONNECT_SECONDS = 30.0  # as server.py: a first request waits for the first tries
RELAYED = ("prompts", "resources", "logging", "completions")


def connection_of(ctx: ServerRequestContext[Any]) -> Connection | None:
    # The SDK (2.3) gives handlers the per-request ServerSession, not the Connection
    # behind it; the connection is what outlives the request (its standalone channel,
    # its state and its exit stack). Checked: a missing attribute leaves a client without
    # its own upstream sessions and without list-change notifications, and
    # tests/gateway/test_list_changed.py and test_proxy.py fail.
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


class Relay:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.owners: dict[str, str] = {}  # a listed URI -> the server that listed it
        self.templates: dict[str, list[UriTemplate]] = {}  # server -> its templates

    def via(self, ctx: ServerRequestContext[Any], progress: Any = None) -> Via:
        """Where this client's request goes: its own sessions (handshake era), or the
        shared ones (a 2026-07-28 request has no session)."""
        link = None
        connection = connection_of(ctx)
        if (ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and connection is not None
                and self.gate.tasks is not None):
            link = open_link(self.gate.upstreams, connection, self.gate.tasks)
        return Via(link=link, session=ctx.session, request_id=ctx.request_id,
                   progress=progress)

    def declares(self, capability: str) -> bool:
        """Whether any upstream declared it (before any handshake: assumed, so a client
        that initializes first is not told less than there is)."""
        known = [u.capabilities for u in self.gate.upstreams.values()
                 if u.capabilities is not None]
        return not known or any(getattr(c, capability) is not None for c in known)

    async def _serving(self, capability: str) -> list[Upstream]:
        """The upstreams that are up and declared `capability` (a client's first request
        waits, once, for every upstream's first try, as tools/list does)."""
        await self.gate.first_attempts(FIRST_CONNECT_SECONDS)
        return [u for u in self.gate.upstreams.values()
                if u.up and u.capabilities is not None
                and getattr(u.capabilities, capability) is not None]

    async def _on(self, ctx: ServerRequestContext[Any], upstream: Upstream,
                  op: Callable[[Any], Awaitable[Any]]) -> Any:
        """`op(client)` on this client's session with `upstream`; an error answer of
        the upstream reaches the client as it came."""
        via = self.via(ctx)
        try:
            return await on_session(
                upstream, via, lambda client: upstream.request(op, client, errors_as_is=True))
        except UpstreamUnavailable as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None

    async def _each(self, ctx: ServerRequestContext[Any], capability: str,
                    op: Callable[[Any], Awaitable[Any]]) -> list[tuple[str, Any]]:
        """`op` on every upstream that serves `capability`, in the configured order; one
        that fails is left out and logged, never fatal to the others."""
        results = []
        for upstream in await self._serving(capability):
            try:
                results.append((upstream.name, await self._on(ctx, upstream, op)))
            except MCPError as exc:
                log.warning("gateway: upstream %s left out of a %s listing: %s",
                            upstream.name, capability, exc)
        return results

    # -- resources -------------------------------------------------------------------------

    async def list_resources(self, ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        found = await self._each(ctx, "resources", lambda c: _pages(c.list_resources,
                                                                      "resources"))
        resources = []
        for server, items in found:
            for item in items:
                self.owners.setdefault(str(item.uri), server)
                resources.append(item)
        return types.ListResourcesResult(resources=resources)

    async def list_templates(self, ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        found = await self._each(ctx, "resources", lambda c: _pages(
            c.list_resource_templates, "resource_templates"))
        templates = []
        for server, items in found:
            parsed = []
            for item in items:
                try:
                    parsed.append(UriTemplate.parse(item.uri_template))
                except ValueError:
                    log.debug("gateway: %s: template %r not understood", server,
                              item.uri_template)
            self.templates[server] = parsed
            templates.extend(items)
        return types.ListResourceTemplatesResult(resource_templates=templates)

    def _owner_known(self, uri: str) -> str | None:
        if uri in self.owners:
            return self.owners[uri]
        for server, templates in self.templates.items():
            if any(t.match(uri) is not None for t in templates):
                return server
        return None

    async def owner(self, ctx: ServerRequestContext[Any], uri: str) -> Upstream:
        """The upstream that listed `uri` or whose template matches it (listed now when
        the client read before listing)."""
        server = self._owner_known(uri)
        if server is None:
            await self.list_resources(ctx, None)
            await self.list_templates(ctx, None)
            server = self._owner_known(uri)
        if server is None:
            serving = await self._serving("resources")
            if len(serving) != 1:
                raise MCPError(RESOURCE_NOT_FOUND, f"no upstream lists the resource {uri}",
                               {"uri": uri})
            return serving[0]
        return self.gate.upstreams[server]

    async def read_resource(self, ctx: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        upstream = await self.owner(ctx, uri)
        server, tool = upstream.name, mapping.RESOURCE_READ
        args, path_args = mapping.resource_read(uri)
        try:
            decision = await self.gate.authorize(
                mapping.gateway_name(server, tool), server, tool, args,
                claim=mapping.Claim(dict(mapping.READ_ONLY), "safe"), path_args=path_args,
                metadata={"server": server, "tool": tool})
        except NoDecision as exc:
            log.warning("gateway: read of %s denied, no decision: %s", uri, exc)
            message = (f"{UNAVAILABLE}: no decision could be obtained from toolgate, so "
                       f"the resource was not read: {exc}")
            raise MCPError(DENIED, message, {META: {
                "decision_id": None, "allowed": False,
                "deny": {"error": UNAVAILABLE, "message": str(exc)}}}) from None
        decision_id = decision["decision_id"]
        if decision.get("allowed") is not True:
            denied = self.gate.deny_result(decision)
            raise MCPError(DENIED, denied.content[0].text, {META: denied.meta[META]})
        try:
            result = await self._on(ctx, upstream, lambda c: c.read_resource(uri))
        except MCPError as exc:
            self.gate.book(decision_id, upstream, tool, args, exc.message or "read failed")
            raise
        except BaseException:
            self.gate.book(decision_id, upstream, tool, args, "cancelled")
            raise
        self.gate.book(decision_id, upstream, tool, args, None)
        kept = {k: v for k, v in (result.meta or {}).items()
                if not k.startswith("io.modelcontextprotocol/")}
        return result.model_copy(update={"meta": {**kept, META: {
            "decision_id": decision_id, "allowed": True}}})

    async def subscribe(self, ctx: ServerRequestContext[Any],
                        params: types.SubscribeRequestParams) -> types.EmptyResult:
        upstream = await self.owner(ctx, str(params.uri))
        await self._on(ctx, upstream, lambda c: c.session.subscribe_resource(str(params.uri)))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        upstream = await self.owner(ctx, str(params.uri))
        await self._on(ctx, upstream,
                       lambda c: c.session.unsubscribe_resource(str(params.uri)))
        return types.EmptyResult()

    # -- prompts and completions -----------------------------------------------------------

    async def list_prompts(self, ctx: ServerRequestContext[Any],
                           params: types.PaginatedRequestParams | None
                           ) -> types.ListPromptsResult:
        found = await self._each(ctx, "prompts", lambda c: _pages(c.list_prompts, "prompts"))
        return types.ListPromptsResult(prompts=[
            item.model_copy(update={"name": mapping.gateway_name(server, item.name)})
            for server, items in found for item in items])

    def _prompt(self, name: str) -> tuple[Upstream, str]:
        split = mapping.split_name(name)
        if split is None or split[0] not in self.gate.upstreams:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}: prompts are named "
                                           "SERVER.PROMPT")
        return self.gate.upstreams[split[0]], split[1]

    async def get_prompt(self, ctx: ServerRequestContext[Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:
        upstream, prompt = self._prompt(params.name)
        return await self._on(ctx, upstream,
                              lambda c: c.session.get_prompt(prompt, params.arguments))

    async def complete(self, ctx: ServerRequestContext[Any],
                       params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            upstream, prompt = self._prompt(ref.name)
            ref = ref.model_copy(update={"name": prompt})
        else:
            upstream = await self.owner(ctx, ref.uri)
        context = params.context.arguments if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        return await self._on(ctx, upstream, lambda c: c.complete(ref, argument, context))

    # -- logging and roots -----------------------------------------------------------------

    async def set_level(self, ctx: ServerRequestContext[Any],
                        params: types.SetLevelRequestParams) -> types.EmptyResult:
        """To every upstream that logs, on this client's own sessions only."""
        await self._each(ctx, "logging",
                         lambda c: c.session.set_logging_level(params.level))
        return types.EmptyResult()

    async def roots_changed(self, ctx: ServerRequestContext[Any], params: Any) -> None:
        via = self.via(ctx)
        if via.link is None:
            return
        for upstream in self.gate.upstreams.values():
            try:
                client = await via.link.client(upstream.name)
                await client.session.send_roots_list_changed()
            except Exception as exc:  # noqa: BLE001 - a notification is best-effort
                log.debug("gateway: roots change not sent to %s: %s", upstream.name, exc)


async def _pages(fetch: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(PAGES):
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


__all__ = ["DENIED", "RELAYED", "Relay", "connection_of", "_dump"]
