"""project settings (SPEC §9): approval_mode and shadow_profile beside deny_unregistered_tools;
API keys: stateless and principal

Project settings extend the table that already holds a project's `deny_unregistered_tools`
(one row per project, bumped into the registry version like before), rather than a new
table: replicas still running the previous release during a rolling upgrade (the schema is
migrated first) keep reading and writing it, and the server defaults fill the new columns
of the rows they insert.

Existing keys get `stateless = false` and `principal = NULL` (the key's own id). A non-admin
key that sent stateless authorize requests (no plan_id) is refused them from now on
(403 stateless_forbidden): re-create it with `"stateless": true`, or have its caller name
plans (docs/auth.md, "Stateless requests").

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 00:20:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None
# Expand only: new columns with server defaults, which the previous release's inserts fill.
backward_compatible = True


def upgrade() -> None:
    with op.batch_alter_table('project_registry_settings') as batch:
        batch.add_column(sa.Column('approval_mode', sa.String(length=16),
                                   server_default='client_flag', nullable=False))
        batch.add_column(sa.Column('shadow_profile', sa.String(length=64), nullable=True))
    with op.batch_alter_table('api_keys') as batch:
        batch.add_column(sa.Column('stateless', sa.Boolean(), server_default=sa.false(),
                                   nullable=False))
        batch.add_column(sa.Column('principal', sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('api_keys') as batch:
        batch.drop_column('principal')
        batch.drop_column('stateless')
    with op.batch_alter_table('project_registry_settings') as batch:
        batch.drop_column('shadow_profile')
        batch.drop_column('approval_mode')
