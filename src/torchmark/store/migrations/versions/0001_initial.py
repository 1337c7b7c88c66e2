"""The first schema: machines, runs, cases, results (with packed raw samples).

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "machines",
        sa.Column("fingerprint", sa.String(32), primary_key=True),
        sa.Column("hostname", sa.Text, nullable=False),
        sa.Column("cpu_model", sa.Text, nullable=False),
        sa.Column("cores", sa.Integer, nullable=False),
        sa.Column("memory_bytes", sa.BigInteger, nullable=False),
        sa.Column("gpus", sa.JSON, nullable=False),
        sa.Column("gpu_driver", sa.Text),
        sa.Column("first_seen", sa.Text, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("started", sa.Text, nullable=False),
        sa.Column("ended", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("command", sa.JSON, nullable=False),
        sa.Column("torchmark_version", sa.Text),
        sa.Column("torch_version", sa.Text),
        sa.Column("torch_git", sa.Text),
        sa.Column("torch_cuda", sa.Text),
        sa.Column("python", sa.Text),
        sa.Column("git_commit", sa.Text),
        sa.Column("git_dirty", sa.Boolean),
        sa.Column("machine", sa.String(32), sa.ForeignKey("machines.fingerprint")),
        sa.Column("governor", sa.Text),
        sa.Column("turbo", sa.Boolean),
        sa.Column("env", sa.Text),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("provenance", sa.JSON),
        sa.Column("import_key", sa.String(64), unique=True),
    )
    op.create_index("runs_started", "runs", ["started"])
    op.create_index("runs_machine_env", "runs", ["machine", "env"])
    op.create_table(
        "cases",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("frontend", sa.String(16), nullable=False),
        sa.Column("stmt", sa.Text, nullable=False),
        sa.Column("setup", sa.Text, nullable=False),
        sa.Column("label", sa.Text),
        sa.Column("sub_label", sa.Text),
        sa.Column("description", sa.Text),
        sa.Column("threads", sa.Integer, nullable=False),
        sa.Column("device", sa.Text, nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("case_id", sa.Text, sa.ForeignKey("cases.id"), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("unit", sa.String(16), nullable=False),
        sa.Column("env", sa.Text),
        sa.Column("number_per_run", sa.BigInteger, nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("median", sa.Float),
        sa.Column("mean", sa.Float),
        sa.Column("iqr", sa.Float),
        sa.Column("min", sa.Float),
        sa.Column("max", sa.Float),
        sa.Column("samples", sa.LargeBinary, nullable=False),
        sa.Column("warnings", sa.JSON, nullable=False),
        sa.Column("failure", sa.Text),
        sa.Column("failure_tail", sa.Text),
        sa.Column("extra", sa.JSON, nullable=False),
        sa.Column("recorded", sa.Text, nullable=False),
    )
    op.create_index("results_case_metric", "results", ["case_id", "metric"])
    op.create_index("results_run", "results", ["run_id"])


def downgrade() -> None:
    for table in ("results", "cases", "runs", "machines"):
        op.drop_table(table)
