"""Route classes for JSON bodies: the key is checked before FastAPI parses the body (so a
caller without a key gets 401, not a parse error), and bodies are parsed by orjson.

The edge imports no feature: the check is the app's `state.authenticate_early`, which
create_app (app/main.py) wires to app/auth/deps.py's `authenticate_early`."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from fastapi.routing import APIRoute

from app.edge.jsonkeys import refuse_duplicates


class JSONRequest(Request):
    """Parses bodies with orjson: strict RFC 8259 (NaN and Infinity are invalid JSON), and
    bodies are JSON whatever the content type says (curl -d sends a form type)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())
        return self._json

    async def refuse_duplicate_keys(self) -> None:
        """422 naming a key that one object of the body names twice (SPEC §17), raised
        here rather than from json(), where FastAPI would turn it into a 400. A body that
        is not JSON is left to FastAPI's parse (422 invalid_json)."""
        raw = await self.body()
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        refuse_duplicates(raw, data)
        self._json = data


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
                await request.app.state.authenticate_early(request)
                await request.refuse_duplicate_keys()
            return await handler(request)

        return route


class BatchRoute(JSONRoute):
    request_class = BatchRequest
