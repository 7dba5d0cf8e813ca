"""hostile input, round three (issue 41): a mail's bytes are stored once in
inbox_bodies however many of our addresses it was sent to, and each inbox
row (one per recipient) points at them (inbox.body_id).  Before, each row
carried the whole mail: one 1 MB mail to 100 addresses wrote 100 MB.
inbox_bodies.rcpt_tos names the recipients of a mail to more than one;
inbox_bodies.answered_by records which row gave the one answer a mail that
proved no sender gets (pipeline/reply.py).

The upgrade moves every stored mail into a body of its own, with the inbox
row's id as the body's id (rows stored before this migration each carried
their own copy, for their one recipient), then drops inbox.raw.

On SQLite the inbox table is not rebuilt (Alembic's batch mode would copy it
and drop the old one, and with foreign keys on, that DROP empties the
outbox's, orders' and other tables' references to it: ON DELETE SET NULL):
the columns are added and dropped with ALTER TABLE (DROP COLUMN needs SQLite
3.35).  There inbox.body_id is a plain nullable integer at the database's
level, without the foreign key the model declares (SQLite cannot drop a
column that is in one, so the downgrade could not take it back); the
listener always writes a row's body in the same transaction before it.

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
    sqlite = op.get_bind().dialect.name == 'sqlite'
    op.create_table('inbox_bodies',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('raw', sa.LargeBinary(), nullable=False),
    sa.Column('rcpt_tos', sa.JSON(none_as_null=True), nullable=True),
    sa.Column('answered_by', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.execute("INSERT INTO inbox_bodies (id, raw) SELECT id, raw FROM inbox")
    if sqlite:
        op.execute("ALTER TABLE inbox ADD COLUMN body_id INTEGER")
        op.execute("UPDATE inbox SET body_id = id")
        op.execute("ALTER TABLE inbox DROP COLUMN raw")
        return
    # the ids were given: the sequence goes on after the largest
    op.execute("SELECT setval(pg_get_serial_sequence('inbox_bodies', 'id'), "
               "(SELECT coalesce(max(id), 0) + 1 FROM inbox_bodies), false)")
    op.add_column('inbox', sa.Column('body_id', sa.Integer(), nullable=True))
    op.execute("UPDATE inbox SET body_id = id")
    op.alter_column('inbox', 'body_id', existing_type=sa.Integer(), nullable=False)
    op.create_foreign_key('fk_inbox_body_id', 'inbox', 'inbox_bodies', ['body_id'], ['id'])
    op.drop_column('inbox', 'raw')


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == 'sqlite'
    op.add_column('inbox', sa.Column('raw', sa.LargeBinary(), nullable=True))
    op.execute("UPDATE inbox SET raw = (SELECT inbox_bodies.raw FROM inbox_bodies "
               "WHERE inbox_bodies.id = inbox.body_id)")
    if sqlite:
        op.execute("ALTER TABLE inbox DROP COLUMN body_id")
    else:
        op.alter_column('inbox', 'raw', existing_type=sa.LargeBinary(), nullable=False)
        op.drop_constraint('fk_inbox_body_id', 'inbox', type_='foreignkey')
        op.drop_column('inbox', 'body_id')
    op.drop_table('inbox_bodies')
