"""A run's results by id, on PostgreSQL: an index on results' (run, id), so that what a
run holds now (store/run_medians.py `version`: its number of results and its largest
result id, asked by every comparison and run page) is read from the index alone. Without
it PostgreSQL read the run's rows from the table (the index on (run, case) does not hold
the id): 13-19 ms a run on a store of 10M results whose pages were not in memory, against
1-2 ms. SQLite needs none: every index of a table keyed by its rowid holds the id.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("results_run_id", "results", ["run_id", "id"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("results_run_id", table_name="results")
