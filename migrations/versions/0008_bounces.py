"""bounces: the key of the VERP return paths (server_secrets), every bounce that
came back (bounces), addresses no mail goes to (mail_holds), and when an outbox
row bounced (outbox.bounced_at)

Revision ID: 0008
Revises: 0006
Create Date: 2026-11-24 20:00:00
"""
import datetime
import secrets

from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('server_secrets',
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('value', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    table = sa.table('server_secrets', sa.column('name', sa.String()), sa.column('value', sa.String()),
                     sa.column('created_at', sa.DateTime()))
    # the HMAC key of bounces+ID-TOKEN@DOMAIN: made here, once, never mailed
    op.get_bind().execute(table.insert().values(
        name='bounce_key', value=secrets.token_hex(32),
        created_at=datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)))
    op.create_table('bounces',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.Column('outbox_id', sa.Integer(), nullable=False),
    sa.Column('address', sa.String(length=320), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('diagnostic', sa.Text(), nullable=False),
    sa.Column('inbound_id', sa.Integer(), nullable=True),
    sa.Column('told_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['outbox_id'], ['outbox.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['inbound_id'], ['inbox.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('outbox_id')
    )
    op.create_index('ix_bounces_address_at', 'bounces', ['address', 'at'], unique=False)
    op.create_index('ix_bounces_told_at', 'bounces', ['told_at'], unique=False)
    op.create_table('mail_holds',
    sa.Column('address', sa.String(length=320), nullable=False),
    sa.Column('since', sa.DateTime(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('address')
    )
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('bounced_at', sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_column('bounced_at')
    op.drop_table('mail_holds')
    op.drop_index('ix_bounces_told_at', table_name='bounces')
    op.drop_index('ix_bounces_address_at', table_name='bounces')
    op.drop_table('bounces')
    op.drop_table('server_secrets')
