"""The tool a decision is about: the registry's word merged with the request's (SPEC §3:
a request can only tighten what the registry says)."""

from __future__ import annotations

from typing import Any

from app.policy.model import Capability, CapabilityFields, Layer, RegisteredTool, Tool


class MissingCapability(ValueError):
    """An unregistered tool did not say what it does; the service answers 422."""

    def __init__(self, fields: list[str]) -> None:
        super().__init__(", ".join(fields))
        self.fields = fields


def _category(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def effective_tool(
    *,
    name: str,
    capability: CapabilityFields | None,
    destructive: bool,
    skill_category: str | None,
    args: dict[str, Any],
    metadata: dict[str, Any],
    registered: RegisteredTool | None,
    layer: Layer = Layer.RUNTIME,
    path_args: list[str] | tuple[str, ...] = (),
) -> Tool:
    """Merge the registry's word with the request's: a request can only tighten (SPEC §3),
    and its path_args only add to the registry's (SPEC §17)."""
    cap = capability or Capability()
    category = (
        (registered and registered.skill_category)
        or _category(skill_category)
        or _category(metadata.get("tool_skill_category"))
    )
    # Tool(...) positionally, in its field order (name, writes, checkpointable, unsafe,
    # destructive, skill_category, args, path_args, registered, requires_approval): once
    # per decision.
    if registered is not None:
        return Tool(name,
                    registered.writes or bool(cap.writes),
                    registered.checkpointable and cap.checkpointable is not False,
                    registered.unsafe or bool(cap.unsafe),
                    registered.destructive or destructive,
                    category, args, _paths(registered.path_args, path_args), True,
                    registered.requires_approval)
    if cap.writes is None or (layer is Layer.RUNTIME
                              and (cap.checkpointable is None or cap.unsafe is None)):
        required = ("writes", "checkpointable", "unsafe") if layer is Layer.RUNTIME \
            else ("writes",)
        raise MissingCapability(
            [f"tool.capability.{f}" for f in required if getattr(cap, f) is None])
    return Tool(name, bool(cap.writes), bool(cap.checkpointable), bool(cap.unsafe),
                destructive, category, args, _paths((), path_args))


def _paths(registered: tuple[str, ...], requested: list[str] | tuple[str, ...]
           ) -> tuple[str, ...]:
    """The registry's path arguments, then the request's others, each once."""
    if not requested:
        return registered
    return tuple(dict.fromkeys((*registered, *requested)))
