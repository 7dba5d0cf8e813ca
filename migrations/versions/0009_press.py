"""press: players' messages to each other through the server (issue 18.1); the
game master's press settings of a game (games.press_mode, games.press_anonymous)

Revision ID: 0009
Revises: 0006
Create Date: 2026-11-24 10:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.add_column(sa.Column('press_mode', sa.String(length=16), nullable=False, server_default='on'))
        batch_op.add_column(sa.Column('press_anonymous', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table('press',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('sender', sa.String(length=32), nullable=False),
    sa.Column('recipients', sa.JSON(), nullable=False),
    sa.Column('recipient_count', sa.Integer(), nullable=False),
    sa.Column('to_all', sa.Boolean(), nullable=False),
    sa.Column('anonymous', sa.Boolean(), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('sent_at', sa.DateTime(), nullable=False),
    sa.Column('inbound_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['inbound_id'], ['inbox.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_press_game_id', 'press', ['game_id', 'id'], unique=False)
    op.create_index('ix_press_sender_sent', 'press', ['sender', 'sent_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_press_sender_sent', table_name='press')
    op.drop_index('ix_press_game_id', table_name='press')
    op.drop_table('press')
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.drop_column('press_anonymous')
        batch_op.drop_column('press_mode')
