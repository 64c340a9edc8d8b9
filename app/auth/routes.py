"""API key management (SPEC §6 "Keys"); admin only (app/auth/roles.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from app.auth import repository as repo
from app.auth.deps import KeyCacheDep
from app.auth.keys import display_prefix, hash_secret, new_key_id, new_secret
from app.auth.principals import normal
from app.auth.schemas import KeyCreated, KeyIn, KeyList
from app.auth.tables import ApiKey
from app.edge.errors import NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import CallerDep, NameParam, Session
from app.log.audit import audit_change
from app.log.records import iso
from app.store.base import utcnow

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["keys"])


def _key(row: ApiKey) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "role": row.role, "projects": row.projects,
            "prefix": row.prefix, "created_at": row.created_at, "created_by": row.created_by,
            "expires_at": row.expires_at, "revoked_at": row.revoked_at,
            "revoked_by": row.revoked_by, "stateless": row.stateless,
            "principal": normal(row.principal or row.id)}


def _audited(row: ApiKey) -> dict[str, Any]:
    """What the log keeps of a key: never the secret nor its hash."""
    return {"name": row.name, "role": row.role, "projects": row.projects,
            "prefix": row.prefix,
            "expires_at": iso(row.expires_at) if row.expires_at else None,
            "revoked": row.revoked_at is not None, "stateless": row.stateless,
            "principal": row.principal or row.id}


@router.post("/keys", response_model=KeyCreated, status_code=201, responses=errors(409),
             summary="Create a key; the secret is in this answer only")
async def create_key(body: KeyIn, session: Session, key_cache: KeyCacheDep,
                     caller: CallerDep) -> dict:
    secret = new_secret()
    row = ApiKey(id=new_key_id(), name=body.name, role=body.role, projects=body.projects,
                 key_hash=hash_secret(secret), prefix=display_prefix(secret),
                 created_at=utcnow(), created_by=caller.key_id, expires_at=body.expires_at,
                 stateless=body.stateless, principal=body.principal)
    await repo.insert(session, row)
    key_cache.forget_misses_on_commit(session)  # its hash may have been refused lately
    await audit_change(session, caller, resource="key", name=row.id, operation="create",
                       before=None, after=_audited(row))
    return {**_key(row), "key": secret}


@router.get("/keys", response_model=KeyList, summary="Every key, revoked ones included")
async def list_keys(session: Session) -> dict:
    return {"items": [_key(row) for row in await repo.list_keys(session)]}


@router.delete("/keys/{key_id}", status_code=204, responses=errors(404),
               summary="Revoke a key: refused at once by every process (docs/auth.md)")
async def revoke_key(key_id: NameParam, session: Session, key_cache: KeyCacheDep,
                     caller: CallerDep) -> Response:
    row = await repo.lock(session, key_id)
    if row is None:
        raise NotFound(f"key '{key_id}' does not exist", key_id=key_id)
    if row.revoked_at is None:
        before = _audited(row)
        await repo.revoke(session, row, by=caller.key_id)
        key_cache.clear_on_commit(session)
        await audit_change(session, caller, resource="key", name=row.id, operation="revoke",
                           before=before, after=_audited(row))
    return Response(status_code=204)
