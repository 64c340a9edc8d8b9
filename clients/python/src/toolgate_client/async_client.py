"""The asyncio client: :class:`AsyncClient` (see ``client.py`` for the rules both follow)."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from ._base import (
    RETRY_STATUSES,
    DeadlineExceeded,
    _BaseClient,
    _gave_up,
    _pending_approval,
    _plan_body,
    _retriable_exception,
    _screen_body,
    _segment,
    _wait_slice,
)
from .guard import error_text, execution_failed, make_guard, outcome_body
from .models import Decision

__all__ = ["AsyncClient"]


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
        timeout: float | None = None,
    ) -> Any:
        """See :meth:`Client.request`."""
        request_id, content, headers = self._prepare(json, request_id)
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self._attempt(
                    method, path, content, headers, params,
                    self.timeout if timeout is None else timeout,
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

    async def _attempt(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: dict[str, str],
        params: Mapping[str, Any] | None,
        timeout: float | None,
    ) -> httpx.Response:
        """One attempt, answered in full within ``timeout`` seconds (connect, send and every
        byte of the answer): httpx's own timeouts bound each read, not the answer."""
        try:
            with anyio.fail_after(timeout):
                return await self._http.request(
                    method,
                    path,
                    content=content,
                    headers=headers,
                    params=params,
                    timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
                )
        except TimeoutError as exc:
            raise DeadlineExceeded(f"no complete answer within {timeout} s") from exc

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
        wait_for_approval: float | None = None,
        on_pending: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Decision:
        """Return the Decision if allowed, else raise the exact class named by ``deny.error``.

        ``wait_for_approval=S``: when the deny is ``human_approval_required`` with a
        pending approval held by the service, wait up to S seconds for a person to decide
        it and, once granted, ask again (the same request). Raises
        :class:`ToolHumanApprovalRequiredError`, carrying the approval
        (``exc.approval``), when it is rejected, cancelled, expires or the wait runs out.
        ``on_pending(approval)`` is called once for each pending approval it starts waiting
        on (the approval as the deny names it: ``approval_id``, ``expires_at``, ...), to show
        a person which approval to decide (a coroutine function is awaited).
        """
        ask = dict(
            tool=tool,
            context=context,
            plan_id=plan_id,
            safety_profile=safety_profile,
            layer=layer,
            explain=explain,
        )
        decision = await self.authorize_tool(**ask, request_id=request_id)
        approval = _pending_approval(decision) if wait_for_approval else None
        if approval is None:
            return decision.raise_for_deny()
        await _announce(on_pending, approval)
        deadline = asyncio.get_running_loop().time() + float(wait_for_approval or 0)
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise _gave_up(decision, approval)
            approval = await self.get_approval(approval["approval_id"], wait=_wait_slice(remaining))
            if approval.get("state") == "pending":
                continue
            if approval.get("state") != "granted":
                raise _gave_up(decision, approval)
            decision = await self.authorize_tool(**ask)
            if decision.allowed:
                return decision
            # Someone else used the grant first: wait on the approval this deny names.
            following = _pending_approval(decision)
            if following is None:
                return decision.raise_for_deny()
            approval = following
            await _announce(on_pending, approval)

    # -- approvals (SPEC §10) ------------------------------------------------------------

    async def get_approval(self, approval_id: str, *, wait: int | None = None) -> dict[str, Any]:
        """One approval; ``wait`` (1..60 s): answered when it leaves pending, or then."""
        path = f"/v1/approvals/{_segment(approval_id, 'approval_id')}"
        if wait is not None:
            path += f"?wait={int(wait)}"
        # The answer may take `wait` seconds by design: the client's own timeout is for
        # decisions, not for this.
        timeout = None if wait is None or self.timeout is None else self.timeout + int(wait)
        return self._object(
            await self.request("GET", path, timeout=timeout), "GET /v1/approvals/{id}"
        )

    async def list_approvals(self, **filters: Any) -> dict[str, Any]:
        """``GET /v1/approvals`` (state, project, plan_id, tool, limit, cursor)."""
        query = "&".join(
            f"{k}={quote(str(v), safe='')}" for k, v in filters.items() if v is not None
        )
        path = "/v1/approvals" + (f"?{query}" if query else "")
        return self._object(await self.request("GET", path), "GET /v1/approvals")

    async def grant_approval(
        self,
        approval_id: str,
        *,
        note: str | None = None,
        ttl_seconds: int | None = None,
        uses: int | None = None,
    ) -> dict[str, Any]:
        body = {
            k: v
            for k, v in {"note": note, "ttl_seconds": ttl_seconds, "uses": uses}.items()
            if v is not None
        }
        path = f"/v1/approvals/{_segment(approval_id, 'approval_id')}/grant"
        return self._object(await self.request("POST", path, body), path)

    async def reject_approval(self, approval_id: str, reason: str) -> dict[str, Any]:
        path = f"/v1/approvals/{_segment(approval_id, 'approval_id')}/reject"
        return self._object(await self.request("POST", path, {"reason": reason}), path)

    async def cancel_approval(self, approval_id: str, reason: str | None = None) -> dict[str, Any]:
        path = f"/v1/approvals/{_segment(approval_id, 'approval_id')}/cancel"
        body = {"reason": reason} if reason is not None else {}
        return self._object(await self.request("POST", path, body), path)

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
        report: bool = True,
        cost: float | Callable[[Any], float | None] | None = None,
        wait_for_approval: float | None = None,
        on_pending: Callable[[dict[str, Any]], Any] | None = None,
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
            report=report,
            cost=cost,
            wait_for_approval=wait_for_approval,
            on_pending=on_pending,
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
        report: bool = True,
        cost: float | Callable[[], float | None] | None = None,
        wait_for_approval: float | None = None,
        on_pending: Callable[[dict[str, Any]], Any] | None = None,
    ) -> AsyncIterator[Decision]:
        """``async with client.guarded(tool=...) as decision:`` -- enforces on enter."""
        decision = await self.enforce(
            tool=tool,
            plan_id=plan_id,
            context=context,
            safety_profile=safety_profile,
            layer=layer,
            request_id=request_id,
            wait_for_approval=wait_for_approval,
            on_pending=on_pending,
        )
        if not report:
            yield decision
            return
        try:
            yield decision
        except Exception as exc:
            await self.report_outcome(
                decision.decision_id or "", "execution_failed", error=error_text(exc)
            )
            raise execution_failed(decision, exc) from exc
        await self.report_outcome(
            decision.decision_id or "", "succeeded", cost=cost() if callable(cost) else cost
        )

    # -- outcomes (SPEC §11) -------------------------------------------------------------

    async def report_outcome(
        self,
        decision_id: str,
        status: str = "succeeded",
        *,
        cost: float | None = None,
        verified: bool | None = None,
        error: str | None = None,
        args_sha256: str | None = None,
        artifacts: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Report what an allowed call did (``POST /v1/decisions/{id}/outcome``): the
        stored outcome. The same report again is answered with it; a different one raises
        (409)."""
        path = f"/v1/decisions/{_segment(decision_id, 'decision_id')}/outcome"
        body = outcome_body(
            status,
            cost=cost,
            verified=verified,
            error=error,
            args_sha256=args_sha256,
            artifacts=artifacts,
        )
        return self._object(await self.request("POST", path, body), path)


async def _announce(on_pending: Callable[[dict[str, Any]], Any] | None,
                    approval: dict[str, Any]) -> None:
    if on_pending is not None:
        result = on_pending(approval)
        if inspect.isawaitable(result):
            await result
