"""X-Request-ID (SPEC §17): kept when it matches `[A-Za-z0-9._:-]{1,128}`, replaced by a
generated id otherwise, in the answer, the access line and the decision's record, on every
way of serving (toolgate's protocol with the hot route, and plain ASGI)."""

from __future__ import annotations

import httpx
import pytest

from tests.ops.test_logs import ALLOW, configured, lines_of, logged, use  # noqa: F401

FORGED = "x status=200 decision_id=forged"


@pytest.mark.parametrize("sent", [
    FORGED, "a" * 129, "rq\u00e9", "rq/7", "rq 7", "'\"<>", "rq;7",
])
async def test_an_invalid_id_is_replaced_everywhere(configured: None,  # noqa: F811
                                                    logged: httpx.AsyncClient,  # noqa: F811
                                                    sent: str) -> None:
    stream = use("text")
    header = sent.encode("utf-8").decode("latin-1")
    for method, path, body in (("POST", "/v1/authorize-tool", ALLOW),
                               ("GET", "/v1/profiles/none", None)):
        r = await logged.request(method, path, json=body,
                                 headers={"X-Request-ID": sent.encode("utf-8")})
        answered = r.headers["x-request-id"]
        assert answered != header and answered, (path, answered)
        assert all(c.isalnum() or c in "._:-" for c in answered)
        if path == "/v1/authorize-tool":
            record = (await logged.get(f"/v1/decisions/{r.json()['decision_id']}")).json()
            assert record["request_id"] in (None, answered)
    access = [line for line in lines_of(stream)
              if "toolgate.access" in line and "/v1/decisions" not in line]
    assert len(access) == 2
    for line in access:
        assert "forged" not in line and "status=200" not in line
        assert header not in line


@pytest.mark.parametrize("sent", ["rq-7", "a" * 128, "trace:01H.x_y-z", "0"])
async def test_a_valid_id_is_kept(configured: None, logged: httpx.AsyncClient,  # noqa: F811
                                  sent: str) -> None:
    stream = use("text")
    r = await logged.post("/v1/authorize-tool", json=ALLOW, headers={"X-Request-ID": sent})
    assert r.headers["x-request-id"] == sent
    record = (await logged.get(f"/v1/decisions/{r.json()['decision_id']}")).json()
    assert record["request_id"] == sent
    r = await logged.get("/v1/profiles/none", headers={"X-Request-ID": sent})
    assert r.headers["x-request-id"] == sent
    access = [line for line in lines_of(stream)
              if "toolgate.access" in line and "/v1/decisions" not in line]
    assert all(f"request_id={sent}" in line for line in access) and len(access) == 2
