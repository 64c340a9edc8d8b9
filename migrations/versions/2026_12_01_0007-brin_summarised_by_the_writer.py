"""the created_at BRIN index is summarised by the log writer, not queued for autovacuum

Migration 0005 gave the Postgres BRIN index on created_at `autosummarize = on`: each time a
range of 128 pages fills, the inserting backend asks autovacuum to summarise it. Those
requests wait in a queue of 256 that autovacuum serves when it next visits the database
(every autovacuum_naptime, a minute by default); the log fills a range every ~0.1 s under
load, so the queue overflows (at once with autovacuum off, and with it on whenever ranges
fill faster than 256 a visit), and Postgres logs every request it drops: a LOG line with
the whole INSERT, 7-11 a second at 12,000-15,000 decisions/s (measured, autovacuum off).
The writer now summarises new ranges itself (app/log/writer.py, Summariser). SQLite
has no BRIN index: nothing changes there. The ALTER takes a brief exclusive lock on the
index (inserts wait for it, not for a rebuild).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 16:20:00.000000
"""

from __future__ import annotations

from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

# An index setting only: the code of 0006 serves as before (it does not summarise
# the BRIN index; docs/decision-log.md).
backward_compatible = True


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if _postgres():
        op.execute("ALTER INDEX ix_decision_log_created_at SET (autosummarize = off)")


def downgrade() -> None:
    if _postgres():
        op.execute("ALTER INDEX ix_decision_log_created_at SET (autosummarize = on)")
