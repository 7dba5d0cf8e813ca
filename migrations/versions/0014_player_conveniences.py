"""player conveniences (issue 28): the text the GM sets for `info GAME`
(games.info), a server-side seat limit (games.seats) and the waiting list
of a full game (waiting_list)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 10:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.add_column(sa.Column('info', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('seats', sa.Integer(), nullable=True))
    op.create_table('waiting_list',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.Column('line', sa.Text(), nullable=False),
    sa.Column('since', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('game_id', 'account_id', name='uq_waiting_game_account')
    )


def downgrade() -> None:
    op.drop_table('waiting_list')
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.drop_column('seats')
        batch_op.drop_column('info')
