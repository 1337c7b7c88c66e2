"""Each result's first and third quartiles in columns of their own (`q1`, `q3`), and an
index on what a case's history is drawn from: a case page read a case's thousand results
from the table, a page each (8 ms of SQLite's time with the store in memory, a disk read
each without), where the index holds them in a few pages (0.7 ms).

The quartiles of the results stored before are computed here from their samples, as
core.result.quartiles computes them (written out, so that later revisions cannot change
what this one did), a batch of ids at a time. It only adds (two columns, their values,
an index), so a SQLite store is upgraded without a copy; a column an interrupted upgrade
added already is kept. A store of 10M results took 4.6 min on SQLite and 8.5 on
PostgreSQL, which writes every row again and wants a `VACUUM ANALYZE results` after it
(its autovacuum soon runs one): a case's points are read from the index alone only
where its pages are marked all visible.

Revision ID: 0008
Revises: 0007
"""

import numpy as np
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BATCH = 20_000  # result ids whose quartiles are written together
PART = 1_000  # results whose samples are read together
# what a history's points are read from, and failure last: SQLite counts the index as
# covering the query only with it (after ANALYZE it took the other index without)
INDEX_COLUMNS = ("case_id", "metric", "run_id", "id", "median", "n", "unit", "q1", "q3",
                 "failure")


def upgrade() -> None:
    conn = op.get_bind()
    held = {c["name"] for c in sa.inspect(conn).get_columns("results")}
    for name in ("q1", "q3"):
        if name not in held:
            op.add_column("results", sa.Column(name, sa.Float))
    results = sa.table("results", sa.column("id", sa.Integer),
                       sa.column("samples", sa.LargeBinary), sa.column("q1", sa.Float),
                       sa.column("q3", sa.Float))
    last = conn.execute(sa.select(sa.func.max(results.c.id))).scalar() or 0
    for start in range(0, last, BATCH):
        ids: list[int] = []
        found: list[tuple[float, float]] = []
        read = conn.execute(sa.select(results.c.id, results.c.samples).where(
            results.c.id > start, results.c.id <= start + BATCH,
            # whole float64s only: a row not as torchmark writes it keeps NULL rather
            # than stop the upgrade of the whole store
            sa.func.length(results.c.samples) > 0, sa.func.length(results.c.samples) % 8 == 0)
            .execution_options(yield_per=PART))
        for part in read.partitions():  # a part's samples at a time: results of many
            ids += [row[0] for row in part]  # samples are not all held at once
            found += _quartiles([bytes(row[1]) for row in part])
        if conn.dialect.name == "postgresql":  # one statement a batch
            conn.execute(sa.text(
                "UPDATE results SET q1 = v.q1, q3 = v.q3 FROM unnest("
                "CAST(:ids AS integer[]), CAST(:q1 AS float8[]), CAST(:q3 AS float8[])) "
                "AS v(id, q1, q3) WHERE results.id = v.id"),
                {"ids": ids, "q1": [q[0] for q in found], "q3": [q[1] for q in found]})
        elif ids:
            conn.execute(sa.text("UPDATE results SET q1 = :q1, q3 = :q3 WHERE id = :id"),
                         [{"id": i, "q1": q[0], "q3": q[1]}
                          for i, q in zip(ids, found, strict=True)])
    where = sa.text("failure IS NULL")
    op.create_index("results_case_points", "results", list(INDEX_COLUMNS),
                    sqlite_where=where, postgresql_where=where)


def _quartiles(packed: list[bytes]) -> list[tuple[float, float]]:
    """The first and third quartiles of each result's packed samples (not empty):
    linear between the two sorted values about i (n - 1) / 4, as core.result.quartile
    places them, the results of one sample count sorted together."""
    out: list[tuple[float, float]] = [(0.0, 0.0)] * len(packed)
    by_count: dict[int, list[int]] = {}
    for i, blob in enumerate(packed):
        by_count.setdefault(len(blob) // 8, []).append(i)
    for n, where in by_count.items():
        ordered = np.sort(np.frombuffer(b"".join(packed[i] for i in where), dtype="<f8")
                          .reshape(len(where), n), axis=1)
        if n == 1:
            low = high = ordered[:, 0]
        else:
            low, high = ((ordered[:, j] * (4 - delta) + ordered[:, j + 1] * delta) / 4
                         for j, delta in (divmod(i * (n - 1), 4) for i in (1, 3)))
        for i, pair in zip(where, zip(low.tolist(), high.tolist(), strict=True), strict=True):
            out[i] = pair
    return out


def downgrade() -> None:
    op.drop_index("results_case_points", table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("q3")
        batch.drop_column("q1")
