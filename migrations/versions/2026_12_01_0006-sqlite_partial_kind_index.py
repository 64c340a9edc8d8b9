"""the (kind, seq) index leaves authorize decisions out on SQLite too

Migration 0005 made the `kind` index partial on Postgres only, because SQLite's planner
does not prove that `kind = 'config'` implies `kind <> 'authorize'`. It does use a partial
index when the query carries the index's own condition, so a `kind=` filter on a rare kind
now adds it (app/decisions/queries.py), and the SQLite index drops the authorize decisions,
nearly every record. That index was 3-4 of the ~34 pages a 32-record commit writes to the
WAL: the SQLite writer's CPU per record fell from 28.7-29.1 to 24.5-25.5 µs in process
(docs/performance.md). Postgres is unchanged.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 15:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

# An index only (SQLite): the code of 0005 finds the same rows.
backward_compatible = True

NOT_AUTHORIZE = sa.text("kind <> 'authorize'")


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    if _sqlite():
        op.drop_index('ix_decision_log_kind_seq', table_name='decision_log')
        op.create_index('ix_decision_log_kind_seq', 'decision_log', ['kind', 'seq'],
                        sqlite_where=NOT_AUTHORIZE)


def downgrade() -> None:
    if _sqlite():
        op.drop_index('ix_decision_log_kind_seq', table_name='decision_log')
        op.create_index('ix_decision_log_kind_seq', 'decision_log', ['kind', 'seq'])
