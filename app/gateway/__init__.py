"""The MCP gateway (SPEC §14, docs/gateway.md): `toolgate gateway -c gateway.yaml`.

An MCP server in front of MCP servers: every `tools/call` is decided by toolgate (over HTTP,
through the Python client) before it is forwarded, and its outcome is reported by the
gateway. The parts:

- `config.py`   gateway.yaml, validated like a policy file (lines, unknown keys refused)
- `mapping.py`  pure: SERVER.TOOL names, capability from annotations, the authorize body
- `calls.py`    one call: decide (fail closed), confirm or wait, forward, report
- `upstream.py` one upstream over stdio or Streamable HTTP, supervised, reconnected
- `server.py`   the SDK's low-level Server the client talks to; elicitation both eras
- `run.py`      wiring: the listener (stdio or HTTP + bearer token), supervisors, client
"""
