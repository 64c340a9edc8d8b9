"""Integers as JSON Schema counts them (SPEC §17): 3.0 is the integer 3.

Strict models refuse a float for an `int` field, while the OpenAPI document's `integer`
(JSON Schema) accepts 3.0: INTEGRAL makes every integer field of a request agree with the
document. Here, at the bottom of the layers, so that the policy's own models (SafetyProfile)
and every feature's wire schemas (app/kit/schemas.py) share one rule.
"""

from __future__ import annotations

from typing import Any

from pydantic import BeforeValidator


def _integral(value: Any) -> Any:
    """3.0 is the integer 3; 3.5, NaN, and floats past 2^53 (no longer exact) stay floats
    and are refused by the strict int that follows."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


# `Annotated[int, Field(ge=1), INTEGRAL]`: after the Field (placed before it, pydantic
# writes `ge` instead of `minimum` in the schema).
INTEGRAL = BeforeValidator(_integral)
