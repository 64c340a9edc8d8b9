"""Duplicate object keys (SPEC §17): a JSON body in which one object names a key twice is
422 `invalid_input` naming it, at any depth, on every route. orjson and msgspec both keep
the last one silently, and a tool whose parser keeps the first would run what the gate
never saw (issue 30: a grant for `{"cmd": "ls"}` allowed `{"cmd": "rm -rf /", "cmd": "ls"}`).

Finding one is cheap because nearly every body has none, and that is provable by counting
colons. Outside strings, each colon of a JSON text separates one object member's key from
its value; so `raw.count(":")` is the number of members written plus the colons inside
strings. A decoded value, encoded again, has one colon per member it kept plus the same
colons inside its strings (no encoder escapes ':'). With no duplicate the two counts are
equal; each duplicate drops a member, and the count of the text it came from is larger,
unless an escaped colon (`\\u003a`) in the text adds one on the decoded side, which is why
a text with one is always looked at closely. So when the counts agree and the text has no
escaped colon, there is no duplicate (both encoders are C: well under a microsecond for a usual
body); otherwise `first_duplicate` parses the text once more keeping every member and names
the first key found twice, with its place.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from app.edge.errors import InvalidInput

_ESCAPES = (b"\\u003a", b"\\u003A")


def counts_agree(raw: bytes, encoded: bytes) -> bool:
    """Whether `encoded` (the value decoded from `raw`, encoded again with every member it
    kept) proves `raw` has no duplicate key."""
    # A backslash first: one memchr, where the longer searches cost a pass each. Only an
    # escaped colon (\u003a, \u003A) decodes to a colon; other escapes change no count.
    return (encoded.count(b":") == raw.count(b":")
            and (b"\\" not in raw or not any(e in raw for e in _ESCAPES)))


def refuse_duplicates(raw: bytes | str, data: Any) -> None:
    """InvalidInput naming the first duplicate key of `raw`, whose orjson parse is `data`;
    nothing when it has none."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if not isinstance(data, dict | list):
        return  # no object, no key
    try:
        if counts_agree(raw, orjson.dumps(data)):
            return
    except TypeError:
        pass  # not encodable again as parsed: the close look decides
    found = first_duplicate(raw)
    if found is not None:
        raise duplicate_key(found)


class _Members(dict):  # type: ignore[type-arg]
    """An object as first_duplicate's hook builds it; `.duplicate` is the path of the
    first key named twice in it or in an object inside it."""

    duplicate: list[str] | None = None


def _pairs(pairs: list[tuple[str, Any]]) -> _Members:
    members = _Members()
    for key, value in pairs:
        if members.duplicate is None:
            if key in members:
                members.duplicate = [key]
            elif isinstance(value, _Members) and value.duplicate is not None:
                members.duplicate = [key, *value.duplicate]
            elif isinstance(value, list):
                inner = _in_list(value)
                if inner is not None:
                    members.duplicate = [key, *inner]
        members[key] = value
    return members


def _in_list(values: list[Any]) -> list[str] | None:
    for index, value in enumerate(values):
        if isinstance(value, _Members) and value.duplicate is not None:
            return [str(index), *value.duplicate]
        if isinstance(value, list) and (inner := _in_list(value)) is not None:
            return [str(index), *inner]
    return None


def first_duplicate(raw: bytes) -> str | None:
    """The dotted path of the first key named twice in one object of `raw` (valid JSON),
    e.g. `tool.args.cmd`; None when there is none."""
    try:
        data = json.loads(raw, object_pairs_hook=_pairs)
    except (ValueError, RecursionError):
        return None  # the parsers before this one decided what the text is
    if isinstance(data, _Members):
        path = data.duplicate
    elif isinstance(data, list):
        path = _in_list(data)
    else:
        path = None
    return ".".join(path) if path is not None else None


def duplicate_key(path: str) -> InvalidInput:
    message = "duplicate key: a JSON object names this key more than once"
    return InvalidInput(f"invalid input: {path}: {message}",
                        fields=[{"field": path, "message": message,
                                 "type": "duplicate_key"}])
