"""registry: tools, skills, project registry settings, registry version

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 14:45:00.987872
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import app.store.base

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

# New tables only: the code of 0001 never reads them.
backward_compatible = True

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    op.create_table('project_registry_settings',
    sa.Column('project', sa.String(length=200), nullable=False),
    sa.Column('deny_unregistered_tools', sa.Boolean(), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('project', name=op.f('pk_project_registry_settings'))
    )
    registry_state = op.create_table('registry_state',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_registry_state'))
    )
    # The single row every registry change bumps; present from the start so a bump is an UPDATE.
    op.bulk_insert(registry_state, [{'id': 1, 'version': 0}])
    op.create_table('skills',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('category', sa.String(length=200), nullable=True),
    sa.Column('unsafe_phrases', JSON, nullable=False),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_skills'))
    )
    op.create_table('tools',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('writes', sa.Boolean(), nullable=False),
    sa.Column('read_only', sa.Boolean(), nullable=False),
    sa.Column('checkpointable', sa.Boolean(), nullable=False),
    sa.Column('unsafe', sa.Boolean(), nullable=False),
    sa.Column('safety_category', sa.String(length=16), nullable=False),
    sa.Column('skill_category', sa.String(length=200), nullable=True),
    sa.Column('path_args', JSON, nullable=False),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_tools'))
    )


def downgrade() -> None:
    op.drop_table('tools')
    op.drop_table('skills')
    op.drop_table('registry_state')
    op.drop_table('project_registry_settings')
