"""approvals held by the service and webhooks with their outbox (SPEC §10)

New tables only. Replicas of the previous release neither read nor write them, and decide
check 6 on `metadata.human_approved` as before, whatever a project's approval_mode says:
upgrade every replica before setting a project to `approval_mode: server`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 03:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.store.base import Json, UTCDateTime

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: new tables

BIGINT = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
PENDING = sa.text("state = 'pending'")
LIVE = sa.text("state IN ('pending', 'granted')")


def upgrade() -> None:
    op.create_table(
        'approvals',
        sa.Column('approval_id', sa.String(length=36), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('project', sa.String(length=200), nullable=True),
        sa.Column('plan_id', sa.String(length=200), nullable=False),
        sa.Column('action_id', sa.String(length=200), nullable=True),
        sa.Column('tool', sa.String(length=200), nullable=False),
        sa.Column('request', Json, nullable=False),
        sa.Column('request_sha256', sa.String(length=64), nullable=False),
        sa.Column('args_sha256', sa.String(length=64), nullable=True),
        sa.Column('requested_by', sa.String(length=64), nullable=True),
        sa.Column('requested_principal', sa.String(length=200), nullable=True),
        sa.Column('requested_at', UTCDateTime, nullable=False),
        sa.Column('decided_by', sa.String(length=64), nullable=True),
        sa.Column('decided_at', UTCDateTime, nullable=True),
        sa.Column('note', sa.Text(), nullable=True),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('expires_at', UTCDateTime, nullable=False),
        sa.Column('uses_left', sa.Integer(), nullable=False),
        sa.Column('decision_ids', Json, nullable=False),
        sa.PrimaryKeyConstraint('approval_id', name=op.f('pk_approvals')),
    )
    op.create_index('uq_approvals_pending_binding', 'approvals', ['plan_id', 'request_sha256'],
                    unique=True, postgresql_where=PENDING, sqlite_where=PENDING)
    op.create_index('ix_approvals_binding', 'approvals', ['plan_id', 'request_sha256', 'state'])
    op.create_index('ix_approvals_project_id', 'approvals', ['project', 'approval_id'])
    op.create_index('ix_approvals_state_id', 'approvals', ['state', 'approval_id'])
    op.create_index('ix_approvals_live_expires_at', 'approvals', ['expires_at'],
                    postgresql_where=LIVE, sqlite_where=LIVE)
    op.create_table(
        'webhooks',
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('url', sa.String(length=2000), nullable=False),
        sa.Column('events', Json, nullable=False),
        sa.Column('projects', Json, nullable=True),
        sa.Column('secret', sa.String(length=500), nullable=False),
        sa.Column('created_at', UTCDateTime, nullable=False),
        sa.Column('updated_at', UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_webhooks')),
    )
    op.create_table(
        'webhook_deliveries',
        sa.Column('id', BIGINT, autoincrement=True, nullable=False),
        sa.Column('webhook', sa.String(length=64), nullable=False),
        sa.Column('event_id', sa.String(length=36), nullable=False),
        sa.Column('event', sa.String(length=32), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('next_attempt_at', UTCDateTime, nullable=False),
        sa.Column('last_status', sa.Integer(), nullable=True),
        sa.Column('last_error', sa.String(length=200), nullable=True),
        sa.Column('history', Json, nullable=False),
        sa.Column('created_at', UTCDateTime, nullable=False),
        sa.Column('delivered_at', UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries')),
        sa.UniqueConstraint('webhook', 'event_id', name='uq_webhook_deliveries_event'),
    )
    op.create_index('ix_webhook_deliveries_webhook_id', 'webhook_deliveries', ['webhook', 'id'])
    op.create_index('ix_webhook_deliveries_due', 'webhook_deliveries', ['next_attempt_at'],
                    postgresql_where=sa.text("state = 'pending'"),
                    sqlite_where=sa.text("state = 'pending'"))
    op.create_table(
        'webhook_cursor',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('seq', BIGINT, nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_cursor')),
    )


def downgrade() -> None:
    op.drop_table('webhook_cursor')
    op.drop_index('ix_webhook_deliveries_due', table_name='webhook_deliveries')
    op.drop_index('ix_webhook_deliveries_webhook_id', table_name='webhook_deliveries')
    op.drop_table('webhook_deliveries')
    op.drop_table('webhooks')
    for name in ('ix_approvals_live_expires_at', 'ix_approvals_state_id',
                 'ix_approvals_project_id', 'ix_approvals_binding',
                 'uq_approvals_pending_binding'):
        op.drop_index(name, table_name='approvals')
    op.drop_table('approvals')
