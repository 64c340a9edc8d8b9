"""Tool pinning on the gateway's side (SPEC §19): every upstream tool's definition is checked
against its pin, which the service holds (app/pins), so every gateway and replica agrees.

- `check(listings)` runs before a `tools/list` answer: the pins are read in one request and
  every tool whose definition is not the pinned one is reported (`POST .../seen`, with the
  server's `pin` mode: under `first_use` the first definition seen becomes the pin). What
  the service answered is remembered per (server, tool, digest) for `FRESH_SECONDS`.
- `listed(server, tool)`: a tool known not to match is left out of the list. One whose
  state is unknown (the service did not answer) stays listed: its calls are checked anyway.
- `refusal(...)` runs before a call is decided: a tool not known to match is reported with
  the call, and the service answers a recorded deny (`tool_not_activated`, `details.pin`)
  when it does not match. No answer is no decision (`PinsUnavailable`, fail closed).
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import quote

import mcp_types as types
from toolgate_client import AsyncClient, ToolgateError

from app.gateway.config import GatewayConfig
from app.pins.digest import NotCanonical, definition, digest

log = logging.getLogger("toolgate.gateway")

FRESH_SECONDS = 10.0  # how long an answer about a (server, tool, digest) is trusted
DIGESTS_KEPT = 4096  # tool objects whose digest is remembered (then started over)


class PinsUnavailable(Exception):
    """The service gave no answer about a pin: the call is not made."""


def tool_definition(tool: types.Tool) -> dict[str, Any]:
    annotations = (tool.annotations.model_dump(by_alias=True, exclude_none=True)
                   if tool.annotations is not None else None)
    return definition(tool.name, tool.description, tool.input_schema, tool.output_schema,
                      annotations)


def tool_digest(tool: types.Tool) -> str | None:
    try:
        return digest(tool_definition(tool))
    except NotCanonical:
        return None


def _path(server: str, tool: str) -> str:
    return f"/v1/gateway/pins/{quote(server, safe='')}/{quote(tool, safe='')}"


class Pins:
    def __init__(self, config: GatewayConfig, toolgate: AsyncClient) -> None:
        self.config = config
        self.toolgate = toolgate
        # (server, tool, digest) -> (matches its pin, when the service said so)
        self._known: dict[tuple[str, str, str], tuple[bool, float]] = {}
        # id(tool) -> (the tool object, its digest): computed once per listed object, not
        # on every call (the RFC 8785 form is pure Python and costs a call ~0.2 ms). A
        # listing makes new objects (upstream.py, sessions.py), so a changed definition is
        # a new key and digested again; the object is held so its id is not reused, and
        # checked by identity. Nothing in the gateway changes a listed Tool in place.
        self._digests: dict[int, tuple[types.Tool, str | None]] = {}

    def digest(self, tool: types.Tool) -> str | None:
        """tool_digest(tool), remembered for this Tool object."""
        entry = self._digests.get(id(tool))
        if entry is not None and entry[0] is tool:
            return entry[1]
        found = tool_digest(tool)
        if len(self._digests) >= DIGESTS_KEPT:
            self._digests.clear()
        self._digests[id(tool)] = (tool, found)
        return found

    def _fresh(self, key: tuple[str, str, str]) -> bool | None:
        entry = self._known.get(key)
        if entry is None or time.monotonic() - entry[1] > FRESH_SECONDS:
            return None
        return entry[0]

    def _remember(self, key: tuple[str, str, str], match: bool) -> None:
        if len(self._known) > 10_000:  # upstreams that rename tools for ever: start over
            self._known.clear()
        self._known[key] = (match, time.monotonic())

    def listed(self, server: str, tool: types.Tool) -> bool:
        found = self.digest(tool)
        if found is None:
            return False  # no digest, no pin: never listed
        entry = self._known.get((server, tool.name, found))
        return entry is None or entry[0]

    async def check(self, listings: dict[str, dict[str, types.Tool]]) -> None:
        """Before a tools/list answer: what each listed tool's pin says, read again when
        older than FRESH_SECONDS. The service not answering leaves the state unknown."""
        stale = [(server, tool, found) for server, tools in listings.items()
                 for tool in tools.values()
                 if (found := self.digest(tool)) is not None
                 and self._fresh((server, tool.name, found)) is None]
        if not stale:
            return
        try:
            answer = await self.toolgate.request("GET", "/v1/gateway/pins")
            pinned = {(p["server"], p["tool"]): p.get("digest") for p in answer["items"]}
        except (ToolgateError, KeyError, TypeError) as exc:
            log.warning("gateway: tool pins not read: %s", exc)
            return
        for server, tool, found in stale:
            key = (server, tool.name, found)
            if pinned.get((server, tool.name)) == found:
                self._remember(key, True)
                continue
            try:
                seen = await self._seen(server, tool)
            except PinsUnavailable as exc:
                log.warning("gateway: %s.%s: %s", server, tool.name, exc)
                continue
            self._remember(key, seen["match"] is True)
            if seen["match"] is not True:
                log.warning("gateway: %s.%s is left out: its definition %s is not the "
                            "pinned one (%s)", server, tool.name, found[:12],
                            (seen.get("pin") or {}).get("digest"))

    async def refusal(self, server: str, tool: types.Tool, *, plan_id: str,
                      args: dict[str, Any]) -> dict[str, Any] | None:
        """Before a call is decided: None when the tool matches its pin, else the
        service's recorded deny. Raises PinsUnavailable when there is no answer."""
        found = self.digest(tool)
        if found is None:
            raise PinsUnavailable(f"the definition of {server}.{tool.name} has no RFC 8785 "
                                  "form, so it cannot be pinned")
        key = (server, tool.name, found)
        if self._fresh(key) is True:
            return None
        seen = await self._seen(server, tool, call={"plan_id": plan_id, "args": args})
        match = seen["match"] is True
        self._remember(key, match)
        if match:
            return None
        decision = seen.get("decision")
        if (not isinstance(decision, dict) or decision.get("allowed") is not False
                or not isinstance(decision.get("decision_id"), str)
                or not isinstance(decision.get("deny"), dict)):
            raise PinsUnavailable("toolgate's answer about the pin carries no decision")
        return decision

    async def _seen(self, server: str, tool: types.Tool,
                    call: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"definition": tool_definition(tool),
                                "mode": self.config.servers[server].pin}
        if call is not None:
            body["call"] = call
        try:
            answer = await self.toolgate.request("POST", _path(server, tool.name) + "/seen",
                                                 body)
        except ToolgateError as exc:
            raise PinsUnavailable(f"toolgate did not answer about the pin: {exc}") from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("match"), bool):
            raise PinsUnavailable("toolgate's answer about the pin has no boolean `match`")
        return answer
