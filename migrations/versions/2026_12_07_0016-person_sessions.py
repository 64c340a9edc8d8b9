"""person sessions (SPEC §21): people signed in to the page with OpenID Connect

A new `person_sessions` table: a signed-in person's session, or a sign-in under way (its
state, nonce and PKCE verifier), by the hash of its cookie. Replicas of the previous release
do not read it: their page takes API keys only.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07 16:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.store.base import Json, UTCDateTime

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: a new table


def upgrade() -> None:
    op.create_table(
        'person_sessions',
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=8), nullable=False),
        sa.Column('data', Json, nullable=False),
        sa.Column('created_at', UTCDateTime(), nullable=False),
        sa.Column('expires_at', UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('token_hash', name=op.f('pk_person_sessions')),
    )
    op.create_index(op.f('ix_person_sessions_expires_at'), 'person_sessions',
                    ['expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_person_sessions_expires_at'), table_name='person_sessions')
    op.drop_table('person_sessions')
