"""Each result's content key (its case, metric and samples), so that an import skips
what the store holds already without comparing samples.

Revision ID: 0003
Revises: 0002
"""

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("content_key", sa.String(32)))
    op.create_index("results_content", "results", ["content_key"])
    conn = op.get_bind()
    results = sa.table("results", sa.column("id", sa.Integer), sa.column("case_id", sa.Text),
                       sa.column("metric", sa.String), sa.column("samples", sa.LargeBinary),
                       sa.column("content_key", sa.String))
    last = 0
    while True:  # the results stored so far, a batch at a time
        rows = conn.execute(sa.select(results.c.id, results.c.case_id, results.c.metric,
                                      results.c.samples)
                            .where(results.c.id > last).order_by(results.c.id)
                            .limit(5000)).all()
        if not rows:
            break
        for row in rows:
            key = hashlib.sha256(f"{row.case_id}\0{row.metric}\0".encode()
                                 + bytes(row.samples)).hexdigest()[:32]
            conn.execute(results.update().where(results.c.id == row.id)
                         .values(content_key=key))
        last = rows[-1].id


def downgrade() -> None:
    op.drop_index("results_content", table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("content_key")
