"""A scripted Anthropic Messages API on 127.0.0.1, enough for the Claude Code CLI that the
Claude Agent SDK drives: the conversation that offers tools gets the script's `tool_use`
blocks one per turn (the next once the previous one's `tool_result` is back), then a text;
Claude Code's side calls (no tools) get a short text. The `tool_result`s the model was
sent are kept."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class MessagesAPI:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (tool name, input), in order
        self.results: dict[str, dict[str, Any]] = {}  # tool_use_id -> the tool_result seen
        self.served: list[str] = []  # the tool_use blocks sent, by tool name
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> MessagesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, *calls: tuple[str, dict[str, Any]]) -> None:
        with self.lock:
            self.calls = list(calls)
            self.results.clear()
            self.served.clear()

    def _answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
        """(content block, its delta, stop reason) of the next turn."""
        results = [b for m in body.get("messages") or [] if m.get("role") == "user"
                   for b in _blocks(m) if b.get("type") == "tool_result"]
        with self.lock:
            for result in results:
                self.results[str(result.get("tool_use_id"))] = result
            turn = len(results)
            if body.get("tools") and turn < len(self.calls):
                name, tool_input = self.calls[turn]
                self.served.append(name)
                return ({"type": "tool_use", "id": f"toolu_{turn}", "name": name, "input": {}},
                        {"type": "input_json_delta", "partial_json": json.dumps(tool_input)},
                        "tool_use")
        return {"type": "text", "text": ""}, {"type": "text_delta", "text": "Done."}, "end_turn"


def _events(body: dict[str, Any], block: dict[str, Any], delta: dict[str, Any],
            stop: str) -> list[tuple[str, dict[str, Any]]]:
    message = {"id": "msg_scripted", "type": "message", "role": "assistant",
               "model": body.get("model", "claude-scripted"), "content": [],
               "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 1, "output_tokens": 1}}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def _handler(api: MessagesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
            self._send(200, b"", "text/plain")

        def do_GET(self) -> None:  # noqa: N802
            self._send(404, b'{"type":"error","error":{"type":"not_found_error"}}',
                       "application/json")

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))
                              or b"{}")
            if not self.path.startswith("/v1/messages"):
                return self.do_GET()
            if "count_tokens" in self.path:
                return self._send(200, b'{"input_tokens":1}', "application/json")
            block, delta, stop = api._answer(body)
            events = _events(body, block, delta, stop)
            if body.get("stream"):
                payload = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n"
                                  for name, data in events)
                return self._send(200, payload.encode(), "text/event-stream")
            whole = dict(block)
            if whole["type"] == "tool_use":
                whole["input"] = json.loads(delta["partial_json"])
            else:
                whole["text"] = delta["text"]
            message = {**events[0][1]["message"], "content": [whole], "stop_reason": stop}
            self._send(200, json.dumps(message).encode(), "application/json")

        def _send(self, status: int, payload: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]
