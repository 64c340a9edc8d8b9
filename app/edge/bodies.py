"""Bodies that are a list of items, sent as a JSON list, as {"<key>": [...]}, or as JSONL
(one JSON value per line): safety tests and decision tests. Errors name the line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from app.edge.errors import InvalidInput
from app.edge.jsonkeys import refuse_duplicates

T = TypeVar("T")
ItemParser = Callable[[Any, str], T]


def bad(field: str, message: str, kind: str, code: str = "invalid_input",
        **details: Any) -> InvalidInput:
    return InvalidInput(f"invalid input: {field}: {message}", code=code,
                        fields=[{"field": field, "message": message, "type": kind}], **details)


def _from_json(data: Any, key: str, item: ItemParser[T]) -> list[tuple[int, T]] | None:
    """A JSON list or {key: [...]}; None when `data` is neither."""
    if isinstance(data, dict) and key in data:
        extra = sorted(set(data) - {key})
        if extra:
            raise bad(extra[0], "unknown field", "extra_forbidden")
        data = data[key]
        if not isinstance(data, list):
            raise bad(key, "must be a list", "list_type")
    if not isinstance(data, list):
        return None
    return [(i, item(value, f"{key}.{i - 1}")) for i, value in enumerate(data, 1)]


def _from_jsonl(text: str, item: ItemParser[T]) -> list[tuple[int, T]]:
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise bad(f"line {number}", f"line {number} is not valid JSON ({exc})",
                      "json_invalid", line=number) from None
        try:
            refuse_duplicates(line, value)
            out.append((number, item(value, f"line {number}")))
        except InvalidInput as exc:
            exc.details["line"] = number
            raise
    return out


def parse_items(body: bytes, content_type: str, *, key: str,
                item: ItemParser[T]) -> list[tuple[int, T]]:
    """(line or 1-based position, parsed item) pairs; InvalidInput naming the first bad one."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad("body", f"not UTF-8 ({exc.reason} at byte {exc.start})",
                  "unicode_error") from None
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json":
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise bad("body", f"not valid JSON ({exc})", "json_invalid",
                      code="invalid_json") from None
        refuse_duplicates(body, data)
        items = _from_json(data, key, item)
        if items is None:
            raise bad("body", f"expected a JSON list or {{\"{key}\": [...]}}", "model_type")
    else:
        # JSONL (the JSONL types, or any other type such as curl's form default), unless the
        # whole body is a JSON list or {key: [...]}: no JSONL file is either.
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            items = None
        else:
            refuse_duplicates(body, data)
            items = _from_json(data, key, item)
        if items is None:
            items = _from_jsonl(text, item)
    if not items:
        raise bad("body", f"no {key}: at least one is needed", "too_short")
    return items
