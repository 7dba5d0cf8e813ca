"""the people problems (issue 44, items 1, 2 and 5): the reliability record
(turn_duties: one row per account per turn it owed orders, and whether it
sent them), the players standing by as substitutes (standby: account and
kind), the seats that need a new player (seat_offers: dropped, resigned,
offered, taken), and three game settings: drop_after, nmr (with
nmr_extended, the turn whose automatic extension was used up) and
min_reliability.

The games columns are added and dropped with plain ALTER TABLE on every
backend (no batch rebuild of games on SQLite: its DROP would cascade to the
memberships with foreign keys on; see 0017).

Revision ID: 0021
Revises: 0019
Create Date: 2026-12-02 14:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0021'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('games', sa.Column('drop_after', sa.Integer(), nullable=True))
    op.add_column('games', sa.Column('nmr', sa.String(length=16), nullable=False, server_default='run'))
    op.add_column('games', sa.Column('nmr_extended', sa.Integer(), nullable=True))
    op.add_column('games', sa.Column('min_reliability', sa.Integer(), nullable=True))
    op.create_table('turn_duties',
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.Column('sent', sa.Boolean(), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('game_id', 'turn', 'account_id')
    )
    op.create_index('ix_turn_duties_account_at', 'turn_duties', ['account_id', 'at'])
    op.create_table('standby',
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('since', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('account_id', 'kind')
    )
    op.create_table('seat_offers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('seat', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('since', sa.DateTime(), nullable=False),
    sa.Column('offered_at', sa.DateTime(), nullable=True),
    sa.Column('taken_by', sa.Integer(), nullable=True),
    sa.Column('taken_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['taken_by'], ['accounts.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_seat_offers_game_status', 'seat_offers', ['game_id', 'status'])


def downgrade() -> None:
    op.drop_index('ix_seat_offers_game_status', table_name='seat_offers')
    op.drop_table('seat_offers')
    op.drop_table('standby')
    op.drop_index('ix_turn_duties_account_at', table_name='turn_duties')
    op.drop_table('turn_duties')
    op.drop_column('games', 'min_reliability')
    op.drop_column('games', 'nmr_extended')
    op.drop_column('games', 'nmr')
    op.drop_column('games', 'drop_after')
