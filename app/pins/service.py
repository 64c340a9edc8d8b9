"""The rules of pins (SPEC §19): a tool's status, what a gateway's report of a definition
does, an admin's pin, and the deny a call of a tool that does not match is answered with.

The deny is a decision like any other: recorded in the log (kind `authorize`, code
`tool_not_activated`, check `registry`) before it is answered, with `details.pin` =
{"pinned", "seen"} (the digests)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.caller import Caller, new_decision_id
from app.log.audit import audit_change, record_decisions
from app.log.records import new_record
from app.pins import repository as pins_repo
from app.pins.tables import GatewayPin
from app.policy.checks import deny
from app.store.base import utcnow

FIRST_USE = "first_use"


def status(row: GatewayPin) -> str:
    if row.digest is None:
        return "pending"
    if row.seen_digest is not None and row.seen_digest != row.digest:
        return "changed"
    return "pinned"


def pin_out(row: GatewayPin) -> dict[str, Any]:
    seen = None
    if row.seen_digest is not None and row.seen_digest != row.digest:
        seen = {"digest": row.seen_digest, "definition": row.seen_definition, "at": row.seen_at}
    return {"server": row.server, "tool": row.tool, "status": status(row), "digest": row.digest,
            "definition": row.definition, "pinned_by": row.pinned_by, "seen": seen,
            "created_at": row.created_at, "updated_at": row.updated_at}


def audited(row: GatewayPin | None) -> dict[str, Any] | None:
    """What an audit record shows of a pin: what it is pinned to."""
    if row is None or row.digest is None:
        return None
    return {"digest": row.digest, "definition": row.definition, "pinned_by": row.pinned_by}


def _name(server: str, tool: str) -> str:
    return f"{server}.{tool}"


async def report_seen(session: AsyncSession, caller: Caller, *, server: str, tool: str,
                      definition: dict[str, Any], digest: str, mode: str
                      ) -> tuple[GatewayPin, bool]:
    """A gateway saw `definition` (with `digest`): the tool's row (under `approve`, a
    tool never pinned gets one without a digest, `pending`) and whether it matches.

    Under `first_use` the first definition seen of a tool is pinned (audited as a pin
    made by `first_use`). Any other definition is kept as `seen` for an admin to review;
    it never replaces a pin."""
    row = await pins_repo.lock_pin(session, server, tool)
    if row is None:
        row = await pins_repo.new_pin(session, server, tool)
    before = audited(row)
    if row.digest is None and mode == FIRST_USE:
        row.digest, row.definition, row.pinned_by = digest, definition, FIRST_USE
        row.seen_digest = row.seen_definition = row.seen_at = None
        await pins_repo.save(session, row)
        await audit_change(session, caller, resource="gateway_pin", name=_name(server, tool),
                           operation="create" if before is None else "update",
                           before=before, after=audited(row))
        return row, True
    if row.digest == digest:
        if row.seen_digest is not None:
            row.seen_digest = row.seen_definition = row.seen_at = None
            await pins_repo.save(session, row)
        return row, True
    if row.seen_digest != digest or row.seen_at is None:
        row.seen_digest, row.seen_definition, row.seen_at = digest, definition, utcnow()
        await pins_repo.save(session, row)
    return row, False


async def put_pin(session: AsyncSession, caller: Caller, row: GatewayPin | None, *,
                  server: str, tool: str, digest: str,
                  definition: dict[str, Any] | None) -> tuple[GatewayPin, bool]:
    """An admin pins the tool to `digest` (under lock_pin): (the pin, created)."""
    created = row is None or row.digest is None
    if row is None:
        row = await pins_repo.new_pin(session, server, tool)
    before = audited(row)
    if definition is None:
        definition = (row.seen_definition if row.seen_digest == digest
                      else row.definition if row.digest == digest else None)
    if row.digest == digest and row.definition == definition and row.seen_digest is None:
        return row, False
    row.digest, row.definition = digest, definition
    row.pinned_by = caller.key_id or "admin"
    if row.seen_digest == digest:
        row.seen_digest = row.seen_definition = row.seen_at = None
    await pins_repo.save(session, row)
    if audited(row) != before:
        await audit_change(session, caller, resource="gateway_pin", name=_name(server, tool),
                           operation="create" if before is None else "update",
                           before=before, after=audited(row))
    return row, created


async def delete_pin(session: AsyncSession, caller: Caller, row: GatewayPin) -> None:
    before = audited(row)
    await pins_repo.delete_pin(session, row)
    if before is not None:
        await audit_change(session, caller, resource="gateway_pin",
                           name=_name(row.server, row.tool), operation="delete",
                           before=before, after=None)


async def refuse_call(decision_log: Any, caller: Caller, *, server: str, tool: str,
                      pinned: str | None, seen: str, plan_id: str, project: str | None,
                      action_id: str | None, args: dict[str, Any]) -> dict[str, Any]:
    """The recorded deny of a call of SERVER.TOOL whose definition is not the pinned one."""
    name = _name(server, tool)
    if pinned is None:
        message = (f"Tool '{name}' has not been approved: an admin must pin its definition "
                   f"(seen {seen[:12]}) before it can be called")
    else:
        message = (f"Tool '{name}' changed since it was pinned (pinned {pinned[:12]}, seen "
                   f"{seen[:12]}): an admin must accept the new definition")
    refusal = deny("tool_not_activated", message, tool=name,
                   pin={"pinned": pinned, "seen": seen})
    decision_id = new_decision_id()
    await record_decisions(decision_log, [new_record(
        "authorize", decision_id, allowed=False, code=refusal.code, error=refusal.error,
        check=refusal.check, tool=name, plan_id=plan_id, project=project,
        action_id=action_id, request_id=caller.request_id, key_id=caller.key_id,
        detail={"source": "gateway_pin", "args_keys": sorted(args)[:100],
                "pin": {"pinned": pinned, "seen": seen}},
    )])
    return {"decision_id": decision_id, "allowed": False, "deny": refusal.as_dict(),
            "plan_id": plan_id, "profile": None, "checks": None}
