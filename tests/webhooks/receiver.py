"""A webhook receiver on 127.0.0.1 for tests: records every POST (headers and body) and
answers with the status the test sets (a list is used up one per request, then 200)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self, port: int = 0) -> None:
        self.received: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.received.append({"headers": dict(self.headers.items()),
                                              "body": body, "status": status})
                self.send_response(status)
                if status in (301, 302, 307, 308):
                    self.send_header("Location", "http://127.0.0.1:1/elsewhere")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self, status: int = 200) -> list[dict[str, Any]]:
        """The bodies of the requests answered with `status`, decoded."""
        with self.lock:
            return [json.loads(r["body"]) for r in self.received if r["status"] == status]


def verify(secret: str, request: dict[str, Any]) -> bool:
    """The receiver's side of the signature, as docs/approvals.md tells it."""
    headers = {k.lower(): v for k, v in request["headers"].items()}
    signed = headers["x-toolgate-timestamp"].encode() + b"." + request["body"]
    expected = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers["x-toolgate-signature"])
