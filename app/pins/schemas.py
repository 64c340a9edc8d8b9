"""Wire contract of gateway pins (SPEC §19 "Tool pinning")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from app.kit.schemas import Name, Strict

SERVER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"  # the gateway's server names
# MCP tool names (2025-11-25: letters, digits, `_`, `-`, `.`), up to 200 as the registry's.
TOOL_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"
DIGEST_PATTERN = r"^[0-9a-f]{64}$"
MAX_DESCRIPTION_CHARS = 100_000

Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
Mode = Literal["first_use", "approve"]
Status = Literal["pinned", "changed", "pending"]


class DefinitionIn(Strict):
    """A tool as its MCP server lists it: the five fields a pin's digest covers."""

    name: Annotated[str, StringConstraints(pattern=TOOL_PATTERN)]
    description: Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION_CHARS)] | None = None
    inputSchema: dict[str, Any] | None = None  # noqa: N815 - MCP's own spelling
    outputSchema: dict[str, Any] | None = None  # noqa: N815
    annotations: dict[str, Any] | None = None


class PinIn(Strict):
    """Pin a tool to a digest (an admin accepting a definition). `definition`, when given,
    must have that digest; without it, the definition last seen with that digest is kept."""

    digest: Digest
    definition: DefinitionIn | None = None


class CallIn(Strict):
    plan_id: Name
    args: dict[str, Any] = Field(default_factory=dict)


class SeenIn(Strict):
    """What a gateway reports: the definition its upstream lists now, under its server's
    `pin` mode; with `call`, a call of the tool is waiting on the answer."""

    definition: DefinitionIn
    mode: Mode = "first_use"
    call: CallIn | None = None


class SeenOut(BaseModel):
    """A definition a gateway saw that is not the pinned one."""

    digest: str
    definition: dict[str, Any] | None
    at: datetime | None


class PinOut(BaseModel):
    server: str
    tool: str
    status: Status
    digest: str | None
    definition: dict[str, Any] | None
    pinned_by: str | None
    seen: SeenOut | None = None
    created_at: datetime
    updated_at: datetime


class PinList(BaseModel):
    items: list[PinOut]


class SeenAnswer(BaseModel):
    """`match`: the definition is the pinned one (the gateway lists and calls it).
    `decision`: with `call` and no match, the recorded deny (`tool_not_activated`)."""

    match: bool
    digest: str
    pin: PinOut | None
    decision: dict[str, Any] | None = None
