"""Webhooks (SPEC §10): approval events and denied decisions POSTed, signed, at least once,
from a durable outbox."""
