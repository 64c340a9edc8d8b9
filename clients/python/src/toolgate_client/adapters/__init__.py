"""toolgate inside the frameworks agents are written in: one wrapper each.

- :mod:`toolgate_client.adapters.langchain` (extra ``langchain``): ``guard(tool | [tools] |
  ToolNode, client, ...)`` for LangChain and LangGraph.
- :mod:`toolgate_client.adapters.openai_agents` (extra ``openai-agents``):
  ``guard(function_tool | [tools], client, ...)`` and ``input_guardrail(client, ...)`` for the
  OpenAI Agents SDK.
- :mod:`toolgate_client.adapters.claude_agent_sdk` (extra ``claude-agent-sdk``):
  ``can_use_tool(client, ...)`` and ``hooks(client, ...)`` (PreToolUse / PostToolUse) for the
  Claude Agent SDK.

Every adapter asks toolgate before the tool runs and, once it ran, reports the outcome
(``succeeded`` / ``execution_failed``, SPEC §11). A deny reaches the model as the tool's
error, ``"Denied by toolgate: <ErrorClass> (<code>): <message> [decision <id>]"``, so the
agent can adapt; ``on_deny="raise"`` raises the deny's class instead. When no decision can
be had (:class:`~toolgate_client.ToolgateUnavailableError`), the tool never runs and the
error is raised. Importing this package imports no framework.
"""

from ._gate import Gate, deny_message

__all__ = ["Gate", "deny_message"]
