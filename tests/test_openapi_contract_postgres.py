"""The OpenAPI contract run of tests/test_openapi_contract.py, on PostgreSQL: the same
generated requests, the same checks (status, content type, body schema, headers; no 5xx;
invalid input refused, valid accepted; auth not ignored), against an app whose database is a
PostgreSQL one made from the suite's migrated template. Skipped without a reachable
PostgreSQL, a failure under TOOLGATE_REQUIRE_POSTGRES=1 (CI)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.conftest import ADMIN_HEADERS, _pg_admin, _pg_url
from tests.contract import contract, nul_schema

DATABASE = f"toolgate_contract_{os.getpid()}_{uuid.uuid4().hex[:8]}"
APP, SERVED, schema = contract(_pg_url(DATABASE))
nul = nul_schema(APP, SERVED)


@pytest.fixture(scope="module")
def served(pg_template: str | None) -> Iterator[None]:
    if pg_template is None:
        pytest.skip("Postgres not reachable (set TOOLGATE_REQUIRE_POSTGRES=1 to fail)")
    asyncio.run(_pg_admin(f"CREATE DATABASE {DATABASE} TEMPLATE {pg_template}"))
    try:
        yield
    finally:
        SERVED.stop()
        asyncio.run(_pg_admin(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))


@pytest.mark.slow
@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_answer_is_one_the_openapi_document_describes(case, served):  # type: ignore[no-untyped-def]
    case.call_and_validate(headers=ADMIN_HEADERS)


@pytest.mark.slow
@nul.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_route_answers_a_nul_with_a_server_error(case, served):  # type: ignore[no-untyped-def]
    """Every route, valid requests whose strings may hold NUL, on PostgreSQL: never a 5xx
    (each string a body stores is refused with a 422 by Strict's rule, app/kit/schemas.py)."""
    case.call_and_validate(headers=ADMIN_HEADERS)
