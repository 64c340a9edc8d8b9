"""Logs (SPEC §13, docs/operations.md): the logging configuration `toolgate serve` hands
uvicorn (TOOLGATE_LOG_FORMAT=text|json), request ids, and the one line per request that
TOOLGATE_ACCESS_LOG turns on.

Every line carries the request's id (X-Request-ID, generated when the client sent none)
and, where there is one, the decision's: a request's own lines get them from the context
variables the app sets per request; the access line passes them itself (the uvicorn
plug-in answers without a task, so it has no context of its own)."""

from __future__ import annotations

import logging
import os
from contextvars import ContextVar
from itertools import count
from typing import Any

import orjson

from app.kit.caller import VALID_REQUEST_ID

ACCESS = logging.getLogger("toolgate.access")
REQUEST_ID: ContextVar[str | None] = ContextVar("toolgate_request_id", default=None)
DECISION_ID: ContextVar[str | None] = ContextVar("toolgate_decision_id", default=None)

# A request id the client sends is echoed and logged as it came only when it is made of
# these characters, 1 to 128 of them (SPEC §17); anything else is replaced by a generated
# id, so a client cannot write `x status=200 decision_id=forged` into a text log line.
MAX_REQUEST_ID = 128
# Generated ids: this process's random prefix and a counter, unique without a random draw
# per request (uuid4 would cost more than the rest of the request's logging).
_PREFIX = os.urandom(6).hex()
_counter = count(1)
_prefix_pid = os.getpid()


def new_request_id() -> str:
    global _PREFIX, _counter, _prefix_pid
    if os.getpid() != _prefix_pid:  # a forked worker: its own prefix
        _PREFIX, _counter, _prefix_pid = os.urandom(6).hex(), count(1), os.getpid()
    return f"{_PREFIX}-{next(_counter):x}"


def request_id_of(value: bytes | None) -> bytes:
    """The id to answer with: the client's X-Request-ID when it is valid, or a new one."""
    if value and VALID_REQUEST_ID.fullmatch(value):
        return value
    return new_request_id().encode()


def access(*, request_id: str, method: str, route: str, status: int, duration_ms: float,
           decision_id: str | None = None, code: str | None = None,
           client: str | None = None) -> None:
    """The request's line (at info; only called with TOOLGATE_ACCESS_LOG on)."""
    ACCESS.info("%s %s %d", method, route, status, extra={
        "request_id": request_id, "decision_id": decision_id, "route": route,
        "method": method, "status": status, "duration_ms": round(duration_ms, 3),
        "code": code, "client": client})


def envelope_code(body: bytes) -> str | None:
    """The code of an error envelope's body (for the access line)."""
    try:
        return orjson.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


class RequestContext(logging.Filter):
    """Gives every record request_id and decision_id (from the request's context when
    the line does not name them), so both formats can print them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        if getattr(record, "decision_id", None) is None:
            record.decision_id = DECISION_ID.get()
        return True


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(ids)s"


class TextFormatter(logging.Formatter):
    """uvicorn-like text with the ids appended: ` request_id=... decision_id=...`, and
    the access line's route, status and duration."""

    def format(self, record: logging.LogRecord) -> str:
        parts = []
        for name in ("request_id", "decision_id", "duration_ms", "code"):
            value = getattr(record, name, None)
            if value is not None:
                parts.append(f"{name}={value}")
        record.ids = (" " + " ".join(parts)) if parts else ""
        return super().format(record)


def _json_formatter() -> Any:
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(decision_id)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        datefmt="%Y-%m-%dT%H:%M:%S%z",
        # uvicorn's own records carry these; not for the line
        reserved_attrs=[*_RESERVED, "color_message"])


_RESERVED = ("args", "asctime", "created", "exc_info", "exc_text", "filename", "funcName",
             "levelname", "levelno", "lineno", "module", "msecs", "message", "msg", "name",
             "pathname", "process", "processName", "relativeCreated", "stack_info",
             "thread", "threadName", "taskName")


def log_config(log_format: str, level: str) -> dict[str, Any]:
    """The dictConfig uvicorn applies in every worker (`uvicorn.run(log_config=...)`):
    uvicorn's loggers and toolgate's, one handler on stderr, text or JSON lines."""
    formatter: dict[str, Any] = (
        {"()": "app.edge.logs._json_formatter"} if log_format == "json"
        else {"()": "app.edge.logs.TextFormatter", "fmt": TEXT_FORMAT})
    level = "DEBUG" if level == "trace" else level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "app.edge.logs.RequestContext"}},
        "formatters": {"default": formatter},
        "handlers": {"default": {"class": "logging.StreamHandler", "formatter": "default",
                                 "filters": ["context"], "stream": "ext://sys.stderr"}},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            # uvicorn's access line is replaced by toolgate's (TOOLGATE_ACCESS_LOG)
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "toolgate": {"handlers": ["default"], "level": level, "propagate": False},
        },
    }


def configure(log_format: str, level: str) -> None:
    """The same configuration, applied in this process (the writer process, the CLI)."""
    import logging.config

    logging.config.dictConfig(log_config(log_format, level))
