"""lean decision log indexes

Every index costs each logged decision its insert: on Postgres ~2-3 µs of CPU per index
and record (docs/performance.md). Three of them did little for that price:
- created_at: the log is appended in time order, so on Postgres a BRIN index (a few pages
  for millions of rows) finds a time range about as well as the btree did, once its page
  ranges are summarised: autosummarize queues that for autovacuum as each range fills;
- (code, seq): only denies have a code, so the index now leaves allowed decisions out;
- (kind, seq): nearly every record is an authorize decision, which a kind filter never
  needs an index for; on Postgres the index now holds only the other kinds (config
  changes, screens, plans, resolves), which is what `kind=` queries look up.
SQLite keeps btrees for created_at and kind (its planner cannot use the Postgres forms).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 07:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

# Indexes only: the code of 0004 finds the same rows (some queries more slowly).
backward_compatible = True

CODE_PRESENT = sa.text("code IS NOT NULL")
NOT_AUTHORIZE = sa.text("kind <> 'authorize'")


def upgrade() -> None:
    op.drop_index('ix_decision_log_created_at', table_name='decision_log')
    op.create_index('ix_decision_log_created_at', 'decision_log', ['created_at'],
                    postgresql_using='brin', postgresql_with={'autosummarize': 'on'})
    op.drop_index('ix_decision_log_code_seq', table_name='decision_log')
    op.create_index('ix_decision_log_code_seq', 'decision_log', ['code', 'seq'],
                    postgresql_where=CODE_PRESENT, sqlite_where=CODE_PRESENT)
    op.drop_index('ix_decision_log_kind_seq', table_name='decision_log')
    op.create_index('ix_decision_log_kind_seq', 'decision_log', ['kind', 'seq'],
                    postgresql_where=NOT_AUTHORIZE)


def downgrade() -> None:
    for name, columns in (('ix_decision_log_created_at', ['created_at']),
                          ('ix_decision_log_code_seq', ['code', 'seq']),
                          ('ix_decision_log_kind_seq', ['kind', 'seq'])):
        op.drop_index(name, table_name='decision_log')
        op.create_index(name, 'decision_log', columns)
