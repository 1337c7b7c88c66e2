"""Each finished run's medians, packed in one row (what a comparison of two runs ranks
its cases by, read without reading the run's results), and the lists of cases they are
the medians of, one a suite; every run that is not running is packed.

Revision ID: 0004
Revises: 0003
"""

import hashlib
import json
import math
import struct

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
    _pack_runs(op.get_bind())


def _pack_runs(conn: sa.Connection) -> None:
    """Every run stored so far that is not running, packed as store/run_medians.py
    packs a run it finishes (the tables as they are at this revision, written out here
    so that later revisions cannot change this one)."""
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("started", sa.Text),
                    sa.column("status", sa.String))
    results = sa.table("results", sa.column("id", sa.Integer), sa.column("run_id", sa.Integer),
                       sa.column("case_id", sa.Text), sa.column("metric", sa.String),
                       sa.column("median", sa.Float), sa.column("failure", sa.Text),
                       sa.column("recorded", sa.Text))
    keys_table = sa.table("median_keys", sa.column("digest", sa.String),
                          sa.column("key_list", sa.LargeBinary))
    packed = sa.table("run_medians", *(sa.column(name) for name in (
        "run_id", "started", "results", "last_result", "last_recorded", "key_digest",
        "medians")))
    digests: set[str] = set()
    for run_id, started in conn.execute(sa.select(runs.c.id, runs.c.started)
                                        .where(runs.c.status != "running")).all():
        rows = conn.execute(sa.select(results.c.case_id, results.c.metric, results.c.median,
                                      results.c.failure, results.c.id, results.c.recorded)
                            .where(results.c.run_id == run_id)
                            .order_by(results.c.id)).all()
        latest = {(row[0], row[1]): None if row[3] is not None or row[2] is None
                  else float(row[2]) for row in rows}  # a key's last result
        blob = json.dumps(list(latest), separators=(",", ":")).encode()
        digest = hashlib.sha256(blob).hexdigest()
        if digest not in digests:
            digests.add(digest)
            conn.execute(keys_table.insert().values(digest=digest, key_list=blob))
        medians = b"".join(struct.pack("<d", math.nan if value is None else value)
                           for value in latest.values())
        conn.execute(packed.insert().values(
            run_id=run_id, started=started, results=len(rows),
            last_result=rows[-1][4] if rows else None,
            last_recorded=rows[-1][5] if rows else None, key_digest=digest,
            medians=medians))


def downgrade() -> None:
    op.drop_table("run_medians")
    op.drop_table("median_keys")
