"""POST /v1/hooks/claude-code: Claude Code's HTTP hooks (SPEC §15).

Claude Code treats a hook that fails (a non-2xx answer, a refused connection, a timeout) as
no decision, and then runs the call if anything else permits it. So this route answers
everything it can as a 200 with a deny, a missing or refused key included: a hook body it
cannot decide on is never a 4xx, a 500 or an empty allow (docs/coding-agents.md).
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.routing import APIRoute

from app.auth.deps import PrincipalDep, authenticate_early
from app.hooks.schemas import HOOK_INPUT, HookOutput
from app.hooks.service import Hooks, peek_event, refused
from app.kit.deps import CallerDep


def _json(body: Any) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


class HookRoute(APIRoute):
    """Reads the body first (to word a refusal for its event), then authenticates, then
    runs the route; any error on the way is the hook's deny."""

    def get_route_handler(self):  # type: ignore[no-untyped-def]
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            event = None
            try:
                event = peek_event(await request.body())
                await authenticate_early(request)
                return await handler(request)
            except Exception as exc:  # every failure is a deny (module docstring)
                return _json(refused(exc, event))

        return route


router = APIRouter(prefix="/v1", route_class=HookRoute, tags=["coding-agent hooks"])


def get_hooks(request: Request) -> Hooks:
    return request.app.state.hooks


@router.post("/hooks/claude-code", response_model=HookOutput,
             openapi_extra={"requestBody": HOOK_INPUT},
             summary="Claude Code's PreToolUse / PostToolUse hook, answered by toolgate")
async def claude_code_hook(
    request: Request, principal: PrincipalDep, caller: CallerDep,
    plan_id: Annotated[str | None, Query(description="A fixed plan for every call")] = None,
    action: Annotated[str | None, Query(
        description="One plan per session_id, created from this action")] = None,
    gateway: Annotated[list[str] | None, Query(
        description="MCP servers (as Claude Code names them) that are toolgate MCP "
                    "gateways: their calls are decided by the gateway, not here")] = None,
    agent: Annotated[str | None, Query(
        description="The agent whose hook this is (`claude-code`, the default, "
                    "`gemini-cli`, ...): `detail.agent` of each decision")] = None,
    root: Annotated[list[str] | None, Query(
        description="Other absolute directories the agent may write in besides the "
                    "session's cwd (a call whose paths all lie in one is decided under "
                    "it)")] = None,
    home: Annotated[str | None, Query(
        description="The agent's home directory (call rules' `~` and `$HOME`); without "
                    "it, read from where the body's transcript_path lies")] = None,
) -> Response:
    """`PreToolUse`: one decision (the same as `POST /v1/authorize-tool`), answered in
    Claude Code's format: `permissionDecision` `allow`, `deny` (reason `<ErrorClass>
    (<code>): <message> [decision <id>]`) or `ask` (human approval in client_flag mode).
    `PostToolUse` / `PostToolUseFailure`: the outcome of the decision made for that
    `tool_use_id`, answered `{}`. Anything that cannot be decided is answered deny, with
    HTTP 200: Claude Code runs a call whose hook fails."""
    hooks = get_hooks(request)
    page = str(request.base_url).rstrip("/")
    answer = await hooks.answer(await request.body(), plan_id=plan_id, action=action,
                                principal=principal, caller=caller, page=page,
                                gateways=frozenset(gateway or ()), agent=agent,
                                roots=root or [], home=home)
    return _json(answer)
