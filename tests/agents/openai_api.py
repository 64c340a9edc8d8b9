"""A scripted OpenAI-style model API on 127.0.0.1, for driving real coding-agent CLIs
headless with no model service (as tests/hooks/messages_api.py does for Anthropic's).

One server speaks both shapes the agents use:
- the Responses API (`POST .../responses`, Codex CLI): SSE events `response.created`,
  `response.output_item.done` (a `function_call` or `custom_tool_call`, or an assistant
  `message`), `response.completed`;
- Chat Completions (`POST .../chat/completions`, Qwen Code and Copilot CLI's BYOK
  provider): SSE `chat.completion.chunk`s with `tool_calls`, then `[DONE]` (or one JSON
  completion when the request is not streamed).

A conversation whose text holds a script's prompt gets that script's tool call; the request
that carries the call's output gets a closing text (and the output is kept, as the model
received it). Any other request (titles, summaries, side queries) gets a short text."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Chooser = Callable[[list[str]], "str | None"]


@dataclass
class Script:
    tool_name: str | Chooser  # or chosen from the tools the request offers
    arguments: dict[str, Any] | Callable[[str], Any]  # or made for the chosen name
    call_id: str
    outputs: list[str] = field(default_factory=list)  # the call's output, as received
    offered: list[list[str]] = field(default_factory=list)  # tool names of each request
    called: list[str] = field(default_factory=list)  # the tool names the model called


def prompt(marker: str) -> str:
    return f"Run the scripted step {marker}."


def _tool_names(tools: Any) -> list[str]:
    names = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def _output_of(body: dict[str, Any], call_id: str) -> str | None:
    """The output of call `call_id` when this request carries it (either API shape)."""
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        if (isinstance(item, dict) and item.get("call_id") == call_id
                and str(item.get("type", "")).endswith("_output")):
            output = item.get("output")
            return output if isinstance(output, str) else json.dumps(output)
    for message in body.get("messages") if isinstance(body.get("messages"), list) else []:
        if (isinstance(message, dict) and message.get("role") == "tool"
                and message.get("tool_call_id") == call_id):
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return None


class OpenAIAPI:
    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.lock = threading.Lock()
        self.paths: list[str] = []  # every request's method and path, to see what a CLI asks
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                with api.lock:
                    api.paths.append(f"GET {self.path}")
                if self.path.rstrip("/").endswith("/models"):
                    self._json({"object": "list", "data": [
                        {"id": "scripted-model", "object": "model", "owned_by": "tests"}]})
                else:
                    self._json({})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                with api.lock:
                    api.paths.append(f"POST {self.path}")
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/responses"):
                    self._responses(body)
                elif path.endswith("/chat/completions"):
                    self._chat(body)
                else:
                    self._json({})

            def _json(self, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[tuple[str | None, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    text = data if isinstance(data, str) else json.dumps(data)
                    head = f"event: {name}\n" if name else ""
                    self.wfile.write(f"{head}data: {text}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

            def _responses(self, body: dict[str, Any]) -> None:
                call = api.answer(body, _tool_names(body.get("tools")),
                                  custom={t.get("name") for t in body.get("tools") or []
                                          if isinstance(t, dict) and t.get("type") == "custom"})
                if call is None:
                    item = {"type": "message", "role": "assistant", "id": "msg_1",
                            "content": [{"type": "output_text", "text": "done"}]}
                else:
                    item = call
                response = {"id": "resp_scripted", "object": "response", "status": "completed",
                            "output": [item], "usage": {
                                "input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                                "input_tokens_details": {"cached_tokens": 0},
                                "output_tokens_details": {"reasoning_tokens": 0}}}
                self._sse([
                    ("response.created", {"type": "response.created",
                                          "response": {**response, "status": "in_progress",
                                                       "output": []}}),
                    ("response.output_item.done", {"type": "response.output_item.done",
                                                   "output_index": 0, "item": item}),
                    ("response.completed", {"type": "response.completed",
                                            "response": response}),
                ])

            def _chat(self, body: dict[str, Any]) -> None:
                call = api.answer(body, _tool_names(body.get("tools")), custom=set())
                model = body.get("model") or "scripted-model"
                if call is None:
                    delta: dict[str, Any] = {"role": "assistant", "content": "done"}
                    finish = "stop"
                else:
                    delta = {"role": "assistant", "content": None, "tool_calls": [
                        {"index": 0, "id": call["call_id"], "type": "function",
                         "function": {"name": call["name"], "arguments": call["arguments"]}}]}
                    finish = "tool_calls"
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                if not body.get("stream"):
                    message = {k: v for k, v in delta.items()}
                    self._json({"id": "chatcmpl-scripted", "object": "chat.completion",
                                "created": 0, "model": model, "usage": usage,
                                "choices": [{"index": 0, "message": message,
                                             "finish_reason": finish}]})
                    return
                head = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                        "created": 0, "model": model}
                self._sse([
                    (None, {**head, "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": None}]}),
                    (None, {**head, "choices": [{"index": 0, "delta": {},
                                                 "finish_reason": finish}], "usage": usage}),
                    (None, "[DONE]"),
                ])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OpenAIAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, marker: str, script: Script) -> str:
        """The prompt that starts `script`'s conversation."""
        with self.lock:
            self.scripts[marker] = script
        return prompt(marker)

    def answer(self, body: dict[str, Any], names: list[str], *,
               custom: set[Any]) -> dict[str, Any] | None:
        """The scripted call for this request (a Responses API output item), or None for
        a closing text."""
        text = json.dumps(body.get("input") or body.get("messages") or "")
        with self.lock:
            # The whole prompt: one marker may be part of another.
            script = next((s for m, s in self.scripts.items()
                           if json.dumps(prompt(m))[1:-1] in text), None)
        if script is None or not names:
            return None
        output = _output_of(body, script.call_id)
        if output is not None:
            with self.lock:
                if output not in script.outputs:
                    script.outputs.append(output)
            return None
        with self.lock:
            script.offered.append(names)
        name = script.tool_name
        if callable(name):
            name = name(names)
            if name is None:
                return None
        arguments = script.arguments(name) if callable(script.arguments) else script.arguments
        with self.lock:
            script.called.append(name)
        if name in custom:  # a freeform tool (Codex's apply_patch): its input is text
            return {"type": "custom_tool_call", "id": f"ctc_{script.call_id}",
                    "call_id": script.call_id, "name": name, "status": "completed",
                    "input": arguments if isinstance(arguments, str) else json.dumps(arguments)}
        return {"type": "function_call", "id": f"fc_{script.call_id}", "call_id": script.call_id,
                "name": name, "status": "completed",
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}
