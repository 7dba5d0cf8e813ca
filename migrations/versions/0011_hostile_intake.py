"""hostile intake (issue 26): inbox.tries, how many times the handling of a
mail was started; a mail whose handling was started twice without finishing
(its process was killed) is set aside instead of being taken a third time

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 10:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tries', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.drop_column('tries')
