"""review fixes: the outbox's rate limits (replies to mails that proved
nothing, forwards of mail to postmaster, the GM's bounce summary) count one
kind's rows of the last hour: an index on outbox (kind, created_at) keeps that
from reading the whole outbox; `who NAME` of a game without turns reads the
game's mails through an index on inbox (game_id, received_at)

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 13:45:00
"""
from alembic import op


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_outbox_kind_created', 'outbox', ['kind', 'created_at'])
    op.create_index('ix_inbox_game_received', 'inbox', ['game_id', 'received_at'])


def downgrade() -> None:
    op.drop_index('ix_inbox_game_received', table_name='inbox')
    op.drop_index('ix_outbox_kind_created', table_name='outbox')
