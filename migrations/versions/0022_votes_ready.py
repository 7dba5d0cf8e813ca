"""people, part one (issue 44): players' votes to extend a deadline or pause
a game (votes), a game's rules for them and its ready check
(vote_settings), and the seats of a ready check (ready_seats).  New tables
only: the games table is not rebuilt.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02 15:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('vote_settings',
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('rule', sa.String(length=16), nullable=False),
    sa.Column('max_extensions', sa.Integer(), nullable=False),
    sa.Column('max_pause_minutes', sa.Integer(), nullable=False),
    sa.Column('ready_minutes', sa.Integer(), nullable=True),
    sa.Column('ready_phase', sa.String(length=8), nullable=True),
    sa.Column('paused_by', sa.String(length=8), nullable=True),
    sa.Column('paused_at', sa.DateTime(), nullable=True),
    sa.Column('paused_until', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('game_id')
    )
    op.create_index('ix_vote_settings_paused_until', 'vote_settings', ['paused_until'])
    op.create_table('votes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('minutes', sa.Integer(), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('proposer', sa.String(length=32), nullable=False),
    sa.Column('rule', sa.String(length=16), nullable=False),
    sa.Column('opened_at', sa.DateTime(), nullable=False),
    sa.Column('closes_at', sa.DateTime(), nullable=False),
    sa.Column('ballots', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=8), nullable=False),
    sa.Column('decided_at', sa.DateTime(), nullable=True),
    sa.Column('outcome', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_votes_status_closes', 'votes', ['status', 'closes_at'])
    op.create_index('ix_votes_game_status', 'votes', ['game_id', 'status'])
    op.create_table('ready_seats',
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('handle_key', sa.String(length=32), nullable=False),
    sa.Column('handle', sa.String(length=32), nullable=False),
    sa.Column('asked_at', sa.DateTime(), nullable=False),
    sa.Column('due_at', sa.DateTime(), nullable=False),
    sa.Column('ready_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('game_id', 'handle_key')
    )
    op.create_index('ix_ready_seats_due', 'ready_seats', ['ready_at', 'due_at'])


def downgrade() -> None:
    op.drop_index('ix_ready_seats_due', table_name='ready_seats')
    op.drop_table('ready_seats')
    op.drop_index('ix_votes_game_status', table_name='votes')
    op.drop_index('ix_votes_status_closes', table_name='votes')
    op.drop_table('votes')
    op.drop_index('ix_vote_settings_paused_until', table_name='vote_settings')
    op.drop_table('vote_settings')
