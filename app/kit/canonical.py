"""Digests of RFC 8785 (JSON Canonicalization Scheme) canonical JSON, shared by approval
bindings (SPEC §10) and outcome reports (§11): the same arguments give the same digest
whatever their key order or number spelling, on any client."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

_EXACT = 2 ** 53  # rfc8785 takes integers up to 2^53 - 1 (JavaScript's safe integers)


def canonical_sha256(value: Any) -> str | None:
    """The SHA-256 (hex) of `value`'s RFC 8785 canonical JSON, or None when RFC 8785 cannot
    represent it exactly (an integer beyond 2^53, a NaN or infinite float): such a value
    never matches anything, so a digest is never guessed.

    Integers past 64 bits reach here as floats (orjson reads them so: 2^64 and 2^64 + 1
    are the same double, and so is 10^23 and the literal 1e23), so a float with an integral
    value of 2^53 or more counts as such an integer too: a grant for one of them would be a
    grant for its neighbours (issue 30)."""
    if _inexact(value):
        return None
    try:
        return hashlib.sha256(rfc8785.dumps(value)).hexdigest()
    except (rfc8785.CanonicalizationError, TypeError):
        return None


def _inexact(value: Any) -> bool:
    if isinstance(value, float):
        return abs(value) >= _EXACT and value.is_integer()
    if isinstance(value, dict):
        return any(_inexact(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_inexact(v) for v in value)
    return False
