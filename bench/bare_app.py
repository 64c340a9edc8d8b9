"""The reference point: the least an ASGI app on the same uvicorn can do for one POST.

Reads the whole body (as toolgate's BodyLimit does) and answers a fixed small JSON, so the
ratio toolgate/bare is what toolgate itself costs on top of uvicorn, HTTP parsing and the
loopback round trip.
"""

from __future__ import annotations

from typing import Any

BODY = b'{"decision_id":"00000000-0000-7000-8000-000000000000","allowed":true,"deny":null}'
HEADERS = [(b"content-type", b"application/json"),
           (b"content-length", str(len(BODY)).encode())]


async def app(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
