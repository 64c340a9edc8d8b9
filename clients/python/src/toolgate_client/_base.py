"""What the sync and async clients share: configuration, request building and answer
classification, with no I/O (:class:`_BaseClient`), and the bodies of the small calls.

:class:`~toolgate_client.Client` (``client.py``) and :class:`~toolgate_client.AsyncClient`
(``async_client.py``) add only the retry loop over their own pooled ``httpx`` client.
"""

from __future__ import annotations

import json as _json
import os
import random
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from ._version import __version__
from .errors import (
    PlanReadOnlyError,
    ToolgateRequestError,
    ToolgateUnavailableError,
)
from .models import Decision, DecisionParseError

__all__ = ["DEFAULT_BASE_URL", "RETRY_STATUSES", "MAX_BACKOFF", "loads_strict"]

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


class DeadlineExceeded(httpx.TimeoutException):
    """An attempt's answer was not complete within the client's ``timeout`` (retried like any
    timeout; after the last attempt, :class:`ToolgateUnavailableError`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class _NotStrict(ValueError):
    """An answer that parses as JSON only by guessing (duplicate keys, NaN): no answer."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            # `{"allowed": false, "allowed": true}`: which one the service meant is a guess,
            # and a decision is never a guess.
            raise _NotStrict(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise _NotStrict(f"{name} is not JSON")


def loads_strict(content: bytes | str) -> Any:
    """JSON as RFC 8259 says it: no duplicate key at any level, no NaN or Infinity.

    Raises ``ValueError`` (its subclass ``_NotStrict`` for what ``json`` would accept)."""
    return _json.loads(content, object_pairs_hook=_unique, parse_constant=_no_constant)


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
                return loads_strict(response.content)
            except _NotStrict as exc:
                raise self._unavailable(
                    f"toolgate answered {status} with a body that is not strict JSON: {exc}",
                    request_id,
                ) from exc
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


# -- approvals held by the service (enforce(..., wait_for_approval=S)) -------------------


def _pending_approval(decision: Decision) -> dict[str, Any] | None:
    """The pending approval a human_approval_required deny names, if any."""
    deny = decision.deny
    if deny is None or deny.code != "human_approval_required":
        return None
    approval = (deny.details or {}).get("approval")
    if (
        isinstance(approval, dict)
        and approval.get("state") == "pending"
        and isinstance(approval.get("approval_id"), str)
    ):
        return approval
    return None


def _wait_slice(remaining: float) -> int:
    """The ``wait`` of one GET: whole seconds, 1..60 (the server's bounds)."""
    return max(1, min(60, int(remaining + 0.999)))


def _gave_up(decision: Decision, approval: dict[str, Any]) -> BaseException:
    """The deny's exception, carrying the approval as last read."""
    exc = decision.exception()
    assert exc is not None
    exc.details = {**exc.details, "approval": approval}
    return exc
