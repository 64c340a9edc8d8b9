"""outcomes and the ledger (SPEC §11)

New tables only. Replicas of the previous release neither take holds nor count outcomes:
upgrade every replica before relying on cost limits across replicas.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 11:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.store.base import Json, UTCDateTime

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: new tables

HELD = sa.text("state = 'held'")


def upgrade() -> None:
    op.create_table(
        'ledger_plans',
        sa.Column('plan_id', sa.String(length=200), nullable=False),
        sa.Column('project', sa.String(length=200), nullable=True),
        sa.Column('spent', sa.Float(), nullable=False),
        sa.Column('held', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('plan_id', name=op.f('pk_ledger_plans')),
    )
    op.create_table(
        'ledger_projects',
        sa.Column('project', sa.String(length=200), nullable=False),
        sa.Column('spent', sa.Float(), nullable=False),
        sa.Column('held', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('project', name=op.f('pk_ledger_projects')),
    )
    op.create_table(
        'ledger_steps',
        sa.Column('plan_id', sa.String(length=200), nullable=False),
        sa.Column('step_id', sa.String(length=200), nullable=False),
        sa.Column('failures', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('plan_id', 'step_id', name=op.f('pk_ledger_steps')),
    )
    op.create_table(
        'ledger_holds',
        sa.Column('decision_id', sa.String(length=36), nullable=False),
        sa.Column('plan_id', sa.String(length=200), nullable=False),
        sa.Column('project', sa.String(length=200), nullable=True),
        sa.Column('amount', sa.Float(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('expires_at', UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint('decision_id', name=op.f('pk_ledger_holds')),
    )
    op.create_index('ix_ledger_holds_held_expires_at', 'ledger_holds', ['expires_at'],
                    postgresql_where=HELD, sqlite_where=HELD)
    op.create_table(
        'outcomes',
        sa.Column('decision_id', sa.String(length=36), nullable=False),
        sa.Column('project', sa.String(length=200), nullable=True),
        sa.Column('plan_id', sa.String(length=200), nullable=True),
        sa.Column('step_id', sa.String(length=200), nullable=True),
        sa.Column('tool', sa.String(length=200), nullable=True),
        sa.Column('key_id', sa.String(length=64), nullable=True),
        sa.Column('status', sa.String(length=32), nullable=False),
        sa.Column('cost', sa.Float(), nullable=False),
        sa.Column('verified', sa.Boolean(), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('args_sha256', sa.String(length=64), nullable=True),
        sa.Column('artifacts', Json, nullable=True),
        sa.Column('error_class', sa.String(length=64), nullable=True),
        sa.Column('unverified', sa.Boolean(), nullable=False),
        sa.Column('args_mismatch', sa.Boolean(), nullable=False),
        sa.Column('reported_at', UTCDateTime, nullable=False),
        sa.Column('body_sha256', sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint('decision_id', name=op.f('pk_outcomes')),
    )
    op.create_index('ix_outcomes_plan_id', 'outcomes', ['plan_id'])


def downgrade() -> None:
    op.drop_index('ix_outcomes_plan_id', table_name='outcomes')
    op.drop_table('outcomes')
    op.drop_index('ix_ledger_holds_held_expires_at', table_name='ledger_holds')
    op.drop_table('ledger_holds')
    op.drop_table('ledger_steps')
    op.drop_table('ledger_projects')
    op.drop_table('ledger_plans')
