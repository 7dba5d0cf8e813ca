"""A game's state document in a table of its own (issue 45): in the games
row it made every change of the row (an order mail bumps the game's
version) rewrite the whole document on SQLite, a megabyte for a
10,000-player giveaway, and every read of a column stored after it walk
through it.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02 18:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('game_documents',
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('state', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('game_id')
    )
    op.execute("INSERT INTO game_documents (game_id, state) SELECT id, state FROM games")
    op.drop_column('games', 'state')


def downgrade() -> None:
    op.add_column('games', sa.Column('state', sa.JSON(), nullable=True))
    op.execute("UPDATE games SET state = (SELECT d.state FROM game_documents d WHERE d.game_id = games.id)")
    op.drop_table('game_documents')
