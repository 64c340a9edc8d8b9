"""Recording from request handlers: decisions through the group-commit writer, and
configuration changes, plans and resolutions inside the request's own transaction (so a
change and its audit record commit together or not at all)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from uuid_utils import uuid7

from app.edge.errors import Unavailable
from app.kit.caller import Caller
from app.log.decision_log import DecisionLog, RecordingFailed, append
from app.log.records import new_record


async def record_decisions(log: DecisionLog | None, records: list[dict[str, Any]]) -> None:
    """Returns once the records are durable; otherwise 503, never an answer (fail closed)."""
    if log is None:
        return
    try:
        await log.write(records)
    except RecordingFailed as failed:
        raise not_recorded(failed) from None


def not_recorded(failed: RecordingFailed) -> Unavailable:
    return Unavailable(f"the decision could not be recorded, so none is given: {failed}",
                       code="decision_not_recorded")


async def record_in_transaction(
    session: AsyncSession, caller: Caller, kind: str, **fields: Any
) -> str:
    decision_id = str(uuid7())
    await append(session, [new_record(
        kind, decision_id, request_id=caller.request_id, key_id=caller.key_id, **fields,
    )])
    return decision_id


async def audit_change(
    session: AsyncSession,
    caller: Caller,
    *,
    resource: str,
    name: str | None,
    operation: str,
    before: Any,
    after: Any,
    project: str | None = None,
) -> None:
    """A configuration change with before/after and who made it."""
    await record_in_transaction(
        session, caller, "config", project=project,
        detail={"resource": resource, "name": name, "operation": operation,
                "before": before, "after": after},
    )
