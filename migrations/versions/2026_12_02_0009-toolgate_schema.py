"""toolgate_schema: which releases may serve the schema (rolling upgrades)

One row holding the oldest schema revision whose code may serve the schema as it is now.
Every migration run rewrites it (migrations/env.py, from each migration's
`backward_compatible`), so a release older than the schema, which cannot read the newer
migration files, can still tell whether it may serve (app/store/migrate.py).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 01:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

# A new table that code before it never reads. (Releases before this one refuse any schema
# ahead of their own head, whatever it holds: the window opens from here on.)
backward_compatible = True


def upgrade() -> None:
    table = op.create_table('toolgate_schema',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('oldest_revision', sa.String(length=32), nullable=False),
    sa.CheckConstraint('id = 1', name=op.f('ck_toolgate_schema_one_row')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_toolgate_schema'))
    )
    # migrations/env.py sets the real value once this revision is applied.
    op.bulk_insert(table, [{'id': 1, 'oldest_revision': revision}])


def downgrade() -> None:
    op.drop_table('toolgate_schema')
