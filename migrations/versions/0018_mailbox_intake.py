"""issue 43, a mailbox instead of an MX: each inbox row read from an IMAP
mailbox keeps the mailbox's UIDVALIDITY and the message's UID (a kill between
the commit and the move to the done mailbox must not store it twice), and one
row per mailbox says when it was last read and whether it fails (/healthz,
`pbm mail status`, the GM told once per outage)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 14:45:00
"""
import sqlalchemy as sa
from alembic import op


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('imap_uidvalidity', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('imap_uid', sa.BigInteger(), nullable=True))
    op.create_index('ix_inbox_imap_uid', 'inbox', ['imap_uidvalidity', 'imap_uid'])
    op.create_table(
        'mailbox_state',
        sa.Column('mailbox', sa.String(length=512), nullable=False),
        sa.Column('last_read_at', sa.DateTime(), nullable=True),
        sa.Column('fault_since', sa.DateTime(), nullable=True),
        sa.Column('fault', sa.Text(), nullable=True),
        sa.Column('told_at', sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint('mailbox'),
    )


def downgrade() -> None:
    op.drop_table('mailbox_state')
    op.drop_index('ix_inbox_imap_uid', table_name='inbox')
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.drop_column('imap_uid')
        batch_op.drop_column('imap_uidvalidity')
