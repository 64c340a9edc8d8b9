"""The OpenAPI contract run's machinery, shared by the SQLite and PostgreSQL modules
(tests/test_openapi_contract.py, tests/test_openapi_contract_postgres.py): schemathesis's
configuration, and one app per database served behind one lifespan for the module."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import schemathesis  # a dev dependency (uv.lock): never skipped for its absence

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN

# Requests valid by the document that the service still refuses with a 422 (named field),
# for rules a JSON schema does not carry: a profile, action or tool the request names must
# exist (SPEC §4: 422 naming it), fields that exclude each other (automation_profile or
# safety_profile; plan_id alone; an admin key's projects null; since before until), phrases
# that must hold more than whitespace, cursors that come from a previous page, JSONL
# bodies (a string to the schema), and a webhook URL, which must name a public address
# unless TOOLGATE_WEBHOOK_ALLOW_HOSTS allows it (app/webhooks/guard.py). Integers are not
# among them: every integer field takes 3.0 as JSON Schema does (SPEC §17). Every other
# check still holds on these operations, and a 422 must be the documented envelope.
RULES_NOT_IN_THE_SCHEMA = [
    "GET /v1/plans", "POST /v1/plans", "POST /v1/resolve",
    "POST /v1/authorize-tool", "POST /v1/authorize-tools",
    "POST /v1/decisions/{decision_id}/outcome", "POST /v1/outcomes",
    "PUT /v1/config", "PUT /v1/projects/{project}", "PUT /v1/actions/{action_id}",
    "PUT /v1/projects/{project}/settings",
    "PUT /v1/tools/{name}", "PUT /v1/skills/{name}", "POST /v1/skills/{name}/safety-test",
    "POST /v1/test", "POST /v1/keys", "GET /v1/decisions", "GET /v1/decisions/stats",
    "GET /v1/audit/export", "GET /v1/audit/verify", "GET /v1/approvals", "POST /v1/replay",
    "GET /v1/audit/checkpoints",  # since: a seq or an RFC 3339 date-time
    "PUT /v1/webhooks/{name}",  # url: a public address unless TOOLGATE_WEBHOOK_ALLOW_HOSTS
    "PUT /v1/rules/{rule_id}",  # a rule must compile: its patterns, its CEL (SPEC §18)
    # a definition's name is the path's tool, and its digest the one given (SPEC §19)
    "PUT /v1/gateway/pins/{server}/{tool}", "POST /v1/gateway/pins/{server}/{tool}/seen",
]
CONFIG = f"""
[generation]
max-examples = 5
mode = "all"
deterministic = true
# NUL is refused in every stored string (PostgreSQL cannot store it): app/kit/schemas.py
allow-x00 = false

[phases.stateful]
enabled = false

[checks]
enabled = true

[[operations]]
include-name = {RULES_NOT_IN_THE_SCHEMA!r}
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

# Claude Code runs a call whose hook answers an error, so the hook route answers a missing
# or bad key, and a body or query the document does not describe, with a 200 deny naming
# why (app/hooks/routes.py; tests/hooks and the route-coverage test check those denies),
# never a 401 or a 422: the one route these checks cannot judge by the status.
[[operations]]
include-name = ["POST /v1/hooks/claude-code"]
checks.ignored_auth.enabled = false
checks.negative_data_rejection.enabled = false
checks.missing_required_header.enabled = false
"""


class OneLifespan:
    """The app behind an ASGI lifespan that starts it once for the module: schemathesis
    starts and ends an app's lifespan around every test (one per operation), and toolgate's
    takes most of a second (the decision log writer process). Started on the first test's
    startup, in schemathesis's event loop, which then serves every request; `stop` ends it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping: asyncio.Event | None = None
        self.stopped = threading.Event()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        await receive()  # lifespan.startup
        if self.loop is None:
            self.loop, self.stopping = asyncio.get_running_loop(), asyncio.Event()
            started = asyncio.Event()
            self.keeper = self.loop.create_task(self._keep(started))
            await started.wait()
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown: the app keeps running
        await send({"type": "lifespan.shutdown.complete"})

    async def _keep(self, started: asyncio.Event) -> None:
        try:
            async with self.app.router.lifespan_context(self.app):
                started.set()
                assert self.stopping is not None
                await self.stopping.wait()
        finally:
            self.stopped.set()

    def stop(self) -> None:
        if self.loop is not None and self.stopping is not None:
            self.loop.call_soon_threadsafe(self.stopping.set)
            self.stopped.wait(timeout=30)


# JSONL bodies (POST /v1/test, safety tests) are text: sent as text/plain bodies are.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")




# Every route with NUL characters in the strings it is sent, judged by one check, no 5xx:
# NUL is valid JSON and valid by the document, and PostgreSQL cannot store it, so a string
# that reaches a column unrefused is a 503 (issue 45 item 16: a webhook's secret). Valid
# bodies only ("positive"); the other checks are the main run's.
NUL_CONFIG = """
[generation]
max-examples = 10
mode = "positive"
deterministic = true
allow-x00 = true

[phases.stateful]
enabled = false

[checks]
enabled = false
not_a_server_error.enabled = true
"""


def nul_schema(app: Any, served: OneLifespan) -> Any:
    """schemathesis's schema of `app` under NUL_CONFIG, served by the same lifespan."""
    schema = schemathesis.openapi.from_dict(
        app.openapi(), config=schemathesis.Config.from_str(NUL_CONFIG))
    schema.app = served
    return schema


def contract(database_url: str) -> tuple[Any, OneLifespan, Any]:
    """The app on `database_url` (create_app touches nothing until its lifespan runs, so the
    database may be laid down after this, before the first request), its one lifespan, and
    schemathesis's schema of it."""
    app = create_app(Settings(database_url=database_url, admin_token=ADMIN_TOKEN))
    served = OneLifespan(app)
    schema = schemathesis.openapi.from_dict(
        app.openapi(), config=schemathesis.Config.from_str(CONFIG))
    schema.app = served
    return app, served, schema
