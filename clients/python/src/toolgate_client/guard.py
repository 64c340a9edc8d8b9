"""The ``guard`` decorator shared by Client and AsyncClient."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["make_guard"]


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


def make_guard(
    client: Any,
    *,
    is_async: bool,
    tool: Any,
    plan_id: Any = None,
    context: Any = None,
    safety_profile: Any = None,
    layer: str | None = None,
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
            }

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                params = enforce_kwargs(args, kwargs)
                if is_async:
                    await client.enforce(**params)
                else:  # a sync Client must not block the event loop
                    await asyncio.to_thread(functools.partial(client.enforce, **params))
                return await fn(*args, **kwargs)

            return async_wrapper

        if is_async:
            raise TypeError(
                f"AsyncClient.guard can only wrap 'async def' functions, not {fn!r}; "
                "use a synchronous Client for plain functions"
            )

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            client.enforce(**enforce_kwargs(args, kwargs))
            return fn(*args, **kwargs)

        return wrapper

    return decorator
