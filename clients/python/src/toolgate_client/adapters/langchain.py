"""toolgate for LangChain and LangGraph tools (extra ``langchain``).

``guard(x, client, ...)`` takes a ``BaseTool``, a list of tools or a LangGraph ``ToolNode``
and gives back the same shape, every tool asking toolgate before it runs::

    from toolgate_client.adapters.langchain import guard

    tools = guard([search, write_file], client, plan_id="p-1")
    agent = create_react_agent(model, tools)        # or ToolNode(tools), or guard(node, ...)

A deny comes back to the model as the tool's error (a ``ToolMessage`` with
``status="error"`` whose content names the deny's class and code), or with
``on_deny="raise"`` the deny's class is raised. When toolgate cannot decide, the tool does
not run and :class:`~toolgate_client.ToolgateUnavailableError` is raised. After the tool
ran, the outcome is reported: ``execution_failed`` when it raised or answered an error
``ToolMessage``, else ``succeeded``. The other keywords are :class:`~._gate.Gate`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from ._gate import Gate

__all__ = ["GuardedTool", "guard"]


def _parse(tool: BaseTool, value: Any) -> tuple[dict[str, Any], str | None]:
    """(the model's arguments, the tool call's id) of an invocation's input."""
    call_id = None
    if isinstance(value, dict) and value.get("type") == "tool_call":
        call_id = value.get("id")
        value = value.get("args", {})
    if isinstance(value, str):
        return {"input": value}, call_id
    if not isinstance(value, dict):
        return {}, call_id
    # Only what the model sent: not the state, store or runtime a ToolNode injects.
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        fields = set(schema.model_fields)
    elif isinstance(schema, dict):
        fields = set(schema.get("properties") or {})
    else:
        fields = set(value)
    return {k: v for k, v in value.items() if k in fields}, call_id


def _error_of(result: Any) -> str | None:
    if isinstance(result, ToolMessage) and result.status == "error":
        return str(result.content)
    return None


class GuardedTool(BaseTool):
    """A tool that asks toolgate before its ``inner`` tool runs (same name, schema, output)."""

    inner: BaseTool
    gate: Gate

    def __init__(self, inner: BaseTool, gate: Gate) -> None:
        super().__init__(
            name=inner.name,
            description=inner.description,
            args_schema=inner.args_schema,
            return_direct=inner.return_direct,
            tags=inner.tags,
            metadata=inner.metadata,
            inner=inner,
            gate=gate,
        )

    def _refused(self, message: str, call_id: str | None) -> Any:
        if call_id is None:
            return message
        return ToolMessage(content=message, tool_call_id=call_id, name=self.name, status="error")

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        args, call_id = _parse(self.inner, input)
        decision, message = self.gate.decide(self.name, args)
        if decision is None:
            return self._refused(message or "", call_id)
        try:
            result = self.inner.invoke(input, config, **kwargs)
        except Exception as exc:
            self.gate.outcome(decision, exc)
            raise
        self.gate.outcome(decision, _error_of(result))
        return result

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> Any:
        args, call_id = _parse(self.inner, input)
        decision, message = await self.gate.adecide(self.name, args)
        if decision is None:
            return self._refused(message or "", call_id)
        try:
            result = await self.inner.ainvoke(input, config, **kwargs)
        except Exception as exc:
            await self.gate.aoutcome(decision, exc)
            raise
        await self.gate.aoutcome(decision, _error_of(result))
        return result

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # every call goes through invoke
        raise NotImplementedError("GuardedTool runs through invoke/ainvoke")


def _guard_one(tool: Any, gate: Gate) -> BaseTool:
    if isinstance(tool, GuardedTool):
        return tool
    if not isinstance(tool, BaseTool):
        from langchain_core.tools import tool as as_tool

        tool = as_tool(tool)
    return GuardedTool(tool, gate)


def guard(target: Any, client: Any, **options: Any) -> Any:
    """``target`` (a tool, a list of tools, or a LangGraph ``ToolNode``) with every tool
    asking toolgate first. ``client`` is a toolgate client or a :class:`~._gate.Gate`;
    ``options`` are the Gate's (``plan_id``, ``context``, ``tool``, ``safety_profile``,
    ``on_deny``, ``report``)."""
    gate = client if isinstance(client, Gate) else Gate(client, **options)
    if isinstance(target, BaseTool) or callable(target) and not _is_tool_node(target):
        return _guard_one(target, gate)
    if _is_tool_node(target):
        from langgraph.prebuilt import ToolNode

        return ToolNode(
            [_guard_one(t, gate) for t in target.tools_by_name.values()],
            name=target.name,
            tags=target.tags,
            handle_tool_errors=target._handle_tool_errors,
            messages_key=target._messages_key,
            wrap_tool_call=target._wrap_tool_call,
            awrap_tool_call=target._awrap_tool_call,
        )
    if isinstance(target, Sequence) and not isinstance(target, str):
        return [_guard_one(t, gate) for t in target]
    raise TypeError(f"guard() takes a BaseTool, a list of tools or a ToolNode, not {target!r}")


def _is_tool_node(value: Any) -> bool:
    try:
        from langgraph.prebuilt import ToolNode
    except ImportError:  # LangChain without LangGraph
        return False
    return isinstance(value, ToolNode)
