"""A scripted Gemini API on 127.0.0.1, for driving the real Gemini CLI headless with no
model service (`GOOGLE_GEMINI_BASE_URL`, a dummy `GEMINI_API_KEY`): the conversation whose
user text names a script gets that script's function call; the request carrying its
functionResponse gets a closing text (and the response is kept, as the model received it).
Any other request (Gemini CLI's side queries: routing, next-speaker checks, token counts)
gets a short answer.

It speaks what Gemini CLI 0.61 sends: `POST /v1beta/models/M:streamGenerateContent?alt=sse`
answered as SSE (`data: <GenerateContentResponse>` chunks), `:generateContent` and
`:countTokens` as JSON."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    name: str  # the function to call
    args: dict[str, Any]
    responses: list[dict[str, Any]] = field(default_factory=list)  # functionResponses
    offered: list[list[str]] = field(default_factory=list)  # declared names per request


def _texts(contents: list[Any]) -> str:
    return "\n".join(part.get("text", "") for content in contents if isinstance(content, dict)
                     and content.get("role", "user") == "user"
                     for part in content.get("parts") or [] if isinstance(part, dict))


def _responses(contents: list[Any]) -> list[dict[str, Any]]:
    return [part["functionResponse"] for content in contents if isinstance(content, dict)
            for part in content.get("parts") or []
            if isinstance(part, dict) and "functionResponse" in part]


def _declared(body: dict[str, Any]) -> list[str]:
    return [d.get("name", "") for tool in body.get("tools") or [] if isinstance(tool, dict)
            for d in tool.get("functionDeclarations") or [] if isinstance(d, dict)]


def _chunk(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": "gemini-2.5-flash"}


class GeminiAPI:
    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.lock = threading.Lock()
        self.paths: list[str] = []  # every request's path, to see what the CLI asked
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                api.paths.append(f"GET {self.path}")
                self._json(200, {"models": []})

            def do_POST(self) -> None:  # noqa: N802
                api.paths.append(f"POST {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                if ":countTokens" in self.path:
                    self._json(200, {"totalTokens": 10})
                elif ":streamGenerateContent" in self.path:
                    self._sse(api.answer(body))
                elif ":generateContent" in self.path:
                    self._json(200, _chunk(api.answer(body)))
                else:
                    self._json(404, {"error": {"code": 404, "message": "not scripted",
                                               "status": "NOT_FOUND"}})

            def _json(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, parts: list[dict[str, Any]]) -> None:
                data = f"data: {json.dumps(_chunk(parts))}\r\n\r\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GeminiAPI:
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
        contents = body.get("contents") or []
        text = _texts(contents)
        with self.lock:
            script = next((s for m, s in self.scripts.items() if _prompt(m) in text), None)
        names = _declared(body)
        if script is None or not names:
            # A side query (no tools offered): Gemini CLI's JSON-schema questions take this.
            return [{"text": json.dumps({"next_speaker": "user", "reasoning": "scripted"})}]
        answered = [r for r in _responses(contents) if r.get("name") == script.name]
        with self.lock:
            script.offered.append(names)
            if answered:
                for response in answered:
                    if response not in script.responses:
                        script.responses.append(response)
        if answered:
            return [{"text": "done"}]
        if script.name not in names:
            return [{"text": f"the scripted tool {script.name} is not offered"}]
        return [{"functionCall": {"name": script.name, "args": script.args}}]


def _prompt(marker: str) -> str:
    return f"Run the scripted step {marker}."
