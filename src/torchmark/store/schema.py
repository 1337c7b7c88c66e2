"""The store's tables (SQLAlchemy Core: one definition for SQLite and PostgreSQL).

machines: one row a machine fingerprint (its details once). runs: one row a run, with
its provenance and status (running, ok, failed, interrupted). cases: one row a stable
case id and what defines it. results: one row a (run, case, metric), with the summary
statistics, warnings, a failure if the case failed, and the raw samples packed as
little-endian float64 bytes (a column, not a row a sample). change_marks: what was said
of a detected change (dismissed, acknowledged, confirmed or not by re-measuring)."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()
# results' columns a history's points are read from (index results_case_points: the
# case and metric first, then what the rows give)
POINT_COLUMNS = ("case_id", "metric", "run_id", "id", "median", "n", "unit", "q1", "q3")

machines = sa.Table(
    "machines", metadata,
    sa.Column("fingerprint", sa.String(32), primary_key=True),
    sa.Column("hostname", sa.Text, nullable=False),
    sa.Column("cpu_model", sa.Text, nullable=False),
    sa.Column("cores", sa.Integer, nullable=False),
    sa.Column("memory_bytes", sa.BigInteger, nullable=False),
    sa.Column("gpus", sa.JSON, nullable=False),
    sa.Column("gpu_driver", sa.Text),
    sa.Column("first_seen", sa.Text, nullable=False),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("started", sa.Text, nullable=False),  # ISO 8601 with the offset
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
    sa.Column("provenance", sa.JSON),  # the whole record, as captured
    sa.Column("import_key", sa.String(64), unique=True),  # a file imported: its digest
    # how many writes added or removed its results, and when the last one did (UTC to
    # the microsecond; NULL: none since schema 0007), both set by
    # Store.count_result_write: what its packed medians are checked against
    # (store/run_medians.py)
    sa.Column("result_writes", sa.Integer, nullable=False, server_default="0"),
    sa.Column("results_changed", sa.Text),
    sa.Index("runs_started", "started"),
    sa.Index("runs_machine_env", "machine", "env"),
)

cases = sa.Table(
    "cases", metadata,
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

results = sa.Table(
    "results", metadata,
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
    sa.Column("samples", sa.LargeBinary, nullable=False),  # float64, little-endian
    # sha256 of the case id, metric and samples (32 hex digits): an import skips what
    # the store holds already
    sa.Column("content_key", sa.String(32)),
    sa.Column("warnings", sa.JSON, nullable=False),
    sa.Column("failure", sa.Text),
    sa.Column("failure_tail", sa.Text),
    sa.Column("extra", sa.JSON, nullable=False),
    sa.Column("recorded", sa.Text, nullable=False),
    # the first and third quartiles of its samples (core.result.quartiles; NULL for none)
    sa.Column("q1", sa.Float),
    sa.Column("q3", sa.Float),
    sa.Index("results_case_metric", "case_id", "metric"),
    # what a case's history is drawn from, in the index alone: a case's thousand results
    # read from a few index pages, not a table page each (Store.series_rows)
    # (failure last: always NULL there, but SQLite counts the index as covering the
    # query only with it, and after ANALYZE took the table's index without it)
    sa.Index("results_case_points", *POINT_COLUMNS, "failure",
             sqlite_where=sa.text("failure IS NULL"),
             postgresql_where=sa.text("failure IS NULL")),
    sa.Index("results_run_case", "run_id", "case_id"),
    sa.Index("results_content", "content_key"),
    # and on PostgreSQL only, results_run_id on (run_id, id) (migration 0006)
)

# what users (or `regressions --confirm`) said of a detected change, keyed by the change's
# series and its first bad run: dismissed, acknowledged, confirmed, not-confirmed
change_marks = sa.Table(
    "change_marks", metadata,
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
    sa.Index("change_marks_change", "case_id", "metric", "first_bad_run"),
)

# the lists of (case id, metric) run_medians rows hold the medians of, by the digest of
# their JSON (a suite's runs share one): see store/run_medians.py
median_keys = sa.Table(
    "median_keys", metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("key_list", sa.LargeBinary, nullable=False),
)

# a finished run's medians, packed (little-endian float64, NaN where none), as the run
# was when they were read: its start, result_writes and results_changed (what tells
# whether they still hold), its number of results, largest result id and that result's
# time recorded
run_medians = sa.Table(
    "run_medians", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("started", sa.Text, nullable=False),
    sa.Column("results", sa.Integer, nullable=False),
    sa.Column("last_result", sa.Integer),
    sa.Column("last_recorded", sa.Text),
    sa.Column("key_digest", sa.String(64), sa.ForeignKey("median_keys.digest"), nullable=False),
    sa.Column("medians", sa.LargeBinary, nullable=False),
    sa.Column("result_writes", sa.Integer),  # NULL: packed before 0007 and not of the run now
    sa.Column("results_changed", sa.Text),
)
