"""Each finished run's medians, packed in one row (what a comparison of two runs ranks
its cases by, read without reading the run's results), and the lists of cases they are
the medians of, one a suite; every run that is not running is packed.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "median_keys",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("key_list", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "run_medians",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("started", sa.Text, nullable=False),
        sa.Column("results", sa.Integer, nullable=False),
        sa.Column("last_result", sa.Integer),
        sa.Column("last_recorded", sa.Text),
        sa.Column("key_digest", sa.String(64), sa.ForeignKey("median_keys.digest"),
                  nullable=False),
        sa.Column("medians", sa.LargeBinary, nullable=False),
    )
    # the runs stored so far, packed as torchmark packs a run it finishes
    from torchmark.store import run_medians

    conn = op.get_bind()
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("started", sa.Text),
                    sa.column("status", sa.String))
    for run_id, started in conn.execute(sa.select(runs.c.id, runs.c.started)
                                        .where(runs.c.status != "running")).all():
        run_medians.write_packed(conn, *run_medians.from_results(conn, run_id, started))


def downgrade() -> None:
    op.drop_table("run_medians")
    op.drop_table("median_keys")
