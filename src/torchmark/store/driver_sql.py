"""Statements handed to the database driver directly, for an import's bulk paths.

SQLAlchemy Core processes every parameter of every row in Python (bind processors, JSON
serialisers, a name for each value of an expanding IN): at a million results an import
spent more time there than in the database. `insert_rows` compiles a table's INSERT once
for the connection's dialect and gives the driver plain values (the caller gives JSON
columns as their JSON text, binary columns as bytes); `placeholders` spells a list of
positional parameters in the driver's own style; `driver_rows` runs a query on the
driver's cursor and returns its plain tuples (no Row objects, no result processors: the
caller converts what needs converting, a boolean SQLite gives as 0 or 1), PostgreSQL's
in its binary format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa


def insert_rows(conn: sa.Connection, table: sa.Table, columns: Sequence[str],
                rows: list[tuple[Any, ...]], same: dict[str, int | str] | None = None) -> None:
    """Insert `rows` (tuples of `columns`' values) into `table` within `conn`'s
    transaction; `same`: values every row shares (ints and torchmark's own text, written
    into the statement: the rows need not repeat them)."""
    if not rows:
        return
    statement = table.insert()
    if same:
        quote = sa.Text().literal_processor(conn.dialect)
        assert quote is not None
        statement = statement.values({
            name: sa.literal_column(str(int(value)) if isinstance(value, int)
                                    else quote(value))
            for name, value in same.items()})
    compiled = statement.compile(dialect=conn.dialect, column_keys=list(columns))
    sql = str(compiled)
    if not compiled.positional:  # named parameters (psycopg's %(name)s)
        conn.exec_driver_sql(sql, [dict(zip(columns, row, strict=True)) for row in rows])
        return
    order = [columns.index(name) for name in compiled.positiontup or ()]
    if order != list(range(len(columns))):
        rows = [tuple(row[i] for i in order) for row in rows]
    conn.exec_driver_sql(sql, rows)


def placeholders(conn: sa.Connection, n: int) -> str:
    """`n` positional parameters, comma-separated, as the connection's driver spells
    them (`?` for sqlite3, `%s` for psycopg)."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    return ", ".join([mark] * n)


def driver_rows(conn: sa.Connection, query: sa.ClauseElement | str,
                params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """`query`'s rows as the driver returns them, within `conn`'s transaction. `query`:
    a statement, or SQL in the driver's own spelling with its positional `params` (a
    long IN list: SQLAlchemy names and processes each of its values)."""
    sql: str
    if isinstance(query, str):
        sql, values = query, tuple(params)
    else:
        compiled: Any = query.compile(dialect=conn.dialect,
                                      compile_kwargs={"render_postcompile": True})
        sql, values = str(compiled), compiled.params
        if compiled.positional:
            values = tuple(values[name] for name in compiled.positiontup or ())
    # PostgreSQL's binary format: no value spelt out as text by the server and parsed
    # back here (a case's thousand samples' blobs in hex took longer than the query)
    cursor = conn.connection.cursor(binary=True) if conn.dialect.name == "postgresql" \
        else conn.connection.cursor()
    try:
        cursor.execute(sql, values)
        return list(cursor.fetchall())
    finally:
        cursor.close()
