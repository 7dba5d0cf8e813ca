"""alerts where players are (issue 43): a game's and an account's alert
channel -- the URL alerts are posted to, the HMAC key that signs the generic
JSON ones, and the error that stopped the channel (a 4xx from the target: no
more alerts until the URL is set again)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02 14:30:00
"""
import sqlalchemy as sa
from alembic import op


revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None

_TABLES = ('games', 'accounts')


def upgrade() -> None:
    for name in _TABLES:
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.add_column(sa.Column('notify_url', sa.String(length=400), nullable=True))
            batch_op.add_column(sa.Column('notify_secret', sa.String(length=64), nullable=True))
            batch_op.add_column(sa.Column('notify_error', sa.Text(), nullable=True))


def downgrade() -> None:
    for name in _TABLES:
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.drop_column('notify_error')
            batch_op.drop_column('notify_secret')
            batch_op.drop_column('notify_url')
