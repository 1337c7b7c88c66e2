"""What users said of detected changes: dismissed, acknowledged, confirmed by re-measuring.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "change_marks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("case_id", sa.Text, sa.ForeignKey("cases.id"), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("machine", sa.String(32)),
        sa.Column("env", sa.Text),
        sa.Column("first_bad_run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("mark", sa.String(16), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("by", sa.Text),
        sa.Column("at", sa.Text, nullable=False),
    )
    op.create_index("change_marks_change", "change_marks", ["case_id", "metric",
                                                            "first_bad_run"])


def downgrade() -> None:
    op.drop_index("change_marks_change", table_name="change_marks")
    op.drop_table("change_marks")
