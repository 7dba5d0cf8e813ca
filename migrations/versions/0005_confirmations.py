"""confirmations: register takes effect only after confirm CODE from the address;
an index on outbox.message_id (a reply's In-Reply-To is looked up there)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 15:10:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'confirmations',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('purpose', sa.String(length=16), nullable=False),
        sa.Column('email', sa.String(length=320), nullable=False),
        sa.Column('handle', sa.String(length=32), nullable=False),
        sa.Column('password_hash', sa.String(length=200), nullable=False),
        sa.Column('code_hash', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('confirmations', schema=None) as batch_op:
        batch_op.create_index('ix_confirmations_email', ['email'], unique=False)
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.create_index('ix_outbox_message_id', ['message_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_index('ix_outbox_message_id')
    with op.batch_alter_table('confirmations', schema=None) as batch_op:
        batch_op.drop_index('ix_confirmations_email')
    op.drop_table('confirmations')
