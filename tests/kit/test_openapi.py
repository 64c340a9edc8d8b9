"""The OpenAPI document describes the errors every operation can answer, in the envelope the
app sends (app/edge/openapi.py); tests/test_openapi_contract.py sends it requests. These
are the document's own rules, read without a server."""

from __future__ import annotations

import pytest

from app.auth.roles import PUBLIC
from app.config import Settings
from app.main import create_app

ERROR = {"$ref": "#/components/schemas/Error"}


def _document(**settings: object) -> dict:
    return create_app(Settings(**settings)).openapi()  # type: ignore[arg-type]


def _operations(document: dict):  # type: ignore[no-untyped-def]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            yield method.upper(), path, operation


def _error_schema(operation: dict, status: str) -> dict | None:
    response = operation["responses"].get(status)
    if response is None:
        return None
    return response["content"]["application/json"]["schema"]


def test_every_keyed_operation_documents_401_403_503_in_the_envelope():
    for method, path, operation in _operations(_document()):
        keyed = (method, path) not in PUBLIC
        for status in ("401", "403"):
            schema = _error_schema(operation, status)
            assert (schema == ERROR) if keyed else schema is None, (method, path, status)
        if keyed:  # the key is read from the database
            assert _error_schema(operation, "503") == ERROR, (method, path)
        assert "429" not in operation["responses"], (method, path)


def test_429_is_documented_when_rate_limits_are_on():
    for method, path, operation in _operations(_document(rate_limit_per_second=5)):
        if (method, path) not in PUBLIC:
            assert _error_schema(operation, "429") == ERROR, (method, path)


def test_input_errors_are_the_envelope_not_fastapis_shape():
    document = _document()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    schemas = document["components"]["schemas"]
    assert schemas["Error"]["required"] == ["error"]
    assert set(schemas["ErrorBody"]["required"]) == {"code", "message", "details"}
    for method, path, operation in _operations(document):
        takes_input = bool(operation.get("parameters") or operation.get("requestBody"))
        assert (_error_schema(operation, "422") == ERROR) is takes_input, (method, path)
        assert (_error_schema(operation, "413") == ERROR) is ("requestBody" in operation), \
            (method, path)


@pytest.mark.parametrize(("method", "path", "statuses"), [
    ("GET", "/v1/profiles/{name}", {"404"}),
    ("GET", "/v1/profiles/{name}/versions", {"404"}),
    ("DELETE", "/v1/profiles/{name}", {"404", "409"}),
    ("POST", "/v1/plans", {"404", "409"}),
    ("POST", "/v1/plans/{plan_id}/execute", {"404", "409"}),
    ("POST", "/v1/authorize-tool", {"404"}),
    ("GET", "/v1/decisions/{decision_id}", {"404"}),
    ("DELETE", "/v1/keys/{key_id}", {"404"}),
])
def test_routes_document_the_404_and_409_they_can_answer(method, path, statuses):
    operation = _document()["paths"][path][method.lower()]
    for status in statuses:
        assert _error_schema(operation, status) == ERROR, status


def test_readiness_documents_not_ready():
    for method in ("get", "head"):
        assert _error_schema(_document()["paths"]["/readyz"][method], "503") == ERROR


def test_the_export_is_documented_as_what_it_sends():
    operation = _document()["paths"]["/v1/audit/export"]["get"]
    assert set(operation["responses"]["200"]["content"]) == {"application/x-ndjson", "text/csv"}
    assert _error_schema(operation, "422") == ERROR  # errors stay JSON


async def test_405_allows_every_method_of_the_path(client):
    """Starlette names only the methods of the first route whose path matched."""
    r = await client.post("/v1/profiles/x")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, PUT"
    assert r.json()["error"]["code"] == "method_not_allowed"
    r = await client.delete("/v1/plans")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
