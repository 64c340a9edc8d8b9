"""core tables

Revision ID: 0001
Revises: 
Create Date: 2026-11-29 14:41:11.360132
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import app.store.base

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None

# The first schema: there is no release before it.
backward_compatible = False


def upgrade() -> None:
    
    op.create_table('actions',
    sa.Column('action_id', sa.String(length=200), nullable=False),
    sa.Column('project', sa.String(length=200), nullable=True),
    sa.Column('read_only', sa.Boolean(), nullable=False),
    sa.Column('automation_profile', sa.String(length=64), nullable=True),
    sa.Column('safety_profile', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('action_id', name=op.f('pk_actions'))
    )
    with op.batch_alter_table('actions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_actions_automation_profile'), ['automation_profile'], unique=False)
        batch_op.create_index(batch_op.f('ix_actions_project'), ['project'], unique=False)

    op.create_table('global_config',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('automation_profile', sa.String(length=64), nullable=True),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_global_config'))
    )
    op.create_table('profile_versions',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('safety', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', 'version', name=op.f('pk_profile_versions'))
    )
    op.create_table('profiles',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('safety', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_profiles'))
    )
    op.create_table('projects',
    sa.Column('project', sa.String(length=200), nullable=False),
    sa.Column('automation_profile', sa.String(length=64), nullable=True),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('project', name=op.f('pk_projects'))
    )
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_projects_automation_profile'), ['automation_profile'], unique=False)

    op.create_table('plans',
    sa.Column('plan_id', sa.String(length=200), nullable=False),
    sa.Column('action_id', sa.String(length=200), nullable=False),
    sa.Column('project', sa.String(length=200), nullable=True),
    sa.Column('read_only', sa.Boolean(), nullable=False),
    sa.Column('safety', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('provenance', sa.String(length=16), nullable=False),
    sa.Column('profile_name', sa.String(length=64), nullable=True),
    sa.Column('profile_version', sa.Integer(), nullable=True),
    sa.Column('is_default', sa.Boolean(), nullable=False),
    sa.Column('request', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('state', sa.String(length=32), nullable=False),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['action_id'], ['actions.action_id'], name=op.f('fk_plans_action_id_actions')),
    sa.PrimaryKeyConstraint('plan_id', name=op.f('pk_plans'))
    )
    with op.batch_alter_table('plans', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_plans_action_id'), ['action_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_plans_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_plans_project'), ['project'], unique=False)




def downgrade() -> None:
    
    with op.batch_alter_table('plans', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_plans_project'))
        batch_op.drop_index(batch_op.f('ix_plans_created_at'))
        batch_op.drop_index(batch_op.f('ix_plans_action_id'))

    op.drop_table('plans')
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_projects_automation_profile'))

    op.drop_table('projects')
    op.drop_table('profiles')
    op.drop_table('profile_versions')
    op.drop_table('global_config')
    with op.batch_alter_table('actions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_actions_project'))
        batch_op.drop_index(batch_op.f('ix_actions_automation_profile'))

    op.drop_table('actions')

