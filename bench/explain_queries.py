"""Query plans of the decision-log queries on a large Postgres log (docs/decision-log.md).

    python bench/explain_queries.py \
        --url postgresql://postgres@127.0.0.1:5432/toolgate_explain [--fill 1000000]

--fill N inserts N synthetic records first (30 days, 50 projects, 200 tools, 25% denied).
The SQL is compiled from the same SQLAlchemy queries the API runs.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
from sqlalchemy import select
from sqlalchemy.dialects import postgresql

from app.decisions import queries
from app.decisions.queries import Filters
from app.log.tables import LogRecord

FILL = """
INSERT INTO decision_log (seq, decision_id, kind, created_at, project, plan_id, action_id, tool,
  allowed, code, error, "check", provenance, latency_ms, detail, prev_hash, hash)
SELECT g, md5(g::text)::uuid::text, 'authorize',
  now() - interval '30 days' + (g * (interval '30 days' / $1)),
  'project-' || (g % 50), 'plan-' || (g % 20000), 'action-' || (g % 500), 'tool-' || (g % 200),
  (g % 4) <> 0,
  CASE WHEN g % 4 = 0 THEN (ARRAY['read_only', 'sandbox_required', 'unsafe_tool',
    'retry_limit_exceeded'])[1 + (g/4) % 4] END,
  CASE WHEN g % 4 = 0 THEN 'ToolSandboxRequiredError' END, CASE WHEN g % 4 = 0 THEN 'sandbox' END,
  'project', 0.05, '{}', repeat('0', 64), repeat('0', 64)
FROM generate_series(1, $1::int) g
"""


def _sql(query) -> str:  # type: ignore[no-untyped-def]
    return str(query.compile(dialect=postgresql.dialect(),
                             compile_kwargs={"literal_binds": True}))


def _cases() -> list[tuple[str, object]]:
    now = datetime.now(UTC)
    day = Filters(since=now - timedelta(days=1), until=now)
    page = select(LogRecord).order_by(LogRecord.seq.desc()).limit(101)
    count, allowed = queries._counts()
    return [
        ("newest page, no filter", Filters().apply(page)),
        ("newest page of one project", Filters(project="project-7").apply(page)),
        ("newest page of one plan", Filters(plan_id="plan-1234").apply(page)),
        ("denied with one code", Filters(code="unsafe_tool").apply(page)),
        ("one tool, last day", Filters(tool="tool-42", since=day.since, until=day.until)
         .apply(page)),
        ("next page (cursor)", Filters(project="project-7").apply(page)
         .where(LogRecord.seq < 500000)),
        ("one decision by id", select(LogRecord).where(
            LogRecord.decision_id == "c4ca4238-a0b9-2382-0dcc-509a6f75849b")),
        ("stats by code, last day", day.apply(
            select(LogRecord.code, count, allowed)).where(LogRecord.allowed.is_not(None))
         .group_by(LogRecord.code)),
        ("export chunk", select(LogRecord).where(LogRecord.seq > 400000,
                                                 LogRecord.seq <= 900000)
         .order_by(LogRecord.seq).limit(1000)),
    ]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--fill", type=int, default=0)
    args = parser.parse_args()
    conn = await asyncpg.connect(args.url)
    try:
        if args.fill:
            await conn.execute(FILL, args.fill)
            # What autovacuum does for a log that grows steadily: the BRIN index on
            # created_at (autosummarize) covers the new page ranges, statistics are fresh.
            await conn.execute("SELECT brin_summarize_new_values('ix_decision_log_created_at')")
            await conn.execute("ANALYZE decision_log")
        total = await conn.fetchval("SELECT count(*) FROM decision_log")
        print(f"decision_log rows: {total}\n")
        for name, query in _cases():
            rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + _sql(query))
            plan = [r[0] for r in rows]
            print(f"### {name}\n```")
            print("\n".join(line for line in plan if not line.strip().startswith("Buffers")))
            print("```\n")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
