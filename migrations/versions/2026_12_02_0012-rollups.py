"""hourly counts of decisions for /v1/decisions/stats (the operators' page, SPEC §13)

New tables only, filled on demand by the release that reads them (app/decisions/rollups.py):
the previous release neither reads nor writes them. Pruning (`toolgate audit prune`) drops
the counts of the hours it touches.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 11:15:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.store.base import UTCDateTime

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: new tables

BIGINT = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table(
        'decision_rollup',
        sa.Column('hour', UTCDateTime(), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('project', sa.String(length=200), nullable=False),
        sa.Column('tool', sa.String(length=200), nullable=False),
        sa.Column('allowed', sa.Boolean(), nullable=False),
        sa.Column('code', sa.String(length=64), nullable=False),
        sa.Column('error', sa.String(length=64), nullable=False),
        sa.Column('count', BIGINT, nullable=False),
        sa.PrimaryKeyConstraint('hour', 'kind', 'project', 'tool', 'allowed', 'code', 'error',
                                name=op.f('pk_decision_rollup')),
    )
    op.create_table(
        'decision_rolled_hour',
        sa.Column('hour', UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('hour', name=op.f('pk_decision_rolled_hour')),
    )


def downgrade() -> None:
    op.drop_table('decision_rolled_hour')
    op.drop_table('decision_rollup')
