"""hostile senders: password-check throttling, outbox claims

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 14:50:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('auth_throttle',
    sa.Column('key', sa.String(length=400), nullable=False),
    sa.Column('failures', sa.Integer(), nullable=False, server_default='0'),
    sa.Column('window_start', sa.DateTime(), nullable=False),
    sa.Column('blocked_until', sa.DateTime(), nullable=True),
    sa.Column('level', sa.Integer(), nullable=False, server_default='0'),
    sa.Column('notified', sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_by', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('claimed_until', sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_column('claimed_until')
        batch_op.drop_column('claimed_by')
    op.drop_table('auth_throttle')
