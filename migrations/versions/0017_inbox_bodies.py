"""hostile input, round three (issue 41): a mail's bytes are stored once in
inbox_bodies however many of our addresses it was sent to, and each inbox
row (one per recipient) points at them (inbox.body_id).  Before, each row
carried the whole mail: one 1 MB mail to 100 addresses wrote 100 MB.
inbox_bodies.answered_by records which row gave the one answer a mail that
proved no sender gets (pipeline/reply.py).

The upgrade moves every stored mail into a body of its own, with the inbox
row's id as the body's id (rows stored before this migration each carried
their own copy, so no two of them share one), then drops inbox.raw.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 10:45:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('inbox_bodies',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('raw', sa.LargeBinary(), nullable=False),
    sa.Column('rcpt_tos', sa.JSON(none_as_null=True), nullable=True),
    sa.Column('answered_by', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    # each row stored before carried its own copy: a body of its own, for one recipient (rcpt_tos NULL)
    op.execute("INSERT INTO inbox_bodies (id, raw) SELECT id, raw FROM inbox")
    bind = op.get_bind()
    if bind.dialect.name == 'postgresql':
        # the ids were given: the sequence goes on after the largest
        op.execute("SELECT setval(pg_get_serial_sequence('inbox_bodies', 'id'), "
                   "(SELECT coalesce(max(id), 0) + 1 FROM inbox_bodies), false)")
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('body_id', sa.Integer(), nullable=True))
    op.execute("UPDATE inbox SET body_id = id")
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.alter_column('body_id', existing_type=sa.Integer(), nullable=False)
        batch_op.create_foreign_key('fk_inbox_body_id', 'inbox_bodies', ['body_id'], ['id'])
        batch_op.drop_column('raw')


def downgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('raw', sa.LargeBinary(), nullable=True))
    op.execute("UPDATE inbox SET raw = (SELECT inbox_bodies.raw FROM inbox_bodies "
               "WHERE inbox_bodies.id = inbox.body_id)")
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.alter_column('raw', existing_type=sa.LargeBinary(), nullable=False)
        batch_op.drop_constraint('fk_inbox_body_id', type_='foreignkey')
        batch_op.drop_column('body_id')
    op.drop_table('inbox_bodies')
