"""accounts hardening (issue 26): confirmations are looked up by handle (every
request of an account: undo windows, recovery codes, unlock codes); the old
per-account ``forgot:`` counters are gone (code mails are counted per address,
``mailto:``)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 10:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('confirmations', schema=None) as batch_op:
        batch_op.create_index('ix_confirmations_handle', ['handle'], unique=False)
    op.execute(sa.text("DELETE FROM auth_throttle WHERE key LIKE 'forgot:%'"))


def downgrade() -> None:
    with op.batch_alter_table('confirmations', schema=None) as batch_op:
        batch_op.drop_index('ix_confirmations_handle')
