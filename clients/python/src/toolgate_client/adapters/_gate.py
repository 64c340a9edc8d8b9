"""What every framework adapter shares: one tool call in, a decision out, the outcome back.

A :class:`Gate` holds the client and how a framework's tool call becomes toolgate's request
(``tool``, ``plan_id``, ``context``, ``safety_profile``); the adapters only translate the
framework's calls and answers.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..async_client import AsyncClient
from ..errors import ToolgateDeny
from ..guard import error_text
from ..models import Decision

__all__ = ["Gate", "OnDeny", "deny_message"]

OnDeny = Literal["message", "raise"]
#: (tool name, arguments) -> a value
Builder = Callable[[str, dict[str, Any]], Any]


def deny_message(exc: ToolgateDeny) -> str:
    """What the model reads for a deny: the class, the code, the message and the decision."""
    return (f"Denied by toolgate: {type(exc).__name__} ({exc.code}): {exc.message} "
            f"[decision {exc.decision_id}]")


def _build(value: Any, name: str, args: dict[str, Any]) -> Any:
    return value(name, args) if callable(value) else value


class Gate:
    """How tool calls of one agent are asked for and reported.

    ``client``: a :class:`~toolgate_client.Client` or :class:`~toolgate_client.AsyncClient`
    (a sync client's calls run in a worker thread on async paths). ``tool``: a function
    ``(name, args) -> tool spec``; by default ``{"name": name, "args": args}``, so the
    registry says what the tool does (an unregistered tool must say it: return a spec with
    ``capability``). ``plan_id``, ``context`` and ``safety_profile``: values, or functions
    ``(name, args) -> value``. ``on_deny``: ``"message"`` (the model sees the deny as the
    tool's error) or ``"raise"`` (the deny's class is raised). ``report``: report outcomes.
    """

    def __init__(
        self,
        client: Any,
        *,
        plan_id: str | Builder | None = None,
        context: Mapping[str, Any] | Builder | None = None,
        tool: Builder | None = None,
        safety_profile: Mapping[str, Any] | Builder | None = None,
        on_deny: OnDeny = "message",
        report: bool = True,
    ) -> None:
        if on_deny not in ("message", "raise"):
            raise ValueError("on_deny must be 'message' or 'raise'")
        self.client = client
        self.plan_id = plan_id
        self.context = context
        self.tool = tool
        self.safety_profile = safety_profile
        self.on_deny: OnDeny = on_deny
        self.report = report

    def request(self, name: str, args: Mapping[str, Any] | None) -> dict[str, Any]:
        """``enforce``'s keywords for one call of tool ``name`` with ``args``."""
        args = dict(args or {})
        tool = self.tool(name, args) if self.tool else {"name": name, "args": args}
        return {
            "tool": tool,
            "plan_id": _build(self.plan_id, name, args),
            "context": _build(self.context, name, args),
            "safety_profile": _build(self.safety_profile, name, args),
        }

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        bound = getattr(self.client, method)
        if isinstance(self.client, AsyncClient):
            return await bound(*args, **kwargs)
        return await asyncio.to_thread(functools.partial(bound, *args, **kwargs))

    # -- the decision: (decision, None) to run, (None, message) for a deny shown to the model

    def _denied(self, exc: ToolgateDeny) -> tuple[None, str]:
        if self.on_deny == "raise":
            raise exc
        return None, deny_message(exc)

    def decide(self, name: str,
               args: Mapping[str, Any] | None) -> tuple[Decision | None, str | None]:
        if isinstance(self.client, AsyncClient):
            raise TypeError("a synchronous tool call needs a synchronous toolgate_client.Client")
        try:
            return self.client.enforce(**self.request(name, args)), None
        except ToolgateDeny as exc:
            return self._denied(exc)

    async def adecide(self, name: str,
                      args: Mapping[str, Any] | None) -> tuple[Decision | None, str | None]:
        try:
            return await self._call("enforce", **self.request(name, args)), None
        except ToolgateDeny as exc:
            return self._denied(exc)

    # -- the outcome ------------------------------------------------------------------------

    @staticmethod
    def _outcome(error: BaseException | str | None) -> dict[str, Any]:
        if error is None:
            return {"status": "succeeded"}
        text = error if isinstance(error, str) else error_text(error)
        return {"status": "execution_failed", "error": text[:2000]}

    def outcome(self, decision: Decision, error: BaseException | str | None = None) -> None:
        if self.report and decision.decision_id:
            self.client.report_outcome(decision.decision_id, **self._outcome(error))

    async def aoutcome(self, decision: Decision, error: BaseException | str | None = None) -> None:
        if self.report and decision.decision_id:
            await self._call("report_outcome", decision.decision_id, **self._outcome(error))
