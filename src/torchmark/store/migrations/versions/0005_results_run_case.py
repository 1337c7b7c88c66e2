"""A run's results found by case: the index on results' run becomes one on (run, case),
which answers what the old one did (a run's results) and a run's results of some cases
(a page of a comparison or of a run) without reading the run's other results.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("results_run_case", "results", ["run_id", "case_id"])
    op.drop_index("results_run", table_name="results")


def downgrade() -> None:
    op.create_index("results_run", "results", ["run_id"])
    op.drop_index("results_run_case", table_name="results")
