"""The tool registry and skills (SPEC §7): tables, repository, in-memory cache, routes."""
