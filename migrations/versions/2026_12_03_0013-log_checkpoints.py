"""log_checkpoints: the signed checkpoints of the decision log's head (SPEC §16)

A new table only. Each checkpoint is also a record of kind `checkpoint` in the chain; this
table keeps them past a prune (which deletes the records) and lists them without scanning
the log. Releases before this one neither read nor write it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 13:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.store.base import UTCDateTime

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: a new table

BIGINT = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table(
        'log_checkpoints',
        sa.Column('seq', BIGINT, autoincrement=False, nullable=False),
        sa.Column('head_hash', sa.String(length=64), nullable=False),
        sa.Column('origin', sa.String(length=200), nullable=False),
        sa.Column('time', UTCDateTime(), nullable=False),
        sa.Column('verifier_key', sa.String(length=400), nullable=False),
        sa.Column('record_seq', BIGINT, nullable=False),
        sa.Column('note', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('seq', name=op.f('pk_log_checkpoints')),
    )


def downgrade() -> None:
    op.drop_table('log_checkpoints')
