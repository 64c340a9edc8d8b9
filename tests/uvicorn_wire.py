"""Driving uvicorn's own HTTP protocol classes over a recording transport, as uvicorn's tests
do: what is checked is what uvicorn would put on the socket. `ProtocolTransport` lets an
httpx client talk to an app that way (one connection per request), so the tests written
against the ASGI app also run through `toolgate serve`'s protocol."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from uvicorn.config import Config
from uvicorn.server import ServerState


class Recording(asyncio.Transport):
    """What a socket would be sent: each write, and when the connection was closed."""

    def __init__(self, on_write=None) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed_after: int | None = None  # how many writes came before close()
        self.eof_after: int | None = None  # how many writes came before write_eof()
        self._on_write = on_write

    def write(self, data: bytes) -> None:
        assert self.closed_after is None, "written after close"
        assert self.eof_after is None, "written after write_eof"
        if self._on_write is not None:
            self._on_write()
        self.writes.append(bytes(data))

    def close(self) -> None:
        if self.closed_after is None:
            self.closed_after = len(self.writes)

    def is_closing(self) -> bool:
        return self.closed_after is not None

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if self.eof_after is None:
            self.eof_after = len(self.writes)

    def get_extra_info(self, name: str, default=None):
        return {"sockname": ("127.0.0.1", 8000),
                "peername": ("127.0.0.1", 50000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def connect(app, protocol_class, transport: Recording, *, server_state=None, **config):
    config = Config(app=app, lifespan="off", proxy_headers=False, log_level="warning",
                    **config)
    config.load()
    protocol = protocol_class(config=config, server_state=server_state or ServerState(),
                              app_state={})
    protocol.connection_made(transport)
    return protocol


def parse(data: bytes) -> tuple[list[tuple[int, dict[str, str], bytes]], bool]:
    """The complete responses in `data` (Content-Length or chunked bodies), and whether
    the data ended exactly after the last of them."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            return out, False
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines)}
        if headers.get("transfer-encoding") == "chunked":
            body, done = b"", False
            while not done:
                size_line, sep, rest = rest.partition(b"\r\n")
                if not sep:
                    return out, False
                size = int(size_line, 16)
                if len(rest) < size + 2:
                    return out, False
                body, rest, done = body + rest[:size], rest[size + 2:], size == 0
        else:
            length = int(headers.get("content-length", 0))
            if len(rest) < length:
                return out, False
            body, rest = rest[:length], rest[length:]
        out.append((int(status_line.split()[1]), headers, body))
        data = rest
    return out, True


def responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    return parse(data)[0]


async def answered(transport: Recording, answers: int) -> None:
    for _ in range(500):  # the decision's commit is awaited: bounded, never a hang
        if len(responses(b"".join(transport.writes))) >= answers:
            return
        await asyncio.sleep(0.01)


class ProtocolTransport(httpx.AsyncBaseTransport):
    """httpx over `protocol_class` serving `app`: each request on a new connection, sent
    as bytes, answered with what the protocol wrote."""

    def __init__(self, app: Any, protocol_class: type) -> None:
        self.app, self.protocol_class = app, protocol_class

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        lines = [f"{request.method} {request.url.raw_path.decode()} HTTP/1.1".encode()]
        lines += [b"%s: %s" % (name, value) for name, value in request.headers.raw]
        transport = Recording()
        connect(self.app, self.protocol_class, transport).data_received(
            b"\r\n".join(lines) + b"\r\n\r\n" + body)
        for _ in range(1000):  # bounded: a missing answer fails the test, never hangs it
            found, _ = parse(b"".join(transport.writes))
            if found:
                status, headers, content = found[0]
                headers.pop("transfer-encoding", None)  # the content is decoded already
                return httpx.Response(status, headers=list(headers.items()), content=content,
                                      request=request)
            await asyncio.sleep(0.005)
        raise AssertionError(f"no answer to {request.method} {request.url}")
