"""POST /v1/authorize-tool(s), GET /v1/errors, POST /v1/test: the decision routes and
their hot path."""
