"""Approvals held by the service (SPEC §10): granted by a person, bound to the request's
arguments, used once."""
