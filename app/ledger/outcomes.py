"""Outcome reports (SPEC §11): one per allowed decision, idempotent, stored with the
ledger's settlement and a record of kind `outcome` in the hash chain, in one transaction."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.keys import Principal
from app.auth.roles import Role
from app.edge.errors import Conflict, Forbidden, NotFound
from app.kit.caller import Caller
from app.kit.canonical import canonical_sha256
from app.ledger.schemas import OutcomeIn
from app.ledger.service import ERROR_CLASSES, Ledger, _insert
from app.ledger.tables import Outcome, outcome_out
from app.log.audit import record_in_transaction
from app.log.tables import LogRecord
from app.store.base import utcnow

STATELESS = (None, "inline")  # provenance of a decision bound to no stored plan


def _authorized_args_sha256(detail: dict[str, Any]) -> str | None:
    """The digest of the arguments the decision allowed: recorded when the log masks some
    of them (app/authorize/service.py), else computed from the logged arguments."""
    tool = detail.get("tool") or {}
    if "args_sha256" in tool:
        return tool["args_sha256"]
    return canonical_sha256(tool.get("args") or {})


async def report(session: AsyncSession, ledger: Ledger, *, decision_id: str,
                 body: OutcomeIn, principal: Principal, caller: Caller
                 ) -> tuple[int, dict[str, Any]]:
    """(201 or 200, the outcome). Raises 404 (unknown, not an authorize decision, or
    outside the key's projects), 403 (another key's decision), 409 (a deny, or a
    different report already stored)."""
    decision_id = decision_id[:64]
    row = await session.scalar(select(LogRecord).where(LogRecord.decision_id == decision_id))
    if row is None or row.kind != "authorize" or not principal.sees(row.project):
        raise NotFound(f"decision '{decision_id}' does not exist", decision_id=decision_id)
    if principal.role != Role.ADMIN and row.key_id != principal.key_id:
        raise Forbidden(f"decision '{decision_id}' was made by another key: only that key "
                        "or an admin may report its outcome", code="outcome_forbidden",
                        decision_id=decision_id)
    if not row.allowed:
        raise Conflict(f"decision '{decision_id}' was a deny: nothing ran, so there is no "
                       "outcome to report", code="outcome_for_deny", decision_id=decision_id)
    sent = body.model_dump(mode="json")
    digest = canonical_sha256(sent) or ""
    existing = await session.get(Outcome, decision_id)
    if existing is not None:
        return _again(existing, digest)
    detail = orjson.loads(row.detail)
    authorized = _authorized_args_sha256(detail)
    values = {
        "decision_id": decision_id, "project": row.project,
        "plan_id": None if row.provenance in STATELESS else row.plan_id,
        "step_id": (detail.get("context") or {}).get("step_id"), "tool": row.tool,
        "key_id": row.key_id, "status": body.status, "cost": body.cost,
        "verified": body.verified, "error": body.error,
        "args_sha256": body.args_sha256.lower() if body.args_sha256 else None,
        "artifacts": sent["artifacts"], "error_class": ERROR_CLASSES.get(body.status),
        "unverified": body.status == "succeeded" and body.verified is False,
        "args_mismatch": (body.args_sha256 is not None
                          and body.args_sha256.lower() != authorized),
        "reported_at": utcnow(), "body_sha256": digest,
    }
    inserted = await session.execute(
        _insert(session)(Outcome).values(**values).on_conflict_do_nothing())
    if inserted.rowcount != 1:  # a concurrent report of the same decision came first
        existing = await session.get(Outcome, decision_id, populate_existing=True)
        assert existing is not None
        return _again(existing, digest)
    outcome = await session.get(Outcome, decision_id)
    assert outcome is not None
    await ledger.settle(session, outcome)
    out = {"decision_id": decision_id, **outcome_out(outcome)}
    await record_in_transaction(
        session, caller, "outcome", project=row.project, plan_id=row.plan_id,
        action_id=row.action_id, tool=row.tool, code=body.status,
        error=outcome.error_class, detail={"outcome": out},
    )
    return 201, out


def _again(existing: Outcome, digest: str) -> tuple[int, dict[str, Any]]:
    if existing.body_sha256 != digest:
        raise Conflict(f"decision '{existing.decision_id}' already has a different outcome",
                       code="outcome_conflict", decision_id=existing.decision_id)
    return 200, {"decision_id": existing.decision_id, **outcome_out(existing)}
