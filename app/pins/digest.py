"""The digest a pin holds: SHA-256 of the RFC 8785 (JCS) form of a tool's definition.

Pure (no I/O): the service computes it from the definition a gateway reports, and the
gateway (app/gateway/pins.py) from what its upstream lists, so both compare the same text.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

# What a definition is: the fields a client's model reads or that shape a call. The five are
# always present (null when the upstream gives none), so an absent field and a null one
# are the same definition.
FIELDS = ("name", "description", "inputSchema", "outputSchema", "annotations")


class NotCanonical(ValueError):
    """A definition RFC 8785 cannot represent (an integer beyond 2**53, a non-string key)."""


def definition(name: str, description: str | None, input_schema: Any, output_schema: Any,
               annotations: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": input_schema,
            "outputSchema": output_schema, "annotations": annotations}


def digest(value: dict[str, Any]) -> str:
    try:
        return hashlib.sha256(rfc8785.dumps({key: value.get(key) for key in FIELDS})).hexdigest()
    except Exception as exc:  # rfc8785 raises its own classes (IntegerDomainError, ...)
        raise NotCanonical(f"the definition has no RFC 8785 form: {exc}") from exc
