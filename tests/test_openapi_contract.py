"""The OpenAPI document is the contract: schemathesis generates requests from it (valid and
invalid ones) against the app in process, with an admin key, and every answer must be one
the document describes: its status, content type, body schema and headers; no 5xx; invalid
input refused and valid input accepted; auth that is not ignored.

Bounded (a few examples per operation and phase, no shrinking on a failure's first report)
so the whole run stays well under two minutes on the SQLite database the other tests use;
tests/test_openapi_contract_postgres.py runs the same on PostgreSQL.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.conftest import ADMIN_HEADERS
from tests.contract import contract

# One app for the module, built at import so that schemathesis can reach it from every
# check, probes included; its database is laid down by `served` before the first request.
# (schemathesis.pytest.from_fixture would build both in a fixture, but it sets a node
# attribute pytest 9.2 no longer has.)
FOLDER = Path(tempfile.mkdtemp(prefix="toolgate-contract-"))
APP, SERVED, schema = contract(f"sqlite+aiosqlite:///{FOLDER / 'toolgate.db'}")


@pytest.fixture(scope="module")
def served(sqlite_template: Path) -> Iterator[None]:
    shutil.copyfile(sqlite_template, FOLDER / "toolgate.db")
    yield
    SERVED.stop()
    shutil.rmtree(FOLDER, ignore_errors=True)


@pytest.mark.slow
@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_answer_is_one_the_openapi_document_describes(case, served):  # type: ignore[no-untyped-def]
    case.call_and_validate(headers=ADMIN_HEADERS)


# A body that creates the resource, for every path the document lets a client PUT and DELETE.
CREATE = {
    "/v1/profiles/{name}": {},
    "/v1/tools/{name}": {"capability": {"writes": False, "checkpointable": True,
                                        "unsafe": False}, "safety_category": "safe"},
    "/v1/skills/{name}": {"unsafe_phrases": ["drop the table"]},
    "/v1/webhooks/{name}": {"url": "http://93.184.215.14:9/hook", "events": ["decision.denied"],
                            "secret": "a-secret-of-sixteen-or-more"},
    "/v1/rules/{rule_id}": {"tools": ["Bash"], "effect": "deny",
                            "when": {"command": ["rm *"]}},
    # A pin to a digest without its definition (an admin pinning ahead of the gateway).
    "/v1/gateway/pins/{server}/{tool}": {"digest": "0" * 64},
}


def _gone(template: str) -> str:
    return re.sub(r"\{[^}]+\}", "gone", template)


async def test_a_deleted_resource_is_gone_from_every_route_under_its_path(client):
    """The stateful half, kept simple and driven by the document: for every resource a
    client can PUT and DELETE, once it is deleted every GET at or under its path answers
    404 like the resource itself (before, GET /v1/profiles/{name}/versions answered 200)."""
    paths = APP.openapi()["paths"]
    deletable = sorted(p for p, ops in paths.items() if "put" in ops and "delete" in ops)
    assert sorted(CREATE) == deletable, "add a body that creates each new resource to CREATE"
    checked = []
    for template in deletable:
        path = _gone(template)
        assert (await client.put(path, json=CREATE[template])).status_code in (200, 201)
        assert (await client.delete(path)).status_code == 204
        for other, operations in paths.items():
            if "get" in operations and (other == template or other.startswith(template + "/")):
                r = await client.get(_gone(other))
                assert r.status_code == 404, (other, r.status_code, r.text)
                assert r.json()["error"]["code"] == "not_found"
                checked.append(other)
    assert "/v1/profiles/{name}/versions" in checked
