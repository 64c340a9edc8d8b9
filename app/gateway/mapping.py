"""From an MCP tool to a toolgate request (SPEC §14), pure: names, capability, the
authorize body, and the deny's result text. docs/gateway.md has the same table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from app.gateway.config import ServerConfig, ToolEntry
from app.gateway.oauth import with_caller

SEPARATOR = "."
UI_APPROVAL = "/ui/#/approvals/{}"

# An unregistered tool of an untrusted server (and any tool whose annotations are
# missing or unread): everything a tool could be.
WORST_CASE = {"writes": True, "checkpointable": False, "unsafe": True}


# resources/read is decided as this tool of the server that serves the URI (SPEC §19): no
# MCP tool name has a ':', so it is never one of the server's own tools.
RESOURCE_READ = "resources:read"
# A read is a read unless the registry says otherwise.
READ_ONLY = {"writes": False, "checkpointable": False, "unsafe": False}


def gateway_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


@dataclass(frozen=True)
class Claim:
    """What the gateway submits for an unregistered tool: the capability and category."""

    capability: dict[str, bool]
    safety_category: str


def claim(server: ServerConfig, tool: str, annotations: dict[str, Any] | None) -> Claim:
    """The capability of an unregistered tool. Untrusted server: the worst case. Trusted:
    writes = not readOnlyHint, destructive when it writes and destructiveHint, with the
    protocol's defaults for absent hints (readOnlyHint false, destructiveHint true);
    unsafe and checkpointable false unless the server's tools: entry says otherwise."""
    if not server.trust_annotations:
        return Claim(dict(WORST_CASE), "destructive")
    hints = annotations or {}
    read_only = hints.get("readOnlyHint") is True
    destructive_hint = hints.get("destructiveHint") is not False
    writes = not read_only
    entry = server.tools.get(tool) or ToolEntry()
    return Claim({"writes": writes,
                  "checkpointable": bool(entry.checkpointable),
                  "unsafe": bool(entry.unsafe)},
                 "destructive" if writes and destructive_hint else "safe")


def resource_read(uri: str) -> tuple[dict[str, Any], list[str]]:
    """The args and path_args of a resources/read decision: `{"uri": ...}`; a file://
    URI also as the path argument `path` (check 10, call rules' `paths`). A file URI
    naming another host keeps the whole URI as its path: no sandbox root contains it."""
    args: dict[str, Any] = {"uri": uri}
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        return args, []
    local = parts.netloc in ("", "localhost")
    args["path"] = unquote(parts.path) if local and parts.path else uri
    return args, ["path"]


def authorize_body(*, plan_id: str, name: str, server: ServerConfig, tool: str,
                   args: dict[str, Any], claim_: Claim | None, confirmed: bool = False,
                   metadata: dict[str, Any] | None = None,
                   path_args: list[str] | None = None) -> dict[str, Any]:
    """One POST /v1/authorize-tool. `claim_` None: the tool is registered, the registry
    decides (a submitted capability could only tighten it, never the other way)."""
    entry = server.tools.get(tool)
    body_tool: dict[str, Any] = {"name": name, "args": args}
    if claim_ is not None:
        body_tool["capability"] = claim_.capability
        body_tool["safety_category"] = claim_.safety_category
    paths = list(entry.path_args) if entry is not None else []
    paths += [p for p in path_args or [] if p not in paths]
    if paths:
        body_tool["path_args"] = paths
    context: dict[str, Any] = {"metadata": {"toolgate_gateway": with_caller(metadata)}}
    if server.sandbox is not None:
        if server.sandbox.id is not None:
            context["sandbox_id"] = server.sandbox.id
        if server.sandbox.root is not None:
            context["sandbox_root"] = server.sandbox.root
        if server.sandbox.home is not None:
            context["variables"] = {"HOME": server.sandbox.home}
    if entry is not None and entry.step_id is not None:
        context["step_id"] = entry.step_id
    if entry is not None and entry.estimated_cost is not None:
        context["estimated_cost"] = entry.estimated_cost
    if confirmed:
        context["confirmed"] = True
    return {"plan_id": plan_id, "tool": body_tool, "context": context}


def deny_text(deny: dict[str, Any], decision_id: str | None) -> str:
    return (f"{deny.get('error')} ({deny.get('code')}): {deny.get('message')} "
            f"[decision {decision_id}]")


def pending_approval(deny: dict[str, Any]) -> dict[str, Any] | None:
    details = deny.get("details")
    approval = details.get("approval") if isinstance(details, dict) else None
    if isinstance(approval, dict) and isinstance(approval.get("approval_id"), str):
        return approval
    return None
