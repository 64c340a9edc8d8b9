"""Sync and async HTTP clients for toolgate.

Both classes share everything but I/O: request building and answer classification live in
:class:`~toolgate_client._base._BaseClient`; :class:`Client` (here) and :class:`AsyncClient`
(``async_client.py``, re-exported here) only run the retry loop with their own pooled
``httpx`` client.

Fail-closed rules, whatever happens:

* ``enforce`` returns only for a parsed decision whose ``allowed`` is JSON ``true``;
* a deny raises the class it names (an unknown class raises the nearest known ancestor from
  ``deny.hierarchy``, else :class:`ToolRuntimeError`);
* no decision at all (network, timeout, 5xx, garbage) raises :class:`ToolgateUnavailableError`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import httpx

from ._base import (
    DEFAULT_BASE_URL,
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
from .async_client import AsyncClient
from .guard import error_text, execution_failed, make_guard, outcome_body
from .models import Decision

__all__ = ["Client", "AsyncClient", "DEFAULT_BASE_URL", "RETRY_STATUSES"]


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
        timeout: float | None = None,
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
                response = self._attempt(
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
            self._sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: dict[str, str],
        params: Mapping[str, Any] | None,
        timeout: float | None,
    ) -> httpx.Response:
        """One attempt, answered in full within ``timeout`` seconds (connect, send and every
        byte of the answer), or ``DeadlineExceeded``.

        httpx's timeouts bound each read, not the answer: a service that sends a byte every
        second would hold the caller for ever. The attempt runs in a daemon thread the caller
        waits on for at most ``timeout``; the thread itself stops reading once the deadline
        has passed (a body that drips) and, being a daemon, never keeps the process alive.
        """
        if timeout is None:
            return self._fetch(method, path, content, headers, params, None, None)
        deadline = time.monotonic() + timeout
        box: list[Any] = []
        done = threading.Event()

        def run() -> None:
            try:
                box.append(self._fetch(method, path, content, headers, params, timeout,
                                       deadline))
            except BaseException as exc:  # handed to the caller, who raises it
                box.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name="toolgate-client-attempt", daemon=True).start()
        if not done.wait(timeout):
            raise DeadlineExceeded(f"no complete answer within {timeout} s")
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def _fetch(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: dict[str, str],
        params: Mapping[str, Any] | None,
        timeout: float | None,
        deadline: float | None,
    ) -> httpx.Response:
        with self._http.stream(
            method,
            path,
            content=content,
            headers=headers,
            params=params,
            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
        ) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if deadline is not None and time.monotonic() > deadline:
                    raise DeadlineExceeded(f"no complete answer within {timeout} s")
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                content=bytes(body),
                request=response.request,
            )

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
        a person which approval to decide.
        """
        ask = dict(
            tool=tool,
            context=context,
            plan_id=plan_id,
            safety_profile=safety_profile,
            layer=layer,
            explain=explain,
        )
        decision = self.authorize_tool(**ask, request_id=request_id)
        approval = _pending_approval(decision) if wait_for_approval else None
        if approval is None:
            return decision.raise_for_deny()
        _announce(on_pending, approval)
        deadline = time.monotonic() + float(wait_for_approval or 0)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _gave_up(decision, approval)
            approval = self.get_approval(approval["approval_id"], wait=_wait_slice(remaining))
            if approval.get("state") == "pending":
                continue
            if approval.get("state") != "granted":
                raise _gave_up(decision, approval)
            decision = self.authorize_tool(**ask)
            if decision.allowed:
                return decision
            # Someone else used the grant first: wait on the approval this deny names.
            following = _pending_approval(decision)
            if following is None:
                return decision.raise_for_deny()
            approval = following
            _announce(on_pending, approval)

    # -- approvals (SPEC §10) ------------------------------------------------------------

    def get_approval(self, approval_id: str, *, wait: int | None = None) -> dict[str, Any]:
        """One approval; ``wait`` (1..60 s): answered when it leaves pending, or then."""
        path = f"/v1/approvals/{_segment(approval_id, 'approval_id')}"
        if wait is not None:
            path += f"?wait={int(wait)}"
        # The answer may take `wait` seconds by design: the client's own timeout is for
        # decisions, not for this.
        timeout = None if wait is None or self.timeout is None else self.timeout + int(wait)
        return self._object(self.request("GET", path, timeout=timeout), "GET /v1/approvals/{id}")

    def list_approvals(self, **filters: Any) -> dict[str, Any]:
        """``GET /v1/approvals`` (state, project, plan_id, tool, limit, cursor)."""
        query = "&".join(
            f"{k}={quote(str(v), safe='')}" for k, v in filters.items() if v is not None
        )
        path = "/v1/approvals" + (f"?{query}" if query else "")
        return self._object(self.request("GET", path), "GET /v1/approvals")

    def grant_approval(
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
        return self._object(self.request("POST", path, body), path)

    def reject_approval(self, approval_id: str, reason: str) -> dict[str, Any]:
        path = f"/v1/approvals/{_segment(approval_id, 'approval_id')}/reject"
        return self._object(self.request("POST", path, {"reason": reason}), path)

    def cancel_approval(self, approval_id: str, reason: str | None = None) -> dict[str, Any]:
        path = f"/v1/approvals/{_segment(approval_id, 'approval_id')}/cancel"
        body = {"reason": reason} if reason is not None else {}
        return self._object(self.request("POST", path, body), path)

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
        report: bool = True,
        cost: float | Callable[[Any], float | None] | None = None,
        wait_for_approval: float | None = None,
        on_pending: Callable[[dict[str, Any]], Any] | None = None,
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
            report=report,
            cost=cost,
            wait_for_approval=wait_for_approval,
            on_pending=on_pending,
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
        report: bool = True,
        cost: float | Callable[[], float | None] | None = None,
        wait_for_approval: float | None = None,
        on_pending: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Iterator[Decision]:
        """``with client.guarded(tool=...) as decision:`` -- enforces on enter."""
        decision = self.enforce(
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
            self.report_outcome(
                decision.decision_id or "", "execution_failed", error=error_text(exc)
            )
            raise execution_failed(decision, exc) from exc
        self.report_outcome(
            decision.decision_id or "", "succeeded", cost=cost() if callable(cost) else cost
        )

    # -- outcomes (SPEC §11) -------------------------------------------------------------

    def report_outcome(
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
        return self._object(self.request("POST", path, body), path)


def _announce(on_pending: Callable[[dict[str, Any]], Any] | None,
              approval: dict[str, Any]) -> None:
    if on_pending is not None:
        on_pending(approval)
