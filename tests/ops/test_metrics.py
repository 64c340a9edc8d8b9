"""GET /metrics (SPEC §13): every way of serving authorize is counted, labels stay bounded,
the optional token guards it, and X-Request-ID comes back on every answer."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.kit.metrics import DECISION_BUCKETS, Tally, _observe_many
from tests.conftest import ADMIN_HEADERS, app_client

CAP = {"writes": False, "checkpointable": True, "unsafe": False}
ALLOW = {"tool": {"name": "reader", "capability": CAP}}
# A writing tool in a read-only context: denied by check 1 (code read_only).
DENY = {"tool": {"name": "writer", "capability": {**CAP, "writes": True}},
        "context": {"plan_read_only": True}}


async def samples(client: httpx.AsyncClient, **headers: str) -> dict[tuple, float]:
    r = await client.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            found[(s.name, *sorted(s.labels.items()))] = s.value
    return found


def delta(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, *sorted(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


async def test_decisions_counted_on_every_path(both_paths: httpx.AsyncClient) -> None:
    client = both_paths
    before = await samples(client)
    for body in (ALLOW, ALLOW, ALLOW, DENY, DENY):
        r = await client.post("/v1/authorize-tool", json=body)
        assert r.status_code == 200, r.text
    assert r.json()["deny"]["code"] == "read_only"
    r = await client.post("/v1/authorize-tool", json={"tool": {}})  # 422: no decision
    assert r.status_code == 422
    after = await samples(client)
    assert delta(before, after, "toolgate_decisions_total", allowed="true", code="none") == 3
    assert delta(before, after, "toolgate_decisions_total", allowed="false",
                 code="read_only") == 2
    assert delta(before, after, "toolgate_decision_seconds_count") == 5
    assert delta(before, after, "toolgate_tool_decisions_total", tool="writer",
                 allowed="false") == 2
    assert delta(before, after, "toolgate_http_requests_total", route="/v1/authorize-tool",
                 status="200") == 5
    assert delta(before, after, "toolgate_http_requests_total", route="/v1/authorize-tool",
                 status="422") == 1
    for name in ("toolgate_log_queue_depth", "toolgate_approvals_pending",
                 "toolgate_approval_waits", "toolgate_storage_errors_total"):
        assert any(key[0] == name for key in after), name


async def test_request_id_echoed_or_generated(both_paths: httpx.AsyncClient) -> None:
    client = both_paths
    r = await client.post("/v1/authorize-tool", json=ALLOW, headers={"X-Request-ID": "rq-1"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "rq-1"
    r = await client.post("/v1/authorize-tool", json={"tool": {}}, headers={"X-Request-ID": "rq-2"})
    assert r.status_code == 422 and r.headers["x-request-id"] == "rq-2"
    one = await client.post("/v1/authorize-tool", json=ALLOW)
    two = await client.post("/v1/authorize-tool", json=ALLOW)
    assert one.headers["x-request-id"] and two.headers["x-request-id"]
    assert one.headers["x-request-id"] != two.headers["x-request-id"]
    r = await client.get("/v1/no-such-route", headers={"X-Request-ID": "rq-3"})
    assert r.status_code == 404 and r.headers["x-request-id"] == "rq-3"
    r = await client.get("/healthz")
    assert r.headers["x-request-id"]
    # one too long to be an id is replaced, not echoed
    r = await client.get("/healthz", headers={"X-Request-ID": "x" * 500})
    assert r.headers["x-request-id"] != "x" * 500


async def test_routes_are_templates_not_paths(client: httpx.AsyncClient) -> None:
    before = await samples(client)
    for name in ("a", "b", "c"):
        assert (await client.get(f"/v1/profiles/{name}")).status_code == 404
    assert (await client.get("/nothing/here")).status_code == 404
    after = await samples(client)
    assert delta(before, after, "toolgate_http_requests_total",
                 route="/v1/profiles/{name}", status="404") == 3
    assert delta(before, after, "toolgate_http_requests_total", route="unmatched",
                 status="404") == 1
    assert not any("/v1/profiles/a" in str(key) for key in after)


async def test_token_guards_metrics(settings) -> None:
    async with app_client(settings.model_copy(update={"metrics_token": "scrape-me"})) as c:
        r = await c.get("/metrics")  # the admin key is not the token
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = await c.get("/metrics", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401
        await samples(c, Authorization="Bearer scrape-me")
    async with app_client(settings) as c:  # without a token: open, no key needed
        c.headers.pop("Authorization")
        await samples(c)
        assert ADMIN_HEADERS  # (the client sends none now)


def test_tool_and_project_labels_are_capped() -> None:
    tally = Tally(max_tools=2, max_projects=1, codes=frozenset({"read_only"}))
    records = [{"allowed": False, "code": code, "project": f"p{i % 3}", "tool": f"t{i}",
                "latency_ms": 0.05} for i, code in enumerate(["read_only", "forged", "x"] * 3)]
    tally.records(records)
    kept_tools = {"t0", "t1"}
    tally.flush()
    from app.kit.metrics import metric

    tools = {s.labels["tool"] for s in metric("by_tool").collect()[0].samples}
    assert kept_tools <= tools and "t5" not in tools and "other" in tools
    codes = {s.labels["code"] for s in metric("decisions").collect()[0].samples}
    assert "forged" not in codes and "other" in codes


def test_binned_observations_equal_observe() -> None:
    """_observe_many reaches into prometheus-client's histogram values (pinned minor): its
    exposition must be the one observe() gives for the same values."""
    values = [0.00001, 0.00007, 0.0001, 0.0003, 0.002, 0.04, 0.3, 2.0, 9.0, 0.00007]
    one, many = CollectorRegistry(), CollectorRegistry()
    observed = Histogram("h", "h", buckets=DECISION_BUCKETS, registry=one)
    for v in values:
        observed.observe(v)
    tally = Tally()
    tally.records([{"allowed": True, "code": None, "project": None, "tool": "t",
                    "latency_ms": v * 1000} for v in values])
    binned = Histogram("h", "h", buckets=DECISION_BUCKETS, registry=many)
    _observe_many(binned, tally.latency, tally.latency_sum / 1000)

    def lines(registry: CollectorRegistry) -> list[str]:
        return [line for line in generate_latest(registry).decode().splitlines()
                if "_created" not in line and "_sum" not in line]

    assert lines(one) == lines(many)
    assert binned._sum.get() == pytest.approx(observed._sum.get())
