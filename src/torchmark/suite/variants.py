"""GroupedVariants: many related one-line benchmarks written as one block per language.

    # @setup                 // @setup
    x = torch.ones((4, 4))   auto x = torch::ones({4, 4});
    # @add                   // @add
    x + 1                    x + 1;
    x += 1                   x += 1;

A `@label` marker starts a group; each statement in it is a case (labelled with the
Python statement, or the C++ one where there is no Python). Python and C++ groups of
the same label pair up statement by statement, or row by row where the two blocks are
the columns of one `parse_stmts` table (a row with one side empty is a one-language
case). `@setup` is shared by every case; `// @global_setup`
(C++ only) goes outside the C++ function. A line indented deeper than the statement
before it continues that statement. `parse_stmts` turns a two-column table
(`Python | C++`) into the two blocks.
"""

from __future__ import annotations

import itertools
import re
import textwrap

from torchmark.suite.grouped import GroupedBenchmark, GroupedSetup

_MARKERS = {"python": re.compile(r"^#\s*@(.*)$"), "cpp": re.compile(r"^//\s*@(.*)$")}
_COMMENT = {"python": re.compile(r"^#"), "cpp": re.compile(r"^//")}
_SETUP, _GLOBAL_SETUP = "setup", "global_setup"


def parse_block(block: str, language: str) -> tuple[dict[str, list[str]], str, str]:
    """(label -> statements, setup, global_setup) of one language's block."""
    groups, setup, global_setup, _ = _parse(block, language)
    return groups, setup, global_setup


def _parse(block: str, language: str
           ) -> tuple[dict[str, list[str]], str, str, dict[str, tuple[int, list[int]]]]:
    """parse_block's result, and for each label the line of its marker and the lines its
    statements start on (to pair the rows of a two-column table)."""
    marker, comment = _MARKERS[language], _COMMENT[language]
    groups: dict[str, list[str]] = {}
    rows: dict[str, tuple[int, list[int]]] = {}
    setup_lines: dict[str, list[str]] = {_SETUP: [], _GLOBAL_SETUP: []}
    current: str | None = None
    statement_indent = 0
    for number, line in enumerate(textwrap.dedent(block).splitlines(), start=1):
        stripped = line.strip()
        found = marker.match(stripped)
        if found:
            label = found.group(1).strip()
            key = label.lower().replace(" ", "_")
            if not label:
                raise ValueError(f"GroupedVariants: empty @label on line {number} of the "
                                 f"{language} block")
            if key in (_SETUP, _GLOBAL_SETUP):
                if key == _GLOBAL_SETUP and language == "python":
                    raise ValueError("GroupedVariants: @global_setup is for the C++ block only")
                current = key
            else:
                if label in groups:
                    raise ValueError(f"GroupedVariants: label {label!r} appears twice in the "
                                     f"{language} block")
                groups[label] = []
                rows[label] = (number, [])
                current = label
            continue
        if current in (_SETUP, _GLOBAL_SETUP):
            setup_lines[current].append(line)
            continue
        if not stripped or comment.match(stripped):
            continue
        if current is None:
            raise ValueError(f"GroupedVariants: line {number} of the {language} block comes "
                             f"before any '@label' marker: {stripped!r}")
        indent = len(line) - len(line.lstrip())
        statements = groups[current]
        if statements and (indent > statement_indent or _unclosed(statements[-1], language)
                           or stripped[0] in ")]}"):
            statements[-1] += "\n" + line[statement_indent:]
        else:
            statements.append(stripped)
            rows[current][1].append(number)
            statement_indent = indent
    return (groups, "\n".join(setup_lines[_SETUP]).strip("\n"),
            "\n".join(setup_lines[_GLOBAL_SETUP]).strip("\n"), rows)


def _pairs(label: str, py_lines: list[str], cpp_lines: list[str],
           py_rows: tuple[int, list[int]] | None, cpp_rows: tuple[int, list[int]] | None,
           table: bool) -> list[tuple[str, str]]:
    """(python, C++) statement pairs of one label. In the two columns of one table
    (`table`, both markers on one row) statements pair by row, and a row with one side
    empty is a one-language case; in blocks written apart the n-th statements pair, so
    both blocks must hold as many (or one of them none)."""
    if table and py_rows and cpp_rows and py_rows[0] == cpp_rows[0]:
        by_row: dict[int, list[str]] = {}
        for lines, (_, starts), side in ((py_lines, py_rows, 0), (cpp_lines, cpp_rows, 1)):
            for stmt, row in zip(lines, starts, strict=True):
                by_row.setdefault(row, ["", ""])[side] = stmt
        return [(py, cpp) for _, (py, cpp) in sorted(by_row.items())]
    if py_lines and cpp_lines and len(py_lines) != len(cpp_lines):
        raise ValueError(
            f"GroupedVariants: label {label!r} has {len(py_lines)} Python statement(s) and "
            f"{len(cpp_lines)} C++ statement(s); written as separate blocks, the n-th "
            f"statements pair up, so give both the same number (or write the two blocks as "
            f"the columns of one parse_stmts table, where a row may leave one side empty)")
    return list(itertools.zip_longest(py_lines, cpp_lines, fillvalue=""))


def _unclosed(code: str, language: str) -> bool:
    """Whether `code` opens more brackets than it closes (so the next line continues it),
    not counting those inside string or character literals and comments."""
    line_comment = "#" if language == "python" else "//"
    depth, i, quote = 0, 0, ""
    while i < len(code):
        if quote:
            if code.startswith("\\", i):
                i += 2
                continue
            if code.startswith(quote, i):
                i, quote = i + len(quote), ""
                continue
            if code[i] == "\n" and len(quote) == 1:  # a one-line literal left open
                quote = ""
            i += 1
            continue
        if code.startswith(line_comment, i):
            i = code.find("\n", i)
            if i < 0:
                break
            continue
        if language == "cpp" and code.startswith("/*", i):
            end = code.find("*/", i + 2)
            if end < 0:
                break
            i = end + 2
            continue
        char = code[i]
        if char == "'" and language == "cpp" and 0 < i < len(code) - 1 \
                and code[i - 1].isalnum() and code[i + 1].isalnum():  # 10'000: a separator
            i += 1
            continue
        if char in "'\"":
            quote = code[i:i + 3] if language == "python" and code[i:i + 3] == char * 3 else char
            i += len(quote)
            continue
        depth += (char in "([{") - (char in ")]}")
        i += 1
    return depth > 0


def _case_label(py_stmt: str, cpp_stmt: str) -> str:
    text = (py_stmt or cpp_stmt).splitlines()[0].strip()
    return text[:-1].rstrip() if text.endswith(";") else text


def GroupedVariants(py_block: str = "", cpp_block: str = "",  # noqa: N802 (upstream's name)
                    num_threads=1) -> dict[str, GroupedBenchmark | dict[str, GroupedBenchmark]]:
    """{label: benchmark} for one-statement groups, {label: {statement: benchmark}} else."""
    py_groups, py_setup, _, py_rows = _parse(py_block, "python")
    cpp_groups, cpp_setup, global_setup, cpp_rows = _parse(cpp_block, "cpp")
    if not py_groups and not cpp_groups:
        raise ValueError("GroupedVariants: no '@label' groups found")
    setup = GroupedSetup(py_setup, cpp_setup, global_setup)
    table = isinstance(py_block, TableColumn) and isinstance(cpp_block, TableColumn)
    _check_label_case(py_groups, cpp_groups)
    out: dict[str, GroupedBenchmark | dict[str, GroupedBenchmark]] = {}
    for label in [*py_groups, *(k for k in cpp_groups if k not in py_groups)]:
        pairs = _pairs(label, py_groups.get(label, []), cpp_groups.get(label, []),
                       py_rows.get(label), cpp_rows.get(label), table)
        benchmarks = {}
        for py_stmt, cpp_stmt in pairs:
            case_setup = setup if cpp_stmt else GroupedSetup(py_setup=py_setup)
            name = _case_label(py_stmt, cpp_stmt)
            if name in benchmarks:
                raise ValueError(f"GroupedVariants: statement {name!r} appears twice under "
                                 f"label {label!r}")
            try:
                benchmarks[name] = GroupedBenchmark.from_stmts(
                    py_stmt or None, cpp_stmt or None, case_setup, num_threads=num_threads)
            except ValueError as e:  # say which variant, in this API's name
                raise ValueError(str(e).replace("GroupedStmts:", f"GroupedVariants: {label!r}, "
                                                f"{name!r}:", 1)) from None
        if not benchmarks:
            raise ValueError(f"GroupedVariants: label {label!r} has no statements")
        out[label] = next(iter(benchmarks.values())) if len(benchmarks) == 1 else benchmarks
    return out


def _check_label_case(py_groups: dict, cpp_groups: dict) -> None:
    """Labels that differ only in case would silently make two one-language groups."""
    py_by_key = {label.casefold(): label for label in py_groups}
    for label in cpp_groups:
        py_label = py_by_key.get(label.casefold())
        if py_label is not None and py_label != label:
            raise ValueError(f"GroupedVariants: the Python block's label {py_label!r} and the "
                             f"C++ block's {label!r} differ only in case; labels pair "
                             f"Python and C++ statements by exact name")


_RULE = re.compile(r"^\s*-+\s*\|\s*-+\s*$")


def parse_stmts(table: str) -> tuple[str, str]:
    """(python, cpp) from a two-column table whose columns are split at the `|` of a
    `---- | ----` rule line; lines above the rule (titles) are dropped. Without a rule
    the whole text is Python."""
    lines = textwrap.dedent(table).splitlines()
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    if not rules:
        return textwrap.dedent(table).strip("\n"), ""
    column = lines[rules[0]].index("|")
    py, cpp = [], []
    for line in lines[rules[0] + 1:]:
        if len(line) > column and line[column] != "|" and line[column:].strip():
            raise ValueError(f"parse_stmts: line {line!r} does not have '|' at column {column}")
        py.append(line[:column].rstrip())
        cpp.append(line[column + 1:].rstrip() if len(line) > column else "")
    while py and not py[-1].strip() and not cpp[-1].strip():  # rows blank on both sides
        py.pop(), cpp.pop()
    while py and not py[0].strip() and not cpp[0].strip():
        py.pop(0), cpp.pop(0)
    # the columns stay row-aligned, and say so: GroupedVariants then pairs them by row
    return (TableColumn(textwrap.dedent("\n".join(py))),
            TableColumn(textwrap.dedent("\n".join(cpp))))


class TableColumn(str):
    """A column of a `parse_stmts` table: its lines are the table's rows, the same rows
    as the other column's."""
