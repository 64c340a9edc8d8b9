"""Pins of MCP tool definitions for the gateway (SPEC §19 "Tool pinning"): digest.py (the
pure digest, also the gateway's), tables.py, repository.py, service.py (statuses, the
first-use and seen rules, the recorded deny), schemas.py and routes.py."""
