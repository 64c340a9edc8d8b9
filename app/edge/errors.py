"""One error envelope for everything that is not a decision: {"error": {code, message, details}}.

Routes and services raise these; app/edge/handlers.py renders them (render). No
HTTPException anywhere else.
"""

from __future__ import annotations

from typing import Any


class ToolgateError(Exception):
    status = 500
    code = "internal"
    headers: dict[str, str] | None = None

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class InvalidInput(ToolgateError):
    status = 422
    code = "invalid_input"


class NotFound(ToolgateError):
    status = 404
    code = "not_found"


class Conflict(ToolgateError):
    status = 409
    code = "conflict"


class PayloadTooLarge(ToolgateError):
    status = 413
    code = "payload_too_large"


class RequestTimeout(ToolgateError):
    status = 408
    code = "request_timeout"


class HeadersTooLarge(ToolgateError):
    status = 431
    code = "headers_too_large"


class Unauthorized(ToolgateError):
    status = 401
    code = "unauthorized"
    headers = {"WWW-Authenticate": "Bearer"}


class Forbidden(ToolgateError):
    status = 403
    code = "forbidden"


class RateLimited(ToolgateError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int, **details: Any) -> None:
        super().__init__(message, retry_after=retry_after, **details)
        self.headers = {"Retry-After": str(retry_after)}


class Unavailable(ToolgateError):
    status = 503
    code = "unavailable"


class InvalidJSON(ValueError):
    """The body is not JSON at all: 422 `invalid_json`, before any field is looked at."""
