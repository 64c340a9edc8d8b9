"""the gateway's tool pins (SPEC §19 "Tool pinning")

A new table `gateway_pins`: per upstream server and tool, the digest (SHA-256 of the RFC 8785
form) of the pinned definition, and the other definition a gateway saw last. Replicas of
the previous release do not serve /v1/gateway/pins: upgrade every replica before pointing
gateways with pinning at it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 16:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.store.base import Json, UTCDateTime

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: a new table


def upgrade() -> None:
    op.create_table(
        'gateway_pins',
        sa.Column('server', sa.String(length=200), nullable=False),
        sa.Column('tool', sa.String(length=200), nullable=False),
        sa.Column('digest', sa.String(length=64), nullable=True),
        sa.Column('definition', Json, nullable=True),
        sa.Column('pinned_by', sa.String(length=200), nullable=True),
        sa.Column('seen_digest', sa.String(length=64), nullable=True),
        sa.Column('seen_definition', Json, nullable=True),
        sa.Column('seen_at', UTCDateTime(), nullable=True),
        sa.Column('created_at', UTCDateTime(), nullable=False),
        sa.Column('updated_at', UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('server', 'tool', name=op.f('pk_gateway_pins')),
    )


def downgrade() -> None:
    op.drop_table('gateway_pins')
