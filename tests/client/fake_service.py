"""A fake toolgate on 127.0.0.1 that answers with exact bytes: what a JSON library would
never write (a duplicate key), or a body that drips one byte at a time.

Every decision request is answered by `answer` (settable between tests): a `bytes` body sent
at once with status 200, or `Drip(...)`. What the gateway asks before deciding is answered
as a service with nothing registered would: `GET /v1/tools` and `GET /v1/gateway/pins` with
`{"items": []}`, a pin report (`POST .../seen`) with a match. `stop()` ends every drip.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from dataclasses import dataclass

MATCH = b'{"match": true, "digest": "", "pin": null, "decision": null}'


@dataclass(frozen=True)
class Drip:
    """A 200 whose body (or, with `in_headers`, whose header block) arrives one byte every
    `interval` seconds: `length` bytes in all, so it ends after about length * interval."""

    length: int = 40
    interval: float = 2.0
    in_headers: bool = False


class FakeService:
    def __init__(self) -> None:
        self.answer: bytes | Drip = b"{}"
        self.pin_answer: bytes = MATCH
        self.requests: list[tuple[str, str]] = []
        self._stopping = threading.Event()
        fake = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                fake._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    # -- one connection: requests until the client closes it -------------------------------

    def _serve(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        while not self._stopping.is_set():
            line = reader.readline()
            if not line:
                return
            method, target = line.decode("latin-1").split(" ")[:2]
            length = 0
            while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = header.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            reader.read(length)
            self.requests.append((method, target))
            answer = self._before_deciding(method, target)
            if isinstance(answer, Drip):
                self._drip(sock, answer)
                return
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))

    def _before_deciding(self, method: str, target: str) -> bytes | Drip:
        if method == "GET" and target.startswith(("/v1/tools", "/v1/gateway/pins")):
            return b'{"items": []}'
        if method == "POST" and target.startswith("/v1/gateway/pins/"):
            return self.pin_answer
        return self.answer

    def _drip(self, sock: socket.socket, drip: Drip) -> None:
        if drip.in_headers:
            head, body = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * drip.length, b""
        else:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % drip.length)
            head, body = b"", b"{" + b" " * (drip.length - 1)
        for byte in head + body:
            if self._stopping.wait(drip.interval):
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # the client gave up: what this test wants
                return
