import pytest

from torchmark.suite import GroupedBenchmark, GroupedVariants, materialize, parse_stmts
from torchmark.suite.variants import parse_block

PY = """
    # @setup
    x = torch.ones((4, 4))
    y = torch.ones(
        (4, 4))

    # @add
    x + y
    torch.add(x, y,
              alpha=2)
    # a comment, not a case

    # @view
    x.view(-1)
"""

CPP = """
    // @global_setup
    #include <vector>
    int helper() { return 1; }
    // @setup
    auto x = torch::ones({4, 4});
    auto y = torch::ones({4, 4});
    // @add
    x + y;
    torch::add(x, y, 2);
    // @only C++
    helper();
"""


def test_parse_block_groups_statements_and_setup():
    groups, setup, global_setup = parse_block(PY, "python")
    assert list(groups) == ["add", "view"]
    assert groups["add"] == ["x + y", "torch.add(x, y,\n          alpha=2)"]
    assert setup == "x = torch.ones((4, 4))\ny = torch.ones(\n    (4, 4))"
    assert global_setup == ""
    groups, setup, global_setup = parse_block(CPP, "cpp")
    assert global_setup == "#include <vector>\nint helper() { return 1; }"
    assert list(groups) == ["add", "only C++"]


def test_grouped_variants_pairs_languages_by_label_and_line():
    variants = GroupedVariants(PY, CPP)
    assert list(variants) == ["add", "view", "only C++"]
    add = variants["add"]
    assert list(add) == ["x + y", "torch.add(x, y,"]
    first = add["x + y"]
    assert isinstance(first, GroupedBenchmark)
    assert (first.py_fwd_stmt, first.cpp_fwd_stmt) == ("x + y", "x + y;")
    assert first.setup.global_setup.startswith("#include <vector>")
    assert isinstance(variants["view"], GroupedBenchmark)  # one statement: no sub-label
    assert variants["view"].cpp_fwd_stmt == ""
    assert variants["only C++"].py_fwd_stmt == ""
    ids = [c.id for c in materialize({"V": variants})]
    assert ids == ["V/add/x + y [py eager fwd t1]", "V/add/x + y [cpp eager fwd t1]",
                   "V/add/torch.add(x, y, [py eager fwd t1]",
                   "V/add/torch.add(x, y, [cpp eager fwd t1]",
                   "V/view [py eager fwd t1]", "V/only C++ [cpp eager fwd t1]"]


def test_brackets_keep_a_statement_together():
    groups, _, _ = parse_block("# @cat\ntorch.cat([\nx,\n])\ntorch.stack([x, x])", "python")
    assert groups["cat"] == ["torch.cat([\nx,\n])", "torch.stack([x, x])"]


def test_brackets_inside_literals_and_comments_do_not_join_statements():
    groups, _, _ = parse_block('# @split\ns.split("(")\ns.split("b")  # (\ns.split(\'[\')',
                               "python")
    assert groups["split"] == ['s.split("(")', 's.split("b")  # (', "s.split('[')"]
    groups, _, _ = parse_block('// @find\ns.find("(");\ns.find(\'{\');  // (\n'
                               's.find("b"); /* [ */', "cpp")
    assert groups["find"] == ['s.find("(");', "s.find('{');  // (", 's.find("b"); /* [ */']
    groups, _, _ = parse_block("// @sep\nf(10'000);\ng(0x1'0);", "cpp")  # digit separators
    assert groups["sep"] == ["f(10'000);", "g(0x1'0);"]


def test_variants_take_thread_counts():
    variants = GroupedVariants("# @a\nx", num_threads=(1, 2))
    assert [c.auto_labels.num_threads for c in variants["a"].cases()] == [1, 2]
    with pytest.raises(ValueError, match="^GroupedVariants: 'a', 'x': num_threads must be"):
        GroupedVariants("# @a\nx", num_threads=0)


@pytest.mark.parametrize("py, cpp, fragment", [
    ("x + 1", "", "before any '@label'"),
    ("# @a\nx\n# @a\ny", "", "appears twice"),
    ("# @global_setup\nimport os\n# @a\nx", "", "C++ block only"),
    ("# @a\nx\nx", "", "appears twice under label"),
    ("# @\nx", "", "empty @label"),
    ("# @setup\nx = 1", "", "no '@label' groups"),
    ("# @a\n# only a comment", "", "has no statements"),
    ("# @a\nx + 1\nx * 2", "// @a\nx * 2;", "2 Python statement(s) and 1 C++"),
    ("# @Add\nx + 1", "// @add\nx + 1;", "differ only in case"),
])
def test_variant_errors(py, cpp, fragment):
    with pytest.raises(ValueError, match="GroupedVariants") as e:
        GroupedVariants(py, cpp)
    assert fragment in str(e.value)


def test_parse_stmts_splits_two_columns():
    table = """
        Python                   | C++
        ------------------------ | ------------------------
        # @setup                 | // @setup
        x = torch.ones(2)        | auto x = torch::ones({2});
                                 |
        # @neg                   | // @neg
        -x                       | -x;
    """
    py, cpp = parse_stmts(table)
    assert py == "# @setup\nx = torch.ones(2)\n\n# @neg\n-x"
    assert cpp == "// @setup\nauto x = torch::ones({2});\n\n// @neg\n-x;"
    assert parse_stmts("# @a\nx") == ("# @a\nx", "")
    with pytest.raises(ValueError, match="column"):
        parse_stmts("a | b\n--- | ---\nabc ; def\n")


def test_table_rows_pair_row_by_row_and_a_one_sided_row_is_one_language():
    from torchmark.suite import materialize
    from torchmark.suite.variants import GroupedVariants, parse_stmts

    py, cpp = parse_stmts(r"""
        Python                                   | C++
        ---------------------------------------- | ----------------------------------------
                                                 | // @global_setup
                                                 | #include <vector>
        # @setup                                 | // @setup
        x = torch.ones((4, 4))                   | auto x = torch::ones({4, 4});
        # @ops                                   | // @ops
        x.abs()                                  | x.abs();
        x.neg()                                  |
        x.sin()                                  | x.sin();
                                                 | x.cos();
    """)
    got = [(c.id, c.timer_args.stmt) for c in materialize({"V": GroupedVariants(py, cpp)})]
    assert got == [("V/ops/x.abs() [py eager fwd t1]", "x.abs()"),
                   ("V/ops/x.abs() [cpp eager fwd t1]", "x.abs();"),
                   ("V/ops/x.neg() [py eager fwd t1]", "x.neg()"),
                   ("V/ops/x.sin() [py eager fwd t1]", "x.sin()"),
                   ("V/ops/x.sin() [cpp eager fwd t1]", "x.sin();"),
                   ("V/ops/x.cos() [cpp eager fwd t1]", "x.cos();")]


def test_blocks_written_apart_pair_statement_by_statement():
    # a comment or blank line on one side must not shift the pairs
    from torchmark.suite import materialize
    from torchmark.suite.variants import GroupedVariants

    py = "# @setup\nx = torch.ones(4)\n# @ops\nx.abs()\nx.neg()\nx.sin()\n"
    cpp = ("// @setup\nauto x = torch::ones({4});\n// @ops\n// abs, neg\nx.abs();\n\nx.neg();\n"
           "x.sin();\n")
    got = [(c.id, c.timer_args.stmt) for c in materialize({"V": GroupedVariants(py, cpp)})]
    assert got == [("V/ops/x.abs() [py eager fwd t1]", "x.abs()"),
                   ("V/ops/x.abs() [cpp eager fwd t1]", "x.abs();"),
                   ("V/ops/x.neg() [py eager fwd t1]", "x.neg()"),
                   ("V/ops/x.neg() [cpp eager fwd t1]", "x.neg();"),
                   ("V/ops/x.sin() [py eager fwd t1]", "x.sin()"),
                   ("V/ops/x.sin() [cpp eager fwd t1]", "x.sin();")]
