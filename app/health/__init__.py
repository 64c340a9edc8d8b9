"""GET /healthz and /readyz."""
