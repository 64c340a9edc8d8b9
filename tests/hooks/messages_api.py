"""A scripted Anthropic Messages API on 127.0.0.1, for driving the real Claude Code CLI
headless with no model service: the conversation whose first user message names a script
gets that script's `tool_use`; the request carrying its `tool_result` gets a closing text
(and the tool_result is kept, as the model received it). Any other request Claude Code
makes (HEAD /, side queries) gets a short text answer.

It speaks what Claude Code 2.1 sends: `HEAD /`, then `POST /v1/messages?beta=true` with
`stream: true`, answered as SSE (message_start, content_block_start/delta/stop,
message_delta, message_stop)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    tool_name: str | Callable[[list[str]], str | None]  # or chosen from those offered
    tool_input: dict[str, Any]
    tool_use_id: str
    results: list[dict[str, Any]] = field(default_factory=list)  # tool_results received
    offered: list[list[str]] = field(default_factory=list)  # the tool names of each request


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(b.get("text", "")) if isinstance(b, dict) else str(b)
                         for b in content if not (isinstance(b, dict)
                                                  and b.get("type") == "tool_result"))
    return ""


class MessagesAPI:
    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:  # noqa: N802 (the stdlib's name)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                self._json(200, {"data": [], "has_more": False})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    self._json(200, {"input_tokens": 1})
                    return
                blocks = api.answer(body)
                if body.get("stream"):
                    self._stream(blocks)
                else:
                    self._json(200, _message(blocks))

            def _json(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, blocks: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event in _events(blocks):
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                                     .encode())
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> MessagesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, marker: str, script: Script) -> str:
        """The prompt that starts `script`'s conversation."""
        with self.lock:
            self.scripts[marker] = script
        return _prompt(marker)

    def answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        messages = body.get("messages") or []
        first = _text_of(messages[0].get("content")) if messages else ""
        with self.lock:
            # The whole prompt: one marker may be part of another (GATEWAY, NO-GATEWAY).
            script = next((s for m, s in self.scripts.items() if _prompt(m) in first), None)
        if script is None or not body.get("tools"):
            return [{"type": "text", "text": "ok"}]
        for message in messages:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if (isinstance(block, dict) and block.get("type") == "tool_result"
                        and block.get("tool_use_id") == script.tool_use_id):
                    with self.lock:
                        if block not in script.results:
                            script.results.append(block)
                    return [{"type": "text", "text": "done"}]
        names = [t.get("name", "") for t in body["tools"]]
        with self.lock:
            script.offered.append(names)
        name = script.tool_name
        if callable(name):
            name = name(names)
            if name is None:  # not offered (yet): say so, and end the turn
                return [{"type": "text", "text": "the scripted tool is not offered"}]
        return [{"type": "tool_use", "id": script.tool_use_id, "name": name,
                 "input": script.tool_input}]


def _prompt(marker: str) -> str:
    return f"Run the scripted step {marker}."


def _message(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    tool = any(b["type"] == "tool_use" for b in blocks)
    return {"id": "msg_scripted", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": blocks,
            "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _events(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    whole = _message(blocks)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **whole, "content": [], "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            events.append({"type": "content_block_start", "index": index, "content_block":
                           {"type": "tool_use", "id": block["id"], "name": block["name"],
                            "input": {}}})
            events.append({"type": "content_block_delta", "index": index, "delta":
                           {"type": "input_json_delta",
                            "partial_json": json.dumps(block["input"])}})
        else:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": block["text"]}})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": whole["stop_reason"],
                                                      "stop_sequence": None},
                   "usage": {"output_tokens": 5}})
    events.append({"type": "message_stop"})
    return events
