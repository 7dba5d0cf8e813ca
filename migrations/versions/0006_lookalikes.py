"""look-alikes: accounts.handle_skeleton, the confusable skeleton of the handle
(games.names.name_key), so that register, confirm and `pbm account add` refuse a
handle that looks like an existing one with one indexed lookup

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 16:20:00
"""
from alembic import op
import sqlalchemy as sa

from games.names import name_key


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('accounts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('handle_skeleton', sa.String(length=128), nullable=True))
    accounts = sa.table('accounts', sa.column('id', sa.Integer()), sa.column('handle', sa.String()),
                        sa.column('handle_skeleton', sa.String()))
    bind = op.get_bind()
    rows = bind.execute(sa.select(accounts.c.id, accounts.c.handle)).all()
    for row_id, handle in rows:
        bind.execute(accounts.update().where(accounts.c.id == row_id).values(handle_skeleton=name_key(handle)))
    # existing look-alike pairs (made before this check) stay: the index is not unique
    with op.batch_alter_table('accounts', schema=None) as batch_op:
        batch_op.alter_column('handle_skeleton', existing_type=sa.String(length=128), nullable=False)
        batch_op.create_index('ix_accounts_handle_skeleton', ['handle_skeleton'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('accounts', schema=None) as batch_op:
        batch_op.drop_index('ix_accounts_handle_skeleton')
        batch_op.drop_column('handle_skeleton')
