"""a registry entry may require human approval for its tool (SPEC §17)

`tools.human_approval`: "required" (check 6 applies to the tool in every plan with a profile)
or "profile" (as the plan's profile says, the behaviour before). One new column with a
server default, so rows written by the previous release read "profile".

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 13:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None
backward_compatible = True  # expand only: a column the previous release never names


def upgrade() -> None:
    op.add_column('tools', sa.Column('human_approval', sa.String(length=16),
                                     server_default='profile', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('tools') as batch:
        batch.drop_column('human_approval')
