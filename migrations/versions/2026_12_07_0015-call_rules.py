"""call rules (SPEC §18), and the registry's shell and URL arguments

A new `rules` table, and two nullable columns of `tools`: `shell_arg` (the argument that
holds a shell tool's command line, `"shell": {"arg": ...}`) and `url_args` (the arguments
whose values are URLs). Replicas of the previous release neither read nor evaluate rules:
upgrade every replica before relying on them.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07 16:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.store.base import Json, UTCDateTime

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: a new table, nullable columns


def upgrade() -> None:
    op.create_table(
        'rules',
        sa.Column('rule_id', sa.String(length=200), nullable=False),
        sa.Column('project', sa.String(length=200), nullable=True),
        sa.Column('body', Json, nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('created_at', UTCDateTime(), nullable=False),
        sa.Column('updated_at', UTCDateTime(), nullable=False),
        sa.Column('deleted_at', UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint('rule_id', name=op.f('pk_rules')),
    )
    op.create_index('ix_rules_project', 'rules', ['project'], unique=False)
    op.add_column('tools', sa.Column('shell_arg', sa.String(length=200), nullable=True))
    op.add_column('tools', sa.Column('url_args', Json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tools') as batch:
        batch.drop_column('url_args')
        batch.drop_column('shell_arg')
    op.drop_index('ix_rules_project', table_name='rules')
    op.drop_table('rules')
