"""Coding-agent hooks (SPEC §15): toolgate answers Claude Code's hook protocol, so every
tool call of an unmodified agent is decided, recorded and its outcome reported.

  claude.py      the protocol as data: hook body -> HookCall, decision -> hook answer (pure)
  service.py     Hooks: a plan per session, the decision through the authorize pipeline
                 (app/authorize/pipeline.py) and the decision log, PostToolUse -> the
                 outcome (ledger.book.report)
  repository.py  the decision made for a tool_use_id, found in the log
  asgi.py        POST /v1/hooks/claude-code as plain ASGI, over the pipeline (every failure
                 answered as a deny)
  routes.py      the same route in FastAPI: the OpenAPI declaration
  gemini.py      Gemini CLI's BeforeTool/AfterTool, translated to the same protocol
  schemas.py     the route's documented body and answer
The command hooks (`toolgate hook claude-code|gemini-cli`) are app/cli/hook.py.
"""
