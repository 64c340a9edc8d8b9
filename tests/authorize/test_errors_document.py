"""The client's snapshot of `GET /v1/errors` is the service's deny table, exactly.

clients/python/tests/errors_document.json is what the Python client's own suite checks its
exception classes against (clients/python/tests/test_client_error_classes.py). Changing
app/policy/denies.py fails here until the snapshot is regenerated, and then fails the
client's suite until toolgate_client/errors.py follows.
"""

import json
from pathlib import Path

from app.policy.denies import errors_document

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "clients" / "python" / "tests" / "errors_document.json"
REGENERATE = ("regenerate it from the repository root with "
              "`python clients/python/scripts/update_errors_document.py`, then bring "
              "clients/python/src/toolgate_client/errors.py in step until clients/python/tests "
              "passes")


def test_the_client_snapshot_is_the_errors_document():
    assert SNAPSHOT.exists(), f"{SNAPSHOT.relative_to(ROOT)} is missing: {REGENERATE}"
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert snapshot == errors_document(), (
        f"{SNAPSHOT.relative_to(ROOT)} differs from app.policy.denies.errors_document(): "
        f"{REGENERATE}")


async def test_the_service_serves_the_errors_document(client):
    r = await client.get("/v1/errors")
    assert r.status_code == 200
    assert r.json() == errors_document()
