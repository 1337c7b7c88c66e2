"""A run's writes counted: `runs.result_writes`, how many writes added or removed its
results, and `runs.results_changed`, when the last one did (a run deleted and made again
under the id SQLite gives again, at the same start, starts its count again), both kept
with its packed medians too. Whether a run's packed
medians still hold was read from its results (their number, largest id and its time
recorded): on PostgreSQL counting a run's 10,000 results took 1.5-3 ms, asked twice by
every comparison page; one column of one row answers it now (store/run_medians.py).

The packed rows that hold for their run as it is are marked as of its writes (0); the
others keep NULL, never taken for the run (its results are read, as before). Nothing is
rewritten or removed, so a SQLite store is upgraded without a copy; a column an
interrupted upgrade added already is kept.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    for table, column in (
            ("runs", sa.Column("result_writes", sa.Integer, nullable=False,
                               server_default="0")),
            ("runs", sa.Column("results_changed", sa.Text)),
            ("run_medians", sa.Column("result_writes", sa.Integer)),
            ("run_medians", sa.Column("results_changed", sa.Text))):
        if column.name not in {c["name"] for c in sa.inspect(conn).get_columns(table)}:
            op.add_column(table, column)
    # the tables as they are at this revision, written out so that later ones cannot
    # change what this one did
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("started", sa.Text))
    results = sa.table("results", sa.column("id", sa.Integer),
                       sa.column("run_id", sa.Integer), sa.column("recorded", sa.Text))
    packed = sa.table("run_medians", *(sa.column(name) for name in (
        "run_id", "started", "results", "last_result", "last_recorded", "result_writes")))
    of_run = results.c.run_id == packed.c.run_id
    last = results.alias("last")
    conn.execute(packed.update().values(result_writes=0).where(
        sa.exists().where(runs.c.id == packed.c.run_id, runs.c.started == packed.c.started),
        packed.c.results == sa.select(sa.func.count(results.c.id)).where(of_run)
        .scalar_subquery(),
        packed.c.last_result.is_not_distinct_from(
            sa.select(sa.func.max(results.c.id)).where(of_run).scalar_subquery()),
        packed.c.last_recorded.is_not_distinct_from(
            sa.select(last.c.recorded).where(last.c.id == packed.c.last_result)
            .scalar_subquery())))


def downgrade() -> None:
    for table in ("run_medians", "runs"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("results_changed")
            batch.drop_column("result_writes")
