"""The same decision cases as tests/policy/test_cases.py, through the HTTP API."""

from tests.casefiles import load_cases

DECISIONS = load_cases("decision")
INVALID = load_cases("invalid")


def _mismatch(case_id, expect, decision):
    deny = decision.get("deny")
    got = {
        "allowed": decision.get("allowed"),
        "code": deny["code"] if deny else None,
        "error": deny["error"] if deny else None,
        "check": deny["check"] if deny else None,
    }
    wanted = {k: expect.get(k) for k in got if k in expect}
    problems = {k: (wanted[k], got[k]) for k in wanted if wanted[k] != got[k]}
    if "message" in expect and (deny or {}).get("message") != expect["message"]:
        problems["message"] = (expect["message"], (deny or {}).get("message"))
    for key, value in (expect.get("details") or {}).items():
        if (deny or {}).get("details", {}).get(key) != value:
            problems[f"details.{key}"] = (value, (deny or {}).get("details", {}).get(key))
    return f"{case_id}: {problems}" if problems else None


async def test_decision_cases_over_http(both_paths):
    client = both_paths
    failures = []
    for case_id, case in DECISIONS:
        r = await client.post("/v1/authorize-tool", json=case["request"])
        if r.status_code != 200:
            failures.append(f"{case_id}: HTTP {r.status_code} {r.text[:200]}")
            continue
        decision = r.json()
        assert decision["decision_id"]
        if (problem := _mismatch(case_id, case["expect"], decision)) is not None:
            failures.append(problem)
        if decision["deny"] is not None:
            assert decision["deny"]["hierarchy"][-1] == decision["deny"]["error"]
    assert not failures, "\n".join(failures)
    assert len(DECISIONS) >= 120


async def test_decision_cases_in_one_batch(client):
    requests = [case["request"] for _, case in DECISIONS[:100]]
    r = await client.post("/v1/authorize-tools", json={"requests": requests})
    assert r.status_code == 200
    items = r.json()["items"]
    assert len(items) == len(requests)
    failures = [p for (case_id, case), item in zip(DECISIONS[:100], items, strict=True)
                if (p := _mismatch(case_id, case["expect"], item))]
    assert not failures, "\n".join(failures)
    # A bare JSON list means the same.
    bare = await client.post("/v1/authorize-tools", json=requests[:3])
    assert [i["allowed"] for i in bare.json()["items"]] == [i["allowed"] for i in items[:3]]


async def test_invalid_cases_are_422_naming_the_field_and_record_nothing(both_paths):
    client = both_paths
    failures = []
    for case_id, case in INVALID:
        r = await client.post("/v1/authorize-tool", json=case["request"])
        if r.status_code != 422:
            failures.append(f"{case_id}: HTTP {r.status_code}")
            continue
        error = r.json()["error"]
        fields = [f["field"] for f in error["details"].get("fields", [])]
        if case["expect"]["field"] not in fields:
            failures.append(f"{case_id}: fields {fields}, wanted {case['expect']['field']}")
        if case["expect"]["field"] not in error["message"]:
            failures.append(f"{case_id}: message does not name the field: {error['message']}")
    assert not failures, "\n".join(failures)
    assert (await client.get("/v1/decisions")).json()["items"] == []
