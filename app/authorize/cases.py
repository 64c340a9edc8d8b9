"""Decision tests, like `opa test`: replay cases against the current configuration.

POST /v1/test takes cases `{"name"?, "request": <authorize-tool body>, "expect": {"allowed",
"code"?}}` as a JSON list, {"cases": [...]}, or JSONL, decides each exactly as
/v1/authorize-tool would (same plans, registry, profiles, the same rule for cases without
plan_id: `stateless_forbidden` for a key that may not send them) and reports pass/fail per
case.
Nothing is recorded: these are not real decisions.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ValidationError

from app.auth.deps import PrincipalDep
from app.authorize.deps import PipelineDep
from app.authorize.schemas import AuthorizeIn
from app.authorize.service import check_scope
from app.edge.bodies import bad, parse_items
from app.edge.errors import ToolgateError
from app.edge.handlers import validation_details
from app.kit.schemas import Strict
from app.policy.tool import MissingCapability

router = APIRouter(prefix="/v1", tags=["decisions"])


class Expect(Strict):
    allowed: bool
    code: str | None = None
    # A call rule's id (SPEC §18): it must be among the rules that matched the call (the
    # deny's or ask's rule, a classify rule, a shadow rule).
    rule: str | None = None


class Case(BaseModel):
    name: str | None = None
    request: dict[str, Any]
    expect: Expect


def _case(value: Any, field: str) -> Case:
    try:
        return Case.model_validate(value, strict=True)
    except ValidationError as exc:
        first = validation_details(exc.errors())[0]
        raise bad(f"{field}.{first['field']}".rstrip("."), first["message"],
                  first["type"]) from None


class CaseResult(BaseModel):
    line: int
    name: str | None
    ok: bool
    expected: dict[str, Any]
    actual: dict[str, Any] | None
    problem: str | None = None


class TestReport(BaseModel):
    total: int
    passed: int
    failed: int
    ok: bool
    results: list[CaseResult]


# One case as the document describes it (Case and Expect above; `request` is checked per
# case and a bad one is reported in that case's result).
CASE_SCHEMA = {
    "type": "object", "required": ["request", "expect"],
    "properties": {
        "name": {"type": ["string", "null"]},
        "request": {"type": "object", "description": "a POST /v1/authorize-tool body"},
        "expect": {"type": "object", "required": ["allowed"], "additionalProperties": False,
                   "properties": {"allowed": {"type": "boolean"},
                                  "code": {"type": ["string", "null"]},
                                  "rule": {"type": ["string", "null"]}}},
    },
}
TEST_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"oneOf": [
        {"type": "array", "items": CASE_SCHEMA, "minItems": 1},
        {"type": "object", "required": ["cases"], "additionalProperties": False,
         "properties": {"cases": {"type": "array", "items": CASE_SCHEMA, "minItems": 1}}},
    ]}},
    "application/x-ndjson": {"schema": {"type": "string"},
                             "description": "one case (a JSON object) per line"},
}}}


@router.post("/test", response_model=TestReport, openapi_extra=TEST_BODY,
             summary="Replay decision cases against the current configuration (not recorded)")
async def run_tests(request: Request, pipeline: PipelineDep,
                    principal: PrincipalDep) -> dict:
    cases = parse_items(await request.body(), request.headers.get("content-type", ""),
                        key="cases", item=_case)
    results = []
    for line, case in cases:
        expected = case.expect.model_dump(exclude_unset=True)
        actual = problem = None
        try:
            body = AuthorizeIn.model_validate(case.request)
            # As authorize: a case without plan_id needs a key that may send one (SPEC §9);
            # otherwise the case reports stateless_forbidden and is not decided.
            check_scope(body, principal, None)
            answer = await pipeline.rehearse(body)
            deny = answer["deny"] or {}
            actual = {"allowed": answer["allowed"], "code": deny.get("code"),
                      "error": deny.get("error"), "message": deny.get("message")}
            matched = [rule["id"] for rule in answer["rules"]]
            if matched or "rule" in expected:
                actual["rules"] = matched
            ok = actual["allowed"] == case.expect.allowed and (
                "code" not in expected or actual["code"] == case.expect.code) and (
                "rule" not in expected or case.expect.rule in matched)
        except ValidationError as exc:
            fields = validation_details(exc.errors())
            problem = "invalid request: " + "; ".join(f"{f['field']}: {f['message']}"
                                                      for f in fields)
            ok = False
        except MissingCapability as exc:
            problem = f"invalid request: {', '.join(exc.fields)} required for an unregistered tool"
            ok = False
        except ToolgateError as exc:
            problem = f"{exc.code}: {exc.message}"
            ok = False
        results.append({"line": line, "name": case.name, "ok": ok, "expected": expected,
                        "actual": actual, "problem": problem})
    passed = sum(r["ok"] for r in results)
    return {"total": len(results), "passed": passed, "failed": len(results) - passed,
            "ok": passed == len(results), "results": results}
