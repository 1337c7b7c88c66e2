"""C++ snippet sources: literal insertion and line mapping (no compiler needed)."""

from __future__ import annotations

from torchmark.cpp.snippet_source import snippet_source


def test_code_is_inserted_literally():
    stmt = r'auto s = std::string("a\\b\n\1 $1 \g<0>");'
    src = snippet_source(stmt, "auto x = 1;", "#include <string>")
    assert stmt in src
    assert "#include <string>" in src


def test_line_directives_name_the_user_blocks():
    src = snippet_source("a;\nb;", "int s = 0;", "// g")
    assert '#line 1 "<stmt>"' in src and '#line 1 "<setup>"' in src
    assert '#line 1 "<global_setup>"' in src
    lines = src.splitlines()
    # after each user block, the line directive restores the real line number
    for i, line in enumerate(lines):
        if line.startswith('#line') and '"snippet.cpp"' in line:
            assert int(line.split()[1]) == i + 2


def test_empty_setup_and_global_setup_are_omitted():
    src = snippet_source("x;", "", "")
    assert "<setup>" not in src and "<global_setup>" not in src


def test_an_include_in_setup_or_stmt_is_refused_naming_its_line():
    import pytest

    import torchmark

    for setup, stmt, where in (("int a = 0;\n  #include <vector>", "a;", "setup, line 2"),
                               ("", "# include <map>\nx;", "stmt, line 1")):
        with pytest.raises(ValueError, match=f"C\\+\\+ {where}: .* put it in global_setup"):
            snippet_source(stmt, setup, "")
        with pytest.raises(ValueError, match="put it in global_setup"):
            torchmark.Timer(stmt, setup=setup, language="cpp")
    snippet_source("x;", "int x = 0;  // #include is fine in a comment", "#include <map>")
