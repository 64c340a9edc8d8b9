"""The MCP gateway (SPEC §14, §19, docs/gateway.md): `toolgate gateway -c gateway.yaml`.

An MCP server in front of MCP servers: every `tools/call` (and `resources/read`) is decided
by toolgate (over HTTP, through the Python client) before it is forwarded, and its outcome
is reported by the gateway; everything else the upstreams offer is relayed, each client on
upstream sessions of its own. The parts:

- `config.py`   gateway.yaml, validated like a policy file (lines, unknown keys refused)
- `mapping.py`  pure: SERVER.TOOL names, capability from annotations, the authorize body
- `calls.py`    one call: decide (fail closed), confirm or wait, forward, report
- `upstream.py` one upstream over stdio or Streamable HTTP, supervised, reconnected
- `sessions.py` a client's own upstream sessions, and what they relay back to it
- `relay.py`    resources (reads decided), prompts, completions, the log level
- `server.py`   the SDK's low-level Server the client talks to; elicitation both eras
- `run.py`      wiring: the listener (stdio or HTTP + bearer token), supervisors, client
"""
