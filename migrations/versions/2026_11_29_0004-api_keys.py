"""api keys

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 18:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import app.store.base

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

# A new table only: the code of 0003 never reads it.
backward_compatible = True


def upgrade() -> None:
    op.create_table('api_keys',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('projects', sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), 'postgresql'),
        nullable=True),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('created_at', app.store.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=64), nullable=True),
    sa.Column('expires_at', app.store.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', app.store.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('revoked_by', sa.String(length=64), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )


def downgrade() -> None:
    op.drop_table('api_keys')
