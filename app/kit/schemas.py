"""Wire-schema building blocks every feature uses: strict models, names, costs.

Types are strict everywhere: a boolean is JSON true/false, an integer a JSON integer,
numbers finite. Unknown fields are rejected except in free-form fields.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from app.policy.numbers import INTEGRAL
from app.policy.profiles import MAX_COST

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
PROFILE_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ProfileName = Annotated[str, StringConstraints(pattern=PROFILE_NAME_PATTERN)]
Cost = Annotated[float, Field(ge=0, le=MAX_COST, allow_inf_nan=False)]
# Every integer of a request takes integral floats, as the OpenAPI document says (INTEGRAL).
NonNegativeInt = Annotated[int, Field(ge=0), INTEGRAL]


# RFC 3339 date-time text (SPEC §4, §6): full-date "T" full-time, the offset Z or +hh:mm.
# Checked as text before pydantic parses it, which would otherwise also take numbers
# ("0.5", "1700000000": seconds since the epoch), dates alone and other ISO 8601 forms.
_RFC3339 = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?%s$"
RFC3339_PATTERN = _RFC3339 % r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
RFC3339_OPTIONAL_OFFSET_PATTERN = _RFC3339 % r"([Zz]|[+-][0-9]{2}:[0-9]{2})?"


def _rfc3339(pattern: str, example: str) -> Any:
    check = re.compile(pattern)

    def text(value: Any) -> Any:
        if value is None or isinstance(value, datetime):  # absent, or given by Python code
            return value
        if not isinstance(value, str) or not check.match(value):
            raise ValueError(f"must be an RFC 3339 date-time, e.g. {example}")
        return value

    return BeforeValidator(text)


# In a strict model, add Field(strict=False): strict mode takes no text for a datetime.
DateTime = Annotated[
    datetime,
    _rfc3339(RFC3339_PATTERN, "2026-01-31T12:00:00Z"),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339_PATTERN}),
]
# The same, where a time without an offset is documented to mean UTC (a key's expires_at).
DateTimeUTCDefault = Annotated[
    datetime,
    _rfc3339(RFC3339_OPTIONAL_OFFSET_PATTERN, "2026-01-31T12:00:00Z"),
    WithJsonSchema({"type": "string", "pattern": RFC3339_OPTIONAL_OFFSET_PATTERN,
                    "description": "RFC 3339 date-time; UTC when it has no offset"}),
]


def _nul_free(value: Any) -> Any:
    items = value if isinstance(value, list) else [value]
    if any(isinstance(item, str) and "\x00" in item for item in items):
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


class Strict(BaseModel):
    """Every request body's base. Its strings are stored as they are, and PostgreSQL cannot
    store NUL characters, so a string field (or list of strings) holding one is refused
    here, 422 naming the field, on every backend alike: one rule for every body, none to
    forget (a webhook's secret answered 503 on PostgreSQL when it was a rule to opt into).
    The authorize hot path (app/authorize/wire.py) leaves any body with a NUL to this."""

    model_config = ConfigDict(strict=True, extra="forbid")

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        return _nul_free(value)


Stored = Strict  # the name the bodies that opted into the NUL rule used


def one_profile(value: Any, info: ValidationInfo) -> Any:
    """Errors are raised on the field itself, so a 422 names `safety_profile`."""
    if value is not None and info.data.get("automation_profile") is not None:
        raise ValueError("give either automation_profile or safety_profile, not both")
    return value
