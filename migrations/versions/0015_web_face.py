"""the web face (issue 29): a game the GM made private has no public pages
(games.private); PRESS TO ALL shown on the game's page while the GM's
public_press is on (games.public_press, press.public); the mail streams an address stopped, by one click on its
List-Unsubscribe link or by mail (mail_stops)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 10:10:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.add_column(sa.Column('private', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('public_press', sa.Boolean(), nullable=False, server_default=sa.false()))
    # press sent while the game's public_press was on (and to all): shown on the game's page
    op.add_column('press', sa.Column('public', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        'mail_stops',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('address', sa.String(length=320), nullable=False),
        sa.Column('stream', sa.String(length=16), nullable=False),
        sa.Column('game_id', sa.Integer(), nullable=True),
        sa.Column('since', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('address', 'stream', 'game_id', name='uq_mail_stops'),
    )
    op.create_index('ix_mail_stops_address', 'mail_stops', ['address'])


def downgrade() -> None:
    op.drop_index('ix_mail_stops_address', table_name='mail_stops')
    op.drop_table('mail_stops')
    with op.batch_alter_table('press', schema=None) as batch_op:
        batch_op.drop_column('public')
    with op.batch_alter_table('games', schema=None) as batch_op:
        batch_op.drop_column('public_press')
        batch_op.drop_column('private')
