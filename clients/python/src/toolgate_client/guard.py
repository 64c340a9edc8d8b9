"""The ``guard`` decorator shared by Client and AsyncClient."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["error_text", "execution_failed", "make_guard", "outcome_body"]


def _arguments(sig: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict:
    """The call's arguments by name, defaults applied, ``**kwargs`` flattened in."""
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if sig.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
            for key, val in value.items():
                out.setdefault(key, val)
        else:
            out[name] = value
    return out


def _builder(value: Any) -> Callable[[dict[str, Any]], Any]:
    """Turn a value-or-callable into ``arguments -> value``."""
    if not callable(value):
        return lambda _arguments: value
    try:
        params = inspect.signature(value).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: pass everything
        return lambda arguments: value(**arguments)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return lambda arguments: value(**arguments)
    accepted = {
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return lambda arguments: value(**{k: v for k, v in arguments.items() if k in accepted})


def outcome_body(
    status: str,
    *,
    cost: float | None = None,
    verified: bool | None = None,
    error: str | None = None,
    args_sha256: str | None = None,
    artifacts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``POST /v1/decisions/{id}/outcome``'s body: the fields given, nothing else."""
    body: dict[str, Any] = {"status": status}
    for key, value in (("cost", cost), ("verified", verified), ("error", error),
                       ("args_sha256", args_sha256), ("artifacts", artifacts)):
        if value is not None:
            body[key] = value
    return body


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def execution_failed(decision: Any, exc: BaseException) -> Exception:
    """The ToolExecutionError a guard raises (``from exc``) when the guarded call fails."""
    from .errors import ToolExecutionError

    return ToolExecutionError(
        f"Tool call of decision {decision.decision_id} failed: {error_text(exc)}",
        code="execution_failed",
        decision_id=decision.decision_id,
        decision=decision,
    )


def _cost(cost: Any, *args: Any) -> float | None:
    return cost(*args) if callable(cost) else cost


def make_guard(
    client: Any,
    *,
    is_async: bool,
    tool: Any,
    plan_id: Any = None,
    context: Any = None,
    safety_profile: Any = None,
    layer: str | None = None,
    report: bool = False,
    cost: Any = None,
    wait_for_approval: float | None = None,
    on_pending: Any = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    if tool is None:
        raise TypeError("guard() needs tool= (a mapping, or a callable building one)")
    build_tool = _builder(tool)
    build_plan = _builder(plan_id)
    build_context = _builder(context)
    build_profile = _builder(safety_profile)

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)

        def enforce_kwargs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            arguments = _arguments(sig, args, kwargs)
            return {
                "tool": build_tool(arguments),
                "plan_id": build_plan(arguments),
                "context": build_context(arguments),
                "safety_profile": build_profile(arguments),
                "layer": layer,
                "wait_for_approval": wait_for_approval,
                "on_pending": on_pending,
            }

        if inspect.iscoroutinefunction(fn):

            async def call(method: Any, *call_args: Any, **call_kwargs: Any) -> Any:
                if is_async:
                    return await method(*call_args, **call_kwargs)
                # a sync Client must not block the event loop
                return await asyncio.to_thread(
                    functools.partial(method, *call_args, **call_kwargs))

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                decision = await call(client.enforce, **enforce_kwargs(args, kwargs))
                if not report:
                    return await fn(*args, **kwargs)
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    await call(client.report_outcome, decision.decision_id,
                               "execution_failed", error=error_text(exc))
                    raise execution_failed(decision, exc) from exc
                await call(client.report_outcome, decision.decision_id, "succeeded",
                           cost=_cost(cost, result))
                return result

            return async_wrapper

        if is_async:
            raise TypeError(
                f"AsyncClient.guard can only wrap 'async def' functions, not {fn!r}; "
                "use a synchronous Client for plain functions"
            )

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            decision = client.enforce(**enforce_kwargs(args, kwargs))
            if not report:
                return fn(*args, **kwargs)
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                client.report_outcome(decision.decision_id, "execution_failed",
                                      error=error_text(exc))
                raise execution_failed(decision, exc) from exc
            client.report_outcome(decision.decision_id, "succeeded", cost=_cost(cost, result))
            return result

        return wrapper

    return decorator
