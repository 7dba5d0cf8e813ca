"""state entries and per-player turn reports: a player's orders are written as
rows of their own (state_entries) instead of rewriting the game's whole state
document on every order mail; the report each player got for a turn is a row
of its own (turn_reports) instead of one snapshots.reports document holding
every player's report

Revision ID: 0010
Revises: 0006
Create Date: 2026-11-24 10:00:00
"""
import json

from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'state_entries',
        sa.Column('game_id', sa.Integer(), nullable=False),
        sa.Column('field', sa.String(length=64), nullable=False),
        sa.Column('key', sa.String(length=200), nullable=False),
        sa.Column('value', sa.JSON(), nullable=True),
        sa.Column('seq', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(['game_id'], ['games.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('game_id', 'field', 'key'),
    )
    op.create_table(
        'turn_reports',
        sa.Column('snapshot_id', sa.Integer(), nullable=False),
        sa.Column('handle_key', sa.String(length=32), nullable=False),
        sa.Column('text', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['snapshot_id'], ['snapshots.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('snapshot_id', 'handle_key'),
    )
    snapshots = sa.table('snapshots', sa.column('id', sa.Integer()), sa.column('reports', sa.JSON()))
    reports = sa.table('turn_reports', sa.column('snapshot_id', sa.Integer()), sa.column('handle_key', sa.String()),
                       sa.column('text', sa.Text()))
    bind = op.get_bind()
    for snap_id, stored in bind.execute(sa.select(snapshots.c.id, snapshots.c.reports).where(snapshots.c.reports.is_not(None))):
        if isinstance(stored, str):
            stored = json.loads(stored)
        rows = [{"snapshot_id": snap_id, "handle_key": k, "text": t} for k, t in (stored or {}).items()]
        if rows:
            bind.execute(reports.insert(), rows)
    with op.batch_alter_table('snapshots', schema=None) as batch_op:
        batch_op.drop_column('reports')


def downgrade() -> None:
    with op.batch_alter_table('snapshots', schema=None) as batch_op:
        batch_op.add_column(sa.Column('reports', sa.JSON(), nullable=True))
    snapshots = sa.table('snapshots', sa.column('id', sa.Integer()), sa.column('reports', sa.JSON()))
    reports = sa.table('turn_reports', sa.column('snapshot_id', sa.Integer()), sa.column('handle_key', sa.String()),
                       sa.column('text', sa.Text()))
    bind = op.get_bind()
    gathered: dict[int, dict[str, str]] = {}
    for snap_id, key, text in bind.execute(sa.select(reports.c.snapshot_id, reports.c.handle_key, reports.c.text)):
        gathered.setdefault(snap_id, {})[key] = text
    for snap_id, texts in gathered.items():
        bind.execute(snapshots.update().where(snapshots.c.id == snap_id).values(reports=texts))
    op.drop_table('turn_reports')
    # the entries go back into the documents they were written over
    games = sa.table('games', sa.column('id', sa.Integer()), sa.column('state', sa.JSON()))
    entries = sa.table('state_entries', sa.column('game_id', sa.Integer()), sa.column('field', sa.String()),
                       sa.column('key', sa.String()), sa.column('value', sa.JSON()), sa.column('seq', sa.Integer()))
    rows = bind.execute(sa.select(entries.c.game_id, entries.c.field, entries.c.key, entries.c.value, entries.c.seq)).all()
    for game_id in sorted({r[0] for r in rows}):
        state = bind.execute(sa.select(games.c.state).where(games.c.id == game_id)).scalar_one()
        if isinstance(state, str):
            state = json.loads(state)
        mine = [r[1:] for r in rows if r[0] == game_id]
        mine.sort(key=lambda r: (r[3] is not None, r[3] or 0))
        for field, key, value, seq in mine:
            mapping = state.setdefault(field, {})
            if seq is not None:
                mapping.pop(key, None)
            if value is None:
                mapping.pop(key, None)
            else:
                mapping[key] = value
        bind.execute(games.update().where(games.c.id == game_id).values(state=state))
    op.drop_table('state_entries')
