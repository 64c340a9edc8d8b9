"""API keys, roles and project scope (docs/auth.md)."""
