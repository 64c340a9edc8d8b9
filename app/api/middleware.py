"""ASGI middleware: body size limit and JSON decoding that rejects NaN/Infinity."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from fastapi.routing import APIRoute

from app.api.handlers import envelope
from app.auth.deps import authenticate_early


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
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._too_large(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: dict, receive: Any, send: Any) -> None:
        response = envelope(413, "payload_too_large",
                            f"request body exceeds {self.limit} bytes")
        await response(scope, receive, send)


class JSONRequest(Request):
    """Parses bodies with orjson: strict RFC 8259 (NaN and Infinity are invalid JSON), and
    bodies are JSON whatever the content type says (curl -d sends a form type)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())
        return self._json


class BatchRequest(JSONRequest):
    """A batch may be sent as a bare JSON list; it means {"requests": [...]}."""

    async def json(self) -> Any:
        data = await super().json()
        return {"requests": data} if isinstance(data, list) else data


class JSONRoute(APIRoute):
    request_class: type[JSONRequest] = JSONRequest

    def get_route_handler(self):  # type: ignore[no-untyped-def]
        handler = super().get_route_handler()
        request_class = self.request_class

        async def route(request: Request):  # type: ignore[no-untyped-def]
            scope = request.scope
            if scope["method"] not in ("GET", "HEAD", "DELETE"):
                headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
                headers.append((b"content-type", b"application/json"))
                scope["headers"] = headers
            request = request_class(scope, request.receive)
            if scope["method"] not in ("GET", "HEAD", "DELETE"):
                await authenticate_early(request)
            return await handler(request)

        return route


class BatchRoute(JSONRoute):
    request_class = BatchRequest
