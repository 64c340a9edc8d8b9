"""ASGI middleware and body reading: the body size limit, strict JSON."""

from __future__ import annotations

from typing import Any

import orjson

from app.edge.errors import InvalidJSON, PayloadTooLarge
from app.edge.handlers import envelope
from app.edge.jsonkeys import refuse_duplicates


async def read_body(scope: dict, receive: Any, limit: int) -> bytes | None:
    """The whole request body, or None when the client disconnected; PayloadTooLarge past
    `limit` bytes (refused from Content-Length before reading when it says so)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            refuse_declared(value, limit)
    return await body_from(await receive(), receive, limit)


def refuse_declared(content_length: bytes | None, limit: int) -> None:
    """PayloadTooLarge when Content-Length says more than `limit`: before reading."""
    if content_length is not None and content_length.isdigit() \
            and int(content_length) > limit:
        raise too_large(limit)


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"request body exceeds {limit} bytes")


async def body_from(message: dict, receive: Any, limit: int) -> bytes | None:
    """The body that starts with `message` (the first one received), as read_body."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()


class BodyLimit:
    """Buffers the request body up to `limit` bytes; answers 413 past it.

    Every route reads its whole body before acting anyway, so buffering here costs nothing
    and guarantees an oversized body changes nothing (batches included).
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(scope, receive, self.limit)
        except PayloadTooLarge as too_large:
            await envelope(413, too_large.code, too_large.message)(scope, receive, send)
            return
        if body is None:  # the client went away
            return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def strict_json(raw: bytes) -> Any:
    """The body parsed by orjson: strict RFC 8259 (NaN and Infinity are invalid JSON);
    InvalidJSON (422 invalid_json) when it is not JSON at all. An empty body is None."""
    try:
        data = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError as exc:
        raise InvalidJSON(f"body is not valid JSON: {exc.msg}") from None
    refuse_duplicates(raw, data)  # 422 naming a key an object names twice (SPEC §17)
    return data
