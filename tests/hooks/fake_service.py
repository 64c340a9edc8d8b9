"""A stand-in for toolgate's hook route on 127.0.0.1 (stdlib HTTP server): each case is a
path prefix, `http://127.0.0.1:PORT/<case>`, whose POST .../v1/hooks/claude-code gets that
case's answer, as it is, however wrong, slow or dripping. The command hook must block on
all of them but a well-formed answer (tests/hooks/test_command_hook.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PRE_ALLOW = (b'{"hookSpecificOutput":{"hookEventName":"PreToolUse",'
             b'"permissionDecision":"allow","permissionDecisionReason":"allowed by toolgate '
             b'[decision d-1]"}}')


def _pre(decision: str, extra: str = "") -> bytes:
    return ('{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":'
            f'"{decision}","permissionDecisionReason":"why"{extra}}}}}').encode()


# case -> (status, body); the well-formed ones first.
ANSWERS: dict[str, tuple[int, bytes]] = {
    "allow": (200, PRE_ALLOW),
    "ask": (200, _pre("ask")),
    "done": (200, b"{}"),
    "deny": (200, _pre("deny")),
    "empty-object": (200, b"{}"),
    "approve": (200, b'{"decision":"approve"}'),
    "allow-space": (200, _pre("allow ")),
    "deny-then-allow": (200, _pre("deny", ',"permissionDecision":"allow"')),
    "allow-updated-input": (200, _pre("allow", ',"updatedInput":{"command":"rm -rf /"}')),
    "allow-plus-top-level": (200, PRE_ALLOW[:-1] + b',"continue":true}'),
    "allow-other-event": (200, PRE_ALLOW.replace(b'"PreToolUse"', b'"PostToolUse"')),
    "allow-reason-number": (200, _pre("allow").replace(b'"why"', b"7")),
    "allow-nested-duplicate": (200, PRE_ALLOW[:-2] + b',"x":{"a":1,"a":2}}}'),
    "allow-500": (500, PRE_ALLOW),
    "not-json": (200, b"allow"),
    "allow-twice": (200, PRE_ALLOW + PRE_ALLOW),
    "array": (200, b"[" + PRE_ALLOW + b"]"),
}


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A hook that gave up closes the connection: expected, not worth a traceback."""


class FakeService:
    def __init__(self) -> None:
        self.release = threading.Event()  # set at the end: hung handlers return
        self.seen: list[dict[str, Any]] = []  # (path, headers, body) of each request
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                service.seen.append({"path": self.path, "headers": dict(self.headers),
                                     "body": body})
                case = self.path.split("/")[1]
                handler = SLOW.get(case)
                if handler is not None:
                    handler(self, service.release)
                    return
                status, answer = ANSWERS[case]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = _Quiet(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeService:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _hang(handler: BaseHTTPRequestHandler, release: threading.Event) -> None:
    """Reads the request, answers nothing (until the test ends, at most a minute)."""
    release.wait(60)


def _drip(handler: BaseHTTPRequestHandler, release: threading.Event) -> None:
    """A well-formed allow, one byte every 2 s: whole after about ten minutes."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(PRE_ALLOW)))
    handler.end_headers()
    handler.wfile.flush()
    try:
        for byte in PRE_ALLOW:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            if release.wait(2):
                return
    except OSError:
        pass  # the hook gave up and closed the connection, as it should


def _headers_then_hang(handler: BaseHTTPRequestHandler, release: threading.Event) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(PRE_ALLOW)))
    handler.end_headers()
    handler.wfile.flush()
    release.wait(60)


SLOW: dict[str, Callable[[BaseHTTPRequestHandler, threading.Event], None]] = {
    "hang": _hang, "drip": _drip, "headers-then-hang": _headers_then_hang,
}
