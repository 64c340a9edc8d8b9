"""Digests of RFC 8785 (JSON Canonicalization Scheme) canonical JSON, shared by approval
bindings (SPEC §10) and outcome reports (§11): the same arguments give the same digest
whatever their key order or number spelling, on any client."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785


def canonical_sha256(value: Any) -> str | None:
    """The SHA-256 (hex) of `value`'s RFC 8785 canonical JSON, or None when RFC 8785 cannot
    represent it exactly (an integer beyond 2^53, a NaN or infinite float): such a value
    never matches anything, so a digest is never guessed."""
    try:
        return hashlib.sha256(rfc8785.dumps(value)).hexdigest()
    except (rfc8785.CanonicalizationError, TypeError):
        return None
