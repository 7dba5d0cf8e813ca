"""game master's desk: turn processing options, reminders, random stream, per-player reports

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 05:20:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.add_column(sa.Column('early', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('grace_minutes', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('remind_minutes', sa.Integer(), nullable=False, server_default='1440'))
        batch_op.add_column(sa.Column('reminded_for', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('early_version', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('rng_state', sa.JSON(), nullable=True))
    with op.batch_alter_table('snapshots', schema=None) as batch_op:
        batch_op.add_column(sa.Column('rng', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('reports', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('snapshots', schema=None) as batch_op:
        batch_op.drop_column('reports')
        batch_op.drop_column('rng')
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.drop_column('rng_state')
        batch_op.drop_column('early_version')
        batch_op.drop_column('reminded_for')
        batch_op.drop_column('remind_minutes')
        batch_op.drop_column('grace_minutes')
        batch_op.drop_column('early')
