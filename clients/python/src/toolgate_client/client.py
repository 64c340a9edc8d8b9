"""Sync and async HTTP clients for toolgate.

Both classes share everything but I/O: request building and answer classification live in
:class:`_BaseClient`; :class:`Client` and :class:`AsyncClient` only run the retry loop with
their own pooled ``httpx`` client.

Fail-closed rules, whatever happens:

* ``enforce`` returns only for a parsed decision whose ``allowed`` is JSON ``true``;
* a deny raises the class it names (an unknown class raises the nearest known ancestor from
  ``deny.hierarchy``, else :class:`ToolRuntimeError`);
* no decision at all (network, timeout, 5xx, garbage) raises :class:`ToolgateUnavailableError`.
"""

from __future__ import annotations

import asyncio
import json as _json
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import quote

import httpx

from ._version import __version__
from .errors import (
    PlanReadOnlyError,
    ToolgateRequestError,
    ToolgateUnavailableError,
)
from .guard import make_guard
from .models import Decision, DecisionParseError

__all__ = ["Client", "AsyncClient", "DEFAULT_BASE_URL", "RETRY_STATUSES"]

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
#: statuses retried (with the same X-Request-ID) before giving up with ToolgateUnavailableError
RETRY_STATUSES = frozenset({502, 503, 504})
#: upper bound for one backoff sleep, whatever ``backoff`` and the attempt number
MAX_BACKOFF = 2.0

_NO_BODY: Any = object()


def _segment(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return quote(value, safe=":@")


def _retriable_exception(exc: httpx.TransportError) -> bool:
    # Programming errors that no retry can fix.
    return not isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError))


def _envelope(response: httpx.Response) -> tuple[str | None, str | None, dict[str, Any]]:
    """(code, message, details) from ``{"error": {...}}``; Nones when the body is not one."""
    try:
        body = _json.loads(response.content)
    except ValueError:
        return None, None, {}
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        # Tolerate framework-default bodies such as {"detail": ...}.
        if isinstance(body, dict) and "detail" in body:
            return None, str(body["detail"]), {"detail": body["detail"]}
        return None, None, {}
    code = err.get("code") if isinstance(err.get("code"), str) else None
    message = err.get("message") if isinstance(err.get("message"), str) else None
    details = err.get("details") if isinstance(err.get("details"), dict) else {}
    return code, message, details


class _BaseClient:
    """Configuration, request building and answer classification (no I/O)."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | None = 2.0,
        retries: int = 2,
        backoff: float = 0.05,
        transport: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if base_url is None:
            base_url = os.environ.get("TOOLGATE_URL") or DEFAULT_BASE_URL
        if token is None:
            token = os.environ.get("TOOLGATE_TOKEN") or None
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError("retries must be an integer >= 0")
        if not isinstance(backoff, (int, float)) or backoff < 0:
            raise ValueError("backoff must be a number >= 0")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = float(backoff)
        self._default_headers: dict[str, str] = {
            "Accept": "application/json",
            "User-Agent": f"toolgate-client/{__version__}",
        }
        if token:
            self._default_headers["Authorization"] = f"Bearer {token}"
        if headers:
            self._default_headers.update(headers)
        self._transport = transport

    def __repr__(self) -> str:  # never shows the token
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    # -- request building ------------------------------------------------------------

    def _prepare(
        self, json_body: Any, request_id: str | None
    ) -> tuple[str, bytes | None, dict[str, str]]:
        request_id = request_id or uuid.uuid4().hex
        headers = {"X-Request-ID": request_id}
        content = None
        if json_body is not _NO_BODY and json_body is not None:
            # allow_nan=False: toolgate rejects NaN/Infinity; fail here, clearly.
            content = _json.dumps(json_body, allow_nan=False, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        return request_id, content, headers

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with jitter: in [b/2, b] where b = backoff * 2**attempt."""
        ceiling = min(self.backoff * (2**attempt), MAX_BACKOFF)
        return random.uniform(ceiling / 2, ceiling)

    @staticmethod
    def _authorize_body(
        *,
        tool: Mapping[str, Any],
        context: Mapping[str, Any] | None,
        plan_id: str | None,
        safety_profile: Mapping[str, Any] | None,
        layer: str | None,
        explain: bool,
    ) -> dict[str, Any]:
        if not isinstance(tool, Mapping):
            raise TypeError("tool must be a mapping such as {'name': 'fs.write', ...}")
        body: dict[str, Any] = {"tool": dict(tool), "context": dict(context or {})}
        if plan_id is not None:
            body["plan_id"] = plan_id
        if safety_profile is not None:
            body["safety_profile"] = dict(safety_profile)
        if layer is not None:
            body["layer"] = layer
        if explain:
            body["explain"] = True
        return body

    # -- answer classification -------------------------------------------------------

    def _unavailable(
        self,
        message: str,
        request_id: str,
        response: httpx.Response | None = None,
    ) -> ToolgateUnavailableError:
        status = response.status_code if response is not None else None
        code = details = None
        if response is not None:
            code, env_message, details = _envelope(response)
            if env_message:
                message = f"{message}: {env_message}"
        return ToolgateUnavailableError(
            message,
            status=status,
            code=code or "unavailable",
            details=details,
            request_id=request_id,
        )

    def _result(self, response: httpx.Response, request_id: str) -> Any:
        status = response.status_code
        if 200 <= status < 300:
            if status == 204 or not response.content:
                return None
            try:
                return _json.loads(response.content)
            except ValueError as exc:
                raise self._unavailable(
                    f"toolgate answered {status} with a body that is not JSON", request_id
                ) from exc
        if 400 <= status < 500:
            code, message, details = _envelope(response)
            message = message or f"toolgate refused the request (HTTP {status})"
            if status == 409 and code == "plan_read_only":
                decision_id = details.get("decision_id")
                raise PlanReadOnlyError(
                    message,
                    code=code,
                    details=details,
                    decision_id=decision_id if isinstance(decision_id, str) else None,
                    status=status,
                )
            raise ToolgateRequestError(
                message,
                status=status,
                code=code or f"http_{status}",
                details=details,
                request_id=request_id,
            )
        if status >= 500:
            raise self._unavailable(f"toolgate answered HTTP {status}", request_id, response)
        raise self._unavailable(f"unexpected HTTP status {status} from toolgate", request_id)

    @staticmethod
    def _decision(data: Any, request_id: str | None = None) -> Decision:
        try:
            return Decision.from_dict(data, request_id=request_id)
        except DecisionParseError as exc:
            raise ToolgateUnavailableError(
                f"toolgate's answer is not a valid decision: {exc}",
                code="invalid_decision",
                request_id=request_id,
            ) from exc

    @classmethod
    def _decisions(cls, data: Any, expected: int, request_id: str) -> list[Decision]:
        items = data.get("items") if isinstance(data, dict) else None
        if not isinstance(items, list) or len(items) != expected:
            raise ToolgateUnavailableError(
                f"toolgate's batch answer must hold {expected} items",
                code="invalid_decision",
                request_id=request_id,
            )
        return [cls._decision(item, request_id) for item in items]

    @staticmethod
    def _object(data: Any, what: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ToolgateUnavailableError(
                f"toolgate's answer to {what} is not a JSON object", code="invalid_answer"
            )
        return data


class Client(_BaseClient):
    """Synchronous toolgate client (one pooled ``httpx.Client``; thread-safe).

    >>> with Client("http://127.0.0.1:8000", token="...") as tg:
    ...     tg.enforce(plan_id="p-1", tool={"name": "fs.read"})
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | None = 2.0,
        retries: int = 2,
        backoff: float = 0.05,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            transport=transport,
            headers=headers,
        )
        self._sleep: Callable[[float], None] = time.sleep
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=self._default_headers,
            timeout=timeout,
            transport=transport,
        )

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> Any:
        """Send one call (retried on connection errors, timeouts and 502/503/504).

        Returns the decoded JSON answer (None for an empty answer). Raises
        :class:`ToolgateRequestError` for 4xx (:class:`PlanReadOnlyError` for a 409
        ``plan_read_only``) and :class:`ToolgateUnavailableError` when no answer was
        obtained. Every attempt carries the same ``X-Request-ID``.
        """
        request_id, content, headers = self._prepare(json, request_id)
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._http.request(
                    method, path, content=content, headers=headers, params=params
                )
            except httpx.TransportError as exc:
                if last or not _retriable_exception(exc):
                    raise self._unavailable(
                        f"toolgate unreachable after {attempt + 1} attempt(s): "
                        f"{type(exc).__name__}: {exc}",
                        request_id,
                    ) from exc
            else:
                if response.status_code not in RETRY_STATUSES or last:
                    return self._result(response, request_id)
            self._sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- decisions -------------------------------------------------------------------

    def authorize_tool(
        self,
        *,
        tool: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        plan_id: str | None = None,
        safety_profile: Mapping[str, Any] | None = None,
        layer: str | None = None,
        explain: bool = False,
        request_id: str | None = None,
    ) -> Decision:
        """Ask for one decision (``POST /v1/authorize-tool``); a deny is returned, not raised."""
        body = self._authorize_body(
            tool=tool,
            context=context,
            plan_id=plan_id,
            safety_profile=safety_profile,
            layer=layer,
            explain=explain,
        )
        request_id = request_id or uuid.uuid4().hex
        data = self.request("POST", "/v1/authorize-tool", body, request_id=request_id)
        return self._decision(data, request_id)

    def authorize_tools(
        self, requests: Sequence[Mapping[str, Any]], *, request_id: str | None = None
    ) -> list[Decision]:
        """A batch (``POST /v1/authorize-tools``, at most 100), answered in order."""
        reqs = [dict(r) for r in requests]
        request_id = request_id or uuid.uuid4().hex
        data = self.request(
            "POST", "/v1/authorize-tools", {"requests": reqs}, request_id=request_id
        )
        return self._decisions(data, len(reqs), request_id)

    def enforce(
        self,
        *,
        tool: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        plan_id: str | None = None,
        safety_profile: Mapping[str, Any] | None = None,
        layer: str | None = None,
        explain: bool = False,
        request_id: str | None = None,
    ) -> Decision:
        """Return the Decision if allowed, else raise the exact class named by ``deny.error``."""
        return self.authorize_tool(
            tool=tool,
            context=context,
            plan_id=plan_id,
            safety_profile=safety_profile,
            layer=layer,
            explain=explain,
            request_id=request_id,
        ).raise_for_deny()

    # -- plans, resolution, screening, errors ----------------------------------------

    def create_plan(
        self,
        action_id: str,
        *,
        plan_id: str | None = None,
        automation_profile: str | None = None,
        safety_profile: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Plan use: resolve and lock the profile (``POST /v1/plans``); idempotent."""
        body = _plan_body(action_id, plan_id, automation_profile, safety_profile)
        return self._object(self.request("POST", "/v1/plans", body), "POST /v1/plans")

    def get_plan(self, plan_id: str) -> dict[str, Any]:
        path = f"/v1/plans/{_segment(plan_id, 'plan_id')}"
        return self._object(self.request("GET", path), path)

    def resolve(self, **body: Any) -> dict[str, Any]:
        """Resolution without side effects (``POST /v1/resolve``)."""
        return self._object(self.request("POST", "/v1/resolve", body), "POST /v1/resolve")

    def screen(self, text: str, skill: str | None = None) -> dict[str, Any]:
        """Pre-model phrase screening (``POST /v1/screen``) -> ``{"rejected", ...}``."""
        return self._object(
            self.request("POST", "/v1/screen", _screen_body(text, skill)), "POST /v1/screen"
        )

    def errors(self) -> dict[str, Any]:
        """The error hierarchy and codes (``GET /v1/errors``)."""
        return self._object(self.request("GET", "/v1/errors"), "GET /v1/errors")

    # -- guards ----------------------------------------------------------------------

    def guard(
        self,
        *,
        tool: Mapping[str, Any] | Callable[..., Mapping[str, Any]],
        plan_id: str | Callable[..., str | None] | None = None,
        context: Mapping[str, Any] | Callable[..., Mapping[str, Any] | None] | None = None,
        safety_profile: Mapping[str, Any] | Callable[..., Any] | None = None,
        layer: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: ``enforce`` before every call of the wrapped (sync or async) function.

        ``tool``, ``plan_id``, ``context`` and ``safety_profile`` are values, or callables
        that receive the wrapped function's arguments by name (only those they accept,
        unless they take ``**kwargs``). With an async function the blocking call runs in a
        worker thread.
        """
        return make_guard(
            self,
            is_async=False,
            tool=tool,
            plan_id=plan_id,
            context=context,
            safety_profile=safety_profile,
            layer=layer,
        )

    @contextmanager
    def guarded(
        self,
        *,
        tool: Mapping[str, Any],
        plan_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        safety_profile: Mapping[str, Any] | None = None,
        layer: str | None = None,
        request_id: str | None = None,
    ) -> Iterator[Decision]:
        """``with client.guarded(tool=...) as decision:`` -- enforces on enter."""
        yield self.enforce(
            tool=tool,
            plan_id=plan_id,
            context=context,
            safety_profile=safety_profile,
            layer=layer,
            request_id=request_id,
        )


class AsyncClient(_BaseClient):
    """Asyncio toolgate client (one pooled ``httpx.AsyncClient``); same API, awaitable."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | None = 2.0,
        retries: int = 2,
        backoff: float = 0.05,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            transport=transport,
            headers=headers,
        )
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=self._default_headers,
            timeout=timeout,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> Any:
        """See :meth:`Client.request`."""
        request_id, content, headers = self._prepare(json, request_id)
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self._http.request(
                    method, path, content=content, headers=headers, params=params
                )
            except httpx.TransportError as exc:
                if last or not _retriable_exception(exc):
                    raise self._unavailable(
                        f"toolgate unreachable after {attempt + 1} attempt(s): "
                        f"{type(exc).__name__}: {exc}",
                        request_id,
                    ) from exc
            else:
                if response.status_code not in RETRY_STATUSES or last:
                    return self._result(response, request_id)
            await self._sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def authorize_tool(
        self,
        *,
        tool: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        plan_id: str | None = None,
        safety_profile: Mapping[str, Any] | None = None,
        layer: str | None = None,
        explain: bool = False,
        request_id: str | None = None,
    ) -> Decision:
        body = self._authorize_body(
            tool=tool,
            context=context,
            plan_id=plan_id,
            safety_profile=safety_profile,
            layer=layer,
            explain=explain,
        )
        request_id = request_id or uuid.uuid4().hex
        data = await self.request("POST", "/v1/authorize-tool", body, request_id=request_id)
        return self._decision(data, request_id)

    async def authorize_tools(
        self, requests: Sequence[Mapping[str, Any]], *, request_id: str | None = None
    ) -> list[Decision]:
        reqs = [dict(r) for r in requests]
        request_id = request_id or uuid.uuid4().hex
        data = await self.request(
            "POST", "/v1/authorize-tools", {"requests": reqs}, request_id=request_id
        )
        return self._decisions(data, len(reqs), request_id)

    async def enforce(
        self,
        *,
        tool: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        plan_id: str | None = None,
        safety_profile: Mapping[str, Any] | None = None,
        layer: str | None = None,
        explain: bool = False,
        request_id: str | None = None,
    ) -> Decision:
        decision = await self.authorize_tool(
            tool=tool,
            context=context,
            plan_id=plan_id,
            safety_profile=safety_profile,
            layer=layer,
            explain=explain,
            request_id=request_id,
        )
        return decision.raise_for_deny()

    async def create_plan(
        self,
        action_id: str,
        *,
        plan_id: str | None = None,
        automation_profile: str | None = None,
        safety_profile: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = _plan_body(action_id, plan_id, automation_profile, safety_profile)
        return self._object(await self.request("POST", "/v1/plans", body), "POST /v1/plans")

    async def get_plan(self, plan_id: str) -> dict[str, Any]:
        path = f"/v1/plans/{_segment(plan_id, 'plan_id')}"
        return self._object(await self.request("GET", path), path)

    async def resolve(self, **body: Any) -> dict[str, Any]:
        return self._object(await self.request("POST", "/v1/resolve", body), "POST /v1/resolve")

    async def screen(self, text: str, skill: str | None = None) -> dict[str, Any]:
        return self._object(
            await self.request("POST", "/v1/screen", _screen_body(text, skill)),
            "POST /v1/screen",
        )

    async def errors(self) -> dict[str, Any]:
        return self._object(await self.request("GET", "/v1/errors"), "GET /v1/errors")

    def guard(
        self,
        *,
        tool: Mapping[str, Any] | Callable[..., Mapping[str, Any]],
        plan_id: str | Callable[..., str | None] | None = None,
        context: Mapping[str, Any] | Callable[..., Mapping[str, Any] | None] | None = None,
        safety_profile: Mapping[str, Any] | Callable[..., Any] | None = None,
        layer: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator for ``async def`` functions (see :meth:`Client.guard`).

        Decorating a plain function raises TypeError: an AsyncClient cannot be awaited
        from synchronous code -- use a :class:`Client` there.
        """
        return make_guard(
            self,
            is_async=True,
            tool=tool,
            plan_id=plan_id,
            context=context,
            safety_profile=safety_profile,
            layer=layer,
        )

    @asynccontextmanager
    async def guarded(
        self,
        *,
        tool: Mapping[str, Any],
        plan_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        safety_profile: Mapping[str, Any] | None = None,
        layer: str | None = None,
        request_id: str | None = None,
    ) -> AsyncIterator[Decision]:
        """``async with client.guarded(tool=...) as decision:`` -- enforces on enter."""
        yield await self.enforce(
            tool=tool,
            plan_id=plan_id,
            context=context,
            safety_profile=safety_profile,
            layer=layer,
            request_id=request_id,
        )


def _plan_body(
    action_id: str,
    plan_id: str | None,
    automation_profile: str | None,
    safety_profile: Mapping[str, Any] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"action_id": action_id}
    if plan_id is not None:
        body["plan_id"] = plan_id
    if automation_profile is not None:
        body["automation_profile"] = automation_profile
    if safety_profile is not None:
        body["safety_profile"] = dict(safety_profile)
    return body


def _screen_body(text: str, skill: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"text": text}
    if skill is not None:
        body["skill"] = skill
    return body
