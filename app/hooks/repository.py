"""The one read the hooks need of the decision log: the decision made for a tool_use_id.

Claude Code sends `tool_use_id` with PreToolUse and again with PostToolUse; the PreToolUse
decision carries it in its recorded `context.metadata` (app/hooks/claude.py). The log is
searched newest first within the session's plan (the plan_id index), so the match, which
is nearly always among the plan's last few records, ends the scan: no table of its own, and
every replica finds what any replica decided.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.log.tables import LogRecord


@dataclass(frozen=True, slots=True)
class Decided:
    decision_id: str
    allowed: bool
    code: str | None


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def decision_for(session: AsyncSession, *, plan_id: str, tool_use_id: str,
                       tool: str) -> Decided | None:
    """The newest authorize decision of `plan_id` recorded for this tool call, or None.
    The text match only narrows the scan; the parsed metadata must say the same."""
    # The detail is canonical JSON (RFC 8785: no spaces), so the pair appears exactly so.
    needle = _like(orjson.dumps({"tool_use_id": tool_use_id}).decode()[1:-1])
    rows = await session.execute(
        select(LogRecord.decision_id, LogRecord.allowed, LogRecord.code, LogRecord.detail)
        .where(LogRecord.plan_id == plan_id, LogRecord.kind == "authorize",
               LogRecord.tool == tool, LogRecord.detail.like(f"%{needle}%", escape="\\"))
        .order_by(LogRecord.seq.desc()).limit(8))
    for decision_id, allowed, code, detail in rows:
        metadata = ((orjson.loads(detail).get("context") or {}).get("metadata") or {})
        if metadata.get("tool_use_id") == tool_use_id:
            return Decided(decision_id, bool(allowed), code)
    return None
