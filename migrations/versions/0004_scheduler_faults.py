"""scheduler faults: a failing tick, reminder or turn of one game, told to the GM once

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 15:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('scheduler_faults',
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('step', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('since', sa.DateTime(), nullable=False),
    sa.Column('told_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('game_id', 'step')
    )


def downgrade() -> None:
    op.drop_table('scheduler_faults')
