"""toolgate for the OpenAI Agents SDK (extra ``openai-agents``).

``guard(tool | [tools], client, ...)`` gives back copies of the ``FunctionTool``\\ s that ask
toolgate before they run and report the outcome after::

    from toolgate_client.adapters.openai_agents import guard

    agent = Agent(name="ops", tools=guard([search, write_file], client, plan_id="p-1"))

A deny is the tool's answer to the model (``"Denied by toolgate: <Class> (<code>): ..."``),
or with ``on_deny="raise"`` the deny's class is raised. When toolgate cannot decide, the
tool does not run and :class:`~toolgate_client.ToolgateUnavailableError` is raised. (Out of
``Runner.run`` both come as the SDK's ``UserError`` "Error running tool ...", the toolgate
error its ``__cause__``: the SDK wraps whatever a tool raises.) An exception inside the tool
is reported ``execution_failed`` (the SDK then turns it into the tool's answer, as it would
without toolgate); otherwise ``succeeded``.

``input_guardrail(client, ...)`` is the same decision as a tool input guardrail, for
``function_tool(..., tool_input_guardrails=[...])``: a deny is ``reject_content`` (the model
reads the message) or, with ``on_deny="raise"``, ``raise_exception``. It reports no outcome
(a guardrail does not see the tool run): prefer ``guard`` where outcomes matter.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents import FunctionTool, ToolGuardrailFunctionOutput, ToolInputGuardrail
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData

from ..errors import ToolgateDeny
from ..models import Decision
from ._gate import Gate, deny_message

__all__ = ["guard", "input_guardrail"]

Invoke = Callable[[ToolContext[Any], str], Awaitable[Any]]


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}  # the SDK answers the model about bad JSON itself; toolgate still decides
    return value if isinstance(value, dict) else {}


#: the decision of the call under way, from the outer wrapper to the reporting inner one
_DECISION: contextvars.ContextVar[Decision | None] = contextvars.ContextVar(
    "toolgate_decision", default=None)


def _asking(gate: Gate, name: str, invoke: Invoke) -> Invoke:
    """Asks toolgate, then runs ``invoke`` (which reports) with the decision in context."""

    @functools.wraps(invoke)
    async def asking(ctx: ToolContext[Any], text: str) -> Any:
        decision, message = await gate.adecide(name, _arguments(text))
        if decision is None:
            return message
        token = _DECISION.set(decision)
        try:
            return await invoke(ctx, text)
        finally:
            _DECISION.reset(token)

    return asking


def _reporting(gate: Gate, invoke: Invoke) -> Invoke:
    """Runs the tool and reports its outcome under the decision ``_asking`` set."""

    @functools.wraps(invoke)
    async def reporting(ctx: ToolContext[Any], text: str) -> Any:
        decision = _DECISION.get()
        if decision is None:  # not reached through _asking: never run unasked
            raise RuntimeError("a guarded tool ran without a toolgate decision")
        try:
            result = await invoke(ctx, text)
        except Exception as exc:
            await gate.aoutcome(decision, exc)
            raise
        await gate.aoutcome(decision)
        return result

    return reporting


def _guard_one(tool: FunctionTool, gate: Gate) -> FunctionTool:
    if not isinstance(tool, FunctionTool):
        raise TypeError(f"guard() takes FunctionTools (e.g. from @function_tool), not {tool!r}")
    guarded = copy.copy(tool)
    invoker = tool.on_invoke_tool
    impl = getattr(invoker, "_invoke_tool_impl", None)
    handled = getattr(invoker, "_on_handled_error", None)
    if impl is not None and handled is not None:
        # @function_tool's invoker turns the function's exceptions into its answer: report
        # inside it (where the exception is seen), ask outside it (a deny or no decision
        # must not become "an error occurred while running the tool").
        inner = type(invoker)(_reporting(gate, impl), handled, function_tool=guarded)
    else:
        inner = _reporting(gate, invoker)
    guarded.on_invoke_tool = _asking(gate, tool.name, inner)
    return guarded


def guard(target: FunctionTool | Sequence[FunctionTool], client: Any,
          **options: Any) -> Any:
    """A guarded copy of ``target`` (a ``FunctionTool`` or a list of them). ``client`` is a
    toolgate client or a :class:`~._gate.Gate`; ``options`` are the Gate's."""
    gate = client if isinstance(client, Gate) else Gate(client, **options)
    if isinstance(target, FunctionTool):
        return _guard_one(target, gate)
    return [_guard_one(t, gate) for t in target]


def input_guardrail(client: Any, **options: Any) -> ToolInputGuardrail[Any]:
    """A tool input guardrail asking toolgate (``options``: the Gate's)."""
    gate = client if isinstance(client, Gate) else Gate(client, **options)

    async def toolgate(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        try:
            decision, message = await gate.adecide(ctx.tool_name, _arguments(ctx.tool_arguments))
        except ToolgateDeny as exc:  # on_deny="raise": halt the run
            return ToolGuardrailFunctionOutput.raise_exception(output_info=deny_message(exc))
        if decision is None:
            return ToolGuardrailFunctionOutput.reject_content(message or "", output_info=message)
        return ToolGuardrailFunctionOutput.allow(output_info=decision.decision_id)

    return ToolInputGuardrail(guardrail_function=toolgate, name="toolgate")
