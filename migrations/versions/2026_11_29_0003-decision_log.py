"""decision log

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 14:45:39.471890
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

import app.store.base

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

# New tables only: the code of 0002 never reads them.
backward_compatible = True


def upgrade() -> None:
    op.create_table('chain_head',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.Column('pruned_seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('pruned_hash', sa.String(length=64), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chain_head'))
    )
    op.create_table('decision_log',
    sa.Column('seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=False, nullable=False),
    sa.Column('decision_id', sa.String(length=36), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('project', sa.String(length=200), nullable=True),
    sa.Column('plan_id', sa.String(length=200), nullable=True),
    sa.Column('action_id', sa.String(length=200), nullable=True),
    sa.Column('tool', sa.String(length=200), nullable=True),
    sa.Column('allowed', sa.Boolean(), nullable=True),
    sa.Column('code', sa.String(length=64), nullable=True),
    sa.Column('error', sa.String(length=64), nullable=True),
    sa.Column('check', sa.String(length=32), nullable=True),
    sa.Column('provenance', sa.String(length=16), nullable=True),
    sa.Column('profile_name', sa.String(length=64), nullable=True),
    sa.Column('profile_version', sa.Integer(), nullable=True),
    sa.Column('latency_ms', sa.Float(), nullable=True),
    sa.Column('request_id', sa.String(length=200), nullable=True),
    sa.Column('key_id', sa.String(length=64), nullable=True),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('prev_hash', sa.String(length=64), nullable=False),
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint('seq', name=op.f('pk_decision_log')),
    sa.UniqueConstraint('decision_id', name=op.f('uq_decision_log_decision_id'))
    )
    with op.batch_alter_table('decision_log', schema=None) as batch_op:
        batch_op.create_index('ix_decision_log_action_id_seq', ['action_id', 'seq'], unique=False)
        batch_op.create_index('ix_decision_log_code_seq', ['code', 'seq'], unique=False)
        batch_op.create_index('ix_decision_log_created_at', ['created_at'], unique=False)
        batch_op.create_index('ix_decision_log_kind_seq', ['kind', 'seq'], unique=False)
        batch_op.create_index('ix_decision_log_plan_id_seq', ['plan_id', 'seq'], unique=False)
        batch_op.create_index('ix_decision_log_project_seq', ['project', 'seq'], unique=False)
        batch_op.create_index('ix_decision_log_tool_seq', ['tool', 'seq'], unique=False)

    # The chain starts at GENESIS; every writer locks this one row to extend it.
    genesis = "0" * 64
    chain_head = sa.table(
        "chain_head", sa.column("id"), sa.column("seq"), sa.column("hash"),
        sa.column("pruned_seq"), sa.column("pruned_hash"),
        sa.column("updated_at", app.store.base.UTCDateTime(timezone=True)),
    )
    op.bulk_insert(chain_head, [{
        "id": 1, "seq": 0, "hash": genesis, "pruned_seq": 0, "pruned_hash": genesis,
        "updated_at": datetime.now(UTC),
    }])


def downgrade() -> None:
    with op.batch_alter_table('decision_log', schema=None) as batch_op:
        batch_op.drop_index('ix_decision_log_tool_seq')
        batch_op.drop_index('ix_decision_log_project_seq')
        batch_op.drop_index('ix_decision_log_plan_id_seq')
        batch_op.drop_index('ix_decision_log_kind_seq')
        batch_op.drop_index('ix_decision_log_created_at')
        batch_op.drop_index('ix_decision_log_code_seq')
        batch_op.drop_index('ix_decision_log_action_id_seq')

    op.drop_table('decision_log')
    op.drop_table('chain_head')

