"""Wire-schema building blocks every feature uses: strict models, names, costs.

Types are strict everywhere: a boolean is JSON true/false, an integer a JSON integer,
numbers finite. Unknown fields are rejected except in free-form fields.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
PROFILE_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ProfileName = Annotated[str, StringConstraints(pattern=PROFILE_NAME_PATTERN)]
Cost = Annotated[float, Field(ge=0, allow_inf_nan=False)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


def _nul_free(value: Any) -> Any:
    items = value if isinstance(value, list) else [value]
    if any(isinstance(item, str) and "\x00" in item for item in items):
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


class Stored(Strict):
    """A body whose strings are stored as they are: PostgreSQL cannot store NUL characters,
    so they are refused here (422 naming the field) on every backend alike."""

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        return _nul_free(value)


def one_profile(value: Any, info: ValidationInfo) -> Any:
    """Errors are raised on the field itself, so a 422 names `safety_profile`."""
    if value is not None and info.data.get("automation_profile") is not None:
        raise ValueError("give either automation_profile or safety_profile, not both")
    return value
