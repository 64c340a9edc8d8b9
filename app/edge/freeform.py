"""The limits of free-form JSON fields, defined once (docs/api.md, "Free-form fields").

A free-form field is an object of any JSON the client chooses (`tool.args`,
`context.metadata`, `context.variables` of an authorize request): it is decided on, recorded
in the decision log and read back by dashboards and auditors' tools, so its shape is
bounded where it comes in, by every decoder alike (authorize/schemas.py `FreeForm`,
authorize/wire.py), with a 422 naming the place:

- MAX_DEPTH: objects and arrays nest at most 32 levels, the field's own object being level
  1. A whole log record then stays under 40 levels, within every common JSON reader's
  default (orjson writes 254, .NET reads 64, serde_json 128, Ruby 100). Before this limit a
  decision nested 249 levels was recorded and then broke every read of the log.
- MAX_ENTRIES: an object or array holds at most 10,000 entries.

Strings have no limit of their own: an argument may carry a whole file's content, and the
body limit (TOOLGATE_MAX_BODY_BYTES, 1 MiB by default) bounds every string and the field's
total size.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

MAX_DEPTH = 32
MAX_ENTRIES = 10_000

TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels (the limit for free-form fields)"
TOO_LONG = (f"more than {MAX_ENTRIES} entries (the limit for an object or array in a "
            f"free-form field)")

Location = tuple[str | int, ...]
# JSON's containers, as every JSON decoder makes them (exact types: no subclass comes from
# JSON text).
_CONTAINERS = frozenset((dict, list))


def problem(value: dict[str, Any] | list[Any]) -> tuple[Location, str, str] | None:
    """The first place (in document order) where `value`, a free-form field's object, is
    past a limit: (its location below the field, error type, message); None within them.
    The walk goes no deeper than MAX_DEPTH, and looks at each container once."""
    found = _find(value, 1)
    if found is None:
        return None
    keys, kind = found
    return tuple(reversed(keys)), kind, TOO_DEEP if kind == "too_deep" else TOO_LONG


def _find(value: dict[str, Any] | list[Any], depth: int) -> tuple[list[str | int], str] | None:
    """(the keys down to the place, innermost first; its error type), or None."""
    if len(value) > MAX_ENTRIES:
        return [], "too_long"
    is_dict = value.__class__ is dict
    if _CONTAINERS.isdisjoint(map(type, value.values() if is_dict else value)):
        return None  # nothing nested: the usual case, answered in C
    for key, item in value.items() if is_dict else enumerate(value):
        if item.__class__ in _CONTAINERS:
            if depth == MAX_DEPTH:
                return [key], "too_deep"
            found = _find(item, depth + 1)
            if found is not None:
                found[0].append(key)
                return found
    return None


def may_exceed(text: bytes) -> bool:
    """False when a JSON text cannot hold a value past the limits, whatever its shape: a
    container at level MAX_DEPTH + 1 takes that many opening brackets, one of more than
    MAX_ENTRIES entries as many commas and twice as many bytes (inside strings too: this
    only errs on the side of a walk). `text` is the JSON text with every "{" read as "["
    (the hot path's translated body, authorize/wire.py): one byte count in C, where the
    walk costs a Python call per container."""
    return text.count(b"[") > MAX_DEPTH or (
        len(text) > 2 * MAX_ENTRIES and text.count(b",") >= MAX_ENTRIES)


def _within_limits(value: dict[str, Any]) -> dict[str, Any]:
    found = problem(value)
    if found is None:
        return value
    location, kind, message = found
    # Raised as a ValidationError, pydantic puts `location` below the field's own: the 422
    # names the place, e.g. context.metadata.x.0.
    raise ValidationError.from_exception_data("free-form field", [InitErrorDetails(
        type=PydanticCustomError(kind, message), loc=location, input=value)])


# A free-form field in a pydantic model: any JSON object within the limits.
FreeForm = Annotated[dict[str, Any], AfterValidator(_within_limits)]
