"""Call rules (SPEC §18): PUT/GET/DELETE /v1/rules/{rule_id}, GET /v1/rules."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Response

from app.auth.deps import PrincipalDep
from app.auth.keys import Principal
from app.edge.bodies import bad
from app.edge.errors import Conflict, NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import CallerDep, NameParam, Session
from app.kit.schemas import NAME_PATTERN
from app.log.audit import audit_change
from app.registry import service as registry_service
from app.registry.deps import RegistryDep
from app.rules import repository as rules_repo
from app.rules.schemas import MAX_RULES_PER_SCOPE, RuleIn, RuleList, RuleOut
from app.rules.service import compile_body
from app.rules.tables import Rule

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["rules"])


def _rule(row: Rule) -> dict[str, Any]:
    body = row.body
    return {"rule_id": row.rule_id, "project": row.project, "tools": body["tools"],
            "when": body.get("when") or {}, "effect": body["effect"],
            "capability": body.get("capability"), "message": body.get("message"),
            "mode": body.get("mode", "enforce"), "version": row.version,
            "created_at": row.created_at, "updated_at": row.updated_at}


def _audited(row: Rule) -> dict[str, Any]:
    return {"body": row.body, "version": row.version}


def _nul_field(value: Any, path: str = "") -> str | None:
    """The first field holding a NUL character (PostgreSQL stores none), or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        if isinstance(key, str) and "\x00" in key:
            return f"{path}.{key}".lstrip(".")
        found = _nul_field(item, f"{path}.{key}".lstrip("."))
        if found is not None:
            return found
    return None


def _visible(principal: Principal, row: Rule | None) -> bool:
    # Global rules apply to every project's calls: every reader sees them.
    return row is not None and (row.project is None or principal.sees(row.project))


@router.put("/rules/{rule_id}", response_model=RuleOut,
            responses={201: {"model": RuleOut, "description": "Created"}, **errors(409)})
async def put_rule(rule_id: NameParam, body: RuleIn, session: Session, registry: RegistryDep,
                   response: Response, caller: CallerDep) -> dict:
    """Create or replace a rule. It is compiled first: a rule that does not compile (a bad
    pattern, CEL that does not parse or type-check, a `capability` on a rule that does
    not classify) is 422 naming its field, and nothing is stored. Decisions on every
    replica use it within the registry's staleness bound, on this one at once."""
    raw = body.model_dump(exclude_none=True)
    if (field := _nul_field(raw)) is not None:
        raise bad(field, "must not contain NUL (\\u0000) characters", "value_error")
    compiled = compile_body(rule_id, raw)
    stored = orjson.loads(orjson.dumps(compiled.body))  # plain JSON, as it reads back
    existing = await rules_repo.lock_rule(session, rule_id)
    live = existing if existing is not None and existing.deleted_at is None else None
    project = stored.get("project")
    if (live is None or live.project != project) and await rules_repo.count_rules(
            session, project) >= MAX_RULES_PER_SCOPE:
        scope = f"project '{project}'" if project is not None else "the global scope"
        raise Conflict(f"{scope} already has {MAX_RULES_PER_SCOPE} rules, the most it may "
                       "have", code="too_many_rules", project=project)
    before = _audited(live) if live is not None else None
    row, created, changed = await rules_repo.put_rule(session, existing, rule_id, body=stored)
    if changed:
        await registry_service.changed(session, registry)
        await audit_change(session, caller, resource="rule", name=rule_id,
                           project=project, operation="create" if created else "update",
                           before=before, after=_audited(row))
    response.status_code = 201 if created else 200
    return _rule(row)


@router.get("/rules", response_model=RuleList)
async def list_rules(session: Session, principal: PrincipalDep,
                     project: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None
                     ) -> dict:
    """Rules by id, within the key's projects (global rules to every key). `project`:
    the rules that project's calls are evaluated under, global ones included."""
    if project is not None and not principal.sees(project):
        return {"items": []}
    rows = await rules_repo.list_rules(session, project=project,
                                       projects=principal.project_list())
    return {"items": [_rule(row) for row in rows]}


@router.get("/rules/{rule_id}", response_model=RuleOut, responses=errors(404))
async def get_rule(rule_id: NameParam, session: Session, principal: PrincipalDep) -> dict:
    row = await rules_repo.get_rule(session, rule_id)
    if row is None or not _visible(principal, row):
        raise NotFound(f"rule '{rule_id}' does not exist", rule=rule_id)
    return _rule(row)


@router.delete("/rules/{rule_id}", status_code=204, responses=errors(404))
async def delete_rule(rule_id: NameParam, session: Session, registry: RegistryDep,
                      caller: CallerDep) -> Response:
    row = await rules_repo.lock_rule(session, rule_id)
    if row is None or row.deleted_at is not None:
        raise NotFound(f"rule '{rule_id}' does not exist", rule=rule_id)
    before = _audited(row)
    await rules_repo.delete_rule(session, row)
    await registry_service.changed(session, registry)
    await audit_change(session, caller, resource="rule", name=rule_id, project=row.project,
                       operation="delete", before=before, after=None)
    return Response(status_code=204)
