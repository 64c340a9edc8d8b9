"""The operators' page (SPEC §13): static files and /v1/whoami."""
