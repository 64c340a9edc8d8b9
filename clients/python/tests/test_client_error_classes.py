"""The client's deny classes are the service's, checked against a committed snapshot of
``GET /v1/errors`` (errors_document.json, beside this file) -- no service needed.

The snapshot is kept equal to the service's table by tests/authorize/test_errors_document.py
in the service's suite; regenerate it from the repository root with
``python clients/python/scripts/update_errors_document.py``. So a change to the service's
table fails there until the snapshot is regenerated, and then fails here until
``toolgate_client/errors.py`` follows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolgate_client
from toolgate_client import (
    CODES,
    PARENTS,
    Decision,
    ToolgateDeny,
    ToolgateError,
    error_class_for,
    hierarchy_of,
)
from toolgate_client.errors import exception_for_deny, resolve_deny_class

SNAPSHOT = Path(__file__).resolve().parent / "errors_document.json"
DOCUMENT: dict[str, Any] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = DOCUMENT["errors"]
BY_NAME = {entry["error"]: entry for entry in ENTRIES}
DOC_CODES = [code for entry in ENTRIES for code in entry["codes"]]


def _deny_chain(cls: type) -> list[str]:
    """The class names of the deny classes ``cls`` derives from, root first, ``cls`` last."""
    return [
        c.__name__
        for c in reversed(cls.__mro__)
        if issubclass(c, ToolgateDeny) and c is not ToolgateDeny
    ]


def _client_deny_classes() -> set[type[ToolgateDeny]]:
    """Every deny class the package defines (any depth below ToolgateDeny)."""
    found: set[type[ToolgateDeny]] = set()
    todo = list(ToolgateDeny.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.split(".")[0] == "toolgate_client" and cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    return found


def test_the_snapshot_has_the_shape_this_suite_reads() -> None:
    # A new key in the document is a new promise of the service: decide whether the client
    # mirrors it, then extend this test.
    assert set(DOCUMENT) == {"errors"}
    for entry in ENTRIES:
        assert set(entry) == {"error", "parent", "hierarchy", "codes", "description"}, entry
    assert len(BY_NAME) == len(ENTRIES), "a class is listed twice"
    assert len(set(DOC_CODES)) == len(DOC_CODES), "a code is listed under two classes"


@pytest.mark.parametrize("name", [entry["error"] for entry in ENTRIES])
def test_every_class_of_the_document_exists_with_its_parents(name: str) -> None:
    entry = BY_NAME[name]
    cls = getattr(toolgate_client, name, None)
    assert isinstance(cls, type), f"toolgate_client has no class {name}"
    assert cls.__name__ == name
    assert error_class_for(name) is cls
    assert issubclass(cls, ToolgateDeny) and not issubclass(cls, ToolgateError)
    # The issubclass chain is the service's hierarchy, root first.
    assert _deny_chain(cls) == entry["hierarchy"]
    for ancestor in entry["hierarchy"]:
        assert issubclass(cls, getattr(toolgate_client, ancestor))
    assert PARENTS[name] == entry["parent"]
    assert hierarchy_of(name) == entry["hierarchy"]


@pytest.mark.parametrize("name", [entry["error"] for entry in ENTRIES])
def test_every_code_of_the_document_maps_to_its_class(name: str) -> None:
    entry = BY_NAME[name]
    cls = getattr(toolgate_client, name)
    assert list(CODES[name]) == entry["codes"]
    assert cls.default_code == (entry["codes"][0] if entry["codes"] else None)
    codes_to_class = {code: owner for owner, codes in CODES.items() for code in codes}
    for code in entry["codes"]:
        assert codes_to_class[code] == name, code
        # What a deny carrying this class and code resolves to, and raises.
        deny = {"error": name, "hierarchy": entry["hierarchy"], "code": code, "check": None,
                "message": f"denied ({code})", "details": {}}
        decision = Decision.from_dict({"decision_id": "d-1", "allowed": False, "deny": deny})
        assert decision.deny is not None
        assert decision.deny.exception_class is cls
        assert resolve_deny_class(name, entry["hierarchy"]) is cls
        exc = exception_for_deny(decision.deny, decision=decision)
        assert type(exc) is cls and exc.code == code and exc.hierarchy == entry["hierarchy"]
        with pytest.raises(cls) as raised:
            decision.raise_for_deny()
        assert type(raised.value) is cls and raised.value.code == code


def test_the_client_has_no_class_or_code_the_document_lacks() -> None:
    assert set(CODES) == set(BY_NAME)
    assert set(PARENTS) == set(BY_NAME)
    client_codes = [code for codes in CODES.values() for code in codes]
    assert sorted(client_codes) == sorted(DOC_CODES)
    defined = {cls.__name__ for cls in _client_deny_classes()}
    assert defined == set(BY_NAME), sorted(defined ^ set(BY_NAME))
    exported = {name for name in toolgate_client.__all__
                if isinstance(getattr(toolgate_client, name), type)
                and issubclass(getattr(toolgate_client, name), ToolgateDeny)}
    assert exported == set(BY_NAME) | {"ToolgateDeny"}
