"""POST /v1/hooks/claude-code answered as plain ASGI, ahead of FastAPI's middleware stack
and router, as the hot route is (app/authorize/hotpath.py): every tool call of a coding
agent asks it, and FastAPI's route matching and dependency solving cost several times the
decision (bench/hooks.py). A thin adapter over the authorize pipeline
(app/authorize/pipeline.py): body (limit) -> the pipeline's `admit` (key, rate limit, the
hook route's role) -> Hooks.answer, whose decision is the pipeline's `decide` / `finish`
-> 200; any failure -> Hooks' deny, never a 4xx or 5xx (Claude Code runs a call whose hook
fails).
ToolgateApp (app/main.py) wraps it in kit.observe.observed (X-Request-ID, metrics, access
line) like every other answer. The FastAPI route serves the OpenAPI document and any
server run with TOOLGATE_FAST_PATH=false."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

import orjson

from app.auth.roles import rule_for
from app.authorize.pipeline import Pipeline
from app.edge.middleware import read_body
from app.edge.observe import SCOPE_KEY
from app.hooks.claude import Undecidable
from app.hooks.service import Hooks, peek_event, refused
from app.kit.caller import Caller

PATH = "/v1/hooks/claude-code"
_RULE = rule_for("POST", PATH)
_ROUTE = SimpleNamespace(path=PATH)  # what kit.observe labels the metrics with
_HEADERS = [(b"content-type", b"application/json")]


class HookPath:
    """Handed what it uses by main.py's lifespan (`attach`); reaches for nothing else."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self.hooks: Hooks | None = None  # None until attached: not serving yet
        self.pipeline: Pipeline | None = None

    def attach(self, *, hooks: Hooks, pipeline: Pipeline) -> None:
        self.hooks, self.pipeline = hooks, pipeline

    @staticmethod
    def handles(scope: dict) -> bool:
        return scope["type"] == "http" and scope["path"] == PATH and scope["method"] == "POST"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        scope["route"] = _ROUTE
        event = None
        try:
            raw = await read_body(scope, receive, self.limit)
            if raw is None:
                return  # the client went away
            event = peek_event(raw)
            hooks, pipeline = self.hooks, self.pipeline
            assert hooks is not None and pipeline is not None, "attached before serving"
            principal = await pipeline.admit(scope["headers"], dict(scope["headers"]),
                                             path=PATH, rule=_RULE)
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            answer = await hooks.answer(
                raw, plan_id=_one(query, "plan_id", event), action=_one(query, "action", event),
                principal=principal, caller=Caller(request_id=scope.get(SCOPE_KEY),
                                                   key_id=principal.key_id),
                page=_page(scope), gateways=frozenset(query.get("gateway", ())),
                agent=_one(query, "agent", event), roots=query.get("root", []),
                home=_one(query, "home", event))
        except Exception as exc:  # every failure is a deny (app/hooks/routes.py)
            answer = refused(exc, event)
        body = orjson.dumps(answer)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_HEADERS, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _one(query: dict[str, list[str]], name: str, event: str | None) -> str | None:
    values = query.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise Undecidable(f"the hook URL gives {name} more than once", code="invalid_hook_url",
                          event=event)
    return values[0]


def _page(scope: dict) -> str:
    """The service's address as the agent reached it: where the approvals page is."""
    host = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
    if not host and scope.get("server"):
        server_host, port = scope["server"]
        host = f"{server_host}:{port}"
    return f"{scope.get('scheme', 'http')}://{host}"
