"""Explanations: the exact Python-level profile names the user's function that was made
to do more work, at two commits of a planted repository; compiled function names are
shortened and grouped by library; `explain --collect` counts both commits."""

from __future__ import annotations

import pytest

from torchmark.cli.main import main
from torchmark.demos.planted_repo import plant_repository
from torchmark.rootcause.function_diff import library_group, short_name
from torchmark.rootcause.git_history import Worktrees
from torchmark.rootcause.python_profile import changed_functions, profile_python

from conftest import requires_valgrind


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return plant_repository(tmp_path_factory.mktemp("explain") / "repo", commits=6,
                            first_bad=3, step=0.01)


def test_the_python_profile_names_the_function_made_to_do_more_work(planted):
    with Worktrees(planted.root) as trees:
        before, after = (profile_python(planted.statement, planted.setup,
                                        trees.get(planted.commits[k])) for k in (2, 3))
        again = profile_python(planted.statement, planted.setup, trees.get(planted.commits[2]))
    assert again == before  # exact: the same code, the same profile
    changes = changed_functions(before, after)
    (old, new, delta), (old2, new2, delta2) = changes
    assert (new.file, new.name, new.line) == ("planted/work.py", "work", 10)
    assert delta == 80 and (old.lines, new.lines) == (8003, 8083)  # 40 more loop steps
    assert new2.name == "helper" and (old2.calls, new2.calls) == (4000, 4040)
    assert changed_functions(before, again) == []


def test_a_profile_of_code_that_fails_is_a_one_line_error(planted):
    from torchmark.core.errors import MeasurementError

    with pytest.raises(MeasurementError, match="the Python profile failed: NameError"):
        profile_python("nothing_here()", "pass", None)


def test_compiled_function_names_are_shortened_and_grouped():
    name = ("/tmp/build/Python-3.11.7/Objects/obmalloc.c:_PyObject_Free "
            "[/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0]")
    assert short_name(name) == "Objects/obmalloc.c:_PyObject_Free [libpython3.11.so.1.0]"
    assert library_group(name) == "python"
    assert library_group("/src/aten/native/Add.cpp:at::native::add [/x/libtorch_cpu.so]") \
        == "torch"
    assert library_group("???:0x0000000000012345 [/usr/lib/libc.so.6]") == "other"
    kernel = ("???:void c10::function_ref<void (char**, long)>::callback_fn<at::native::"
              "(anonymous namespace)::add_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
              "operator()() const::{lambda(float, float)#1}>(long, char**) [/x/libtorch_cpu.so]")
    assert short_name(kernel) == ("???:void c10::function_ref<void (char**, long)>::callback_fn"
                                  "<at::native::add_kernel(at::TensorIteratorBase&)::λ1::λ1>"
                                  "(…) [libtorch_cpu.so]")
    assert library_group("/home/me/proj/ext.c:spin [/home/me/proj/_ext.so]",
                         ["/home/me/proj"]) == "user"


@pytest.mark.slow
@requires_valgrind
def test_explain_collect_counts_both_commits_and_profiles_them(capsys, planted):
    code = main(["explain", f"commit:{planted.commits[2]}", f"commit:{planted.commits[3]}",
                 "--collect", "--stmt", planted.statement, "-s", planted.setup, "--repo",
                 str(planted.root), "--number", "10", "--top", "5"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].startswith("instructions a run: ") and "(+1.0" in lines[1]
    assert "python +" in lines[2]  # the interpreter ran the longer loop
    assert any("ceval.c:_PyEval_EvalFrameDefault" in line for line in lines)
    python = lines.index("Python functions whose work changed (lines executed a run; "
                         "calls a run):")
    assert lines[python + 1].startswith("  planted/work.py:10 work: lines 8,003 -> 8,083")
    assert lines[-1].startswith("reproduce: torchmark explain commit:")


def test_a_timed_case_without_counts_is_offered_collect(capsys, tmp_path):
    files = []
    for env in ("before", "after"):
        path = tmp_path / f"{env}.json"
        assert main(["timeit", "x * 2", "-s", "x = torch.ones(8)", "--min-run-time", "0.02",
                     "--env", env, "--save", str(path), "--no-store"]) == 0
        files.append(str(path))
    capsys.readouterr()
    code = main(["explain", *files])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "x * 2: no per-function counts stored on both sides; count both commits now " \
           "with `torchmark explain commit:A commit:B --collect" in out
    code = main(["explain", *files, "--case", "nothing*"])
    out, err = capsys.readouterr()
    assert code == 1 and "no instruction-count case is on both sides matching" in err


def _counted_result(total_extra: int):
    """A counted case's Result with per-function counts: 10,000 instructions a run, plus
    `total_extra` / 100 in the interpreter's eval loop."""
    from torchmark.callgrind.function_counts import FunctionCount, FunctionCounts
    from torchmark.callgrind.results import stats_to_result
    from torchmark.callgrind.stats import CallgrindStats
    from torchmark.core.task_spec import TaskSpec

    def counts(extra, inclusive):
        rows = [FunctionCount(900_000 + extra, "/b/Python/ceval.c:_PyEval_EvalFrameDefault "
                                               "[/x/libpython3.11.so.1.0]"),
                FunctionCount(100_000, "/src/aten/native/Add.cpp:at::native::add "
                                       "[/x/libtorch_cpu.so]")]
        return FunctionCounts(tuple(rows), inclusive)

    stats = CallgrindStats(TaskSpec("work()", "from planted.work import work"), 100, False,
                           FunctionCounts((), True), FunctionCounts((), False),
                           counts(total_extra, True), counts(total_extra, False), None,
                           repeat_totals=(1_000_000 + total_extra,) * 3)
    return stats_to_result(stats, functions=True)


def _counted(total_extra: int, tmp_path, name: str):
    """A results file holding `_counted_result(total_extra)`."""
    from torchmark.core.results_file import save_results

    path = tmp_path / f"{name}.jsonl"
    save_results(path, [_counted_result(total_extra)])
    return str(path)


def test_the_gate_says_where_a_slower_count_lives(capsys, tmp_path):
    before, after = _counted(0, tmp_path, "before"), _counted(50_000, tmp_path, "after")
    markdown = tmp_path / "gate.md"
    code = main(["gate", "--baseline", before, "--candidate", after, "--max-slowdown", "1%",
                 "--markdown", str(markdown)])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "instructions a run: 10,000 -> 10,500 (+5.000%)" in out
    assert "+500  python  Python/ceval.c:_PyEval_EvalFrameDefault" in out
    text = markdown.read_text()
    assert "**Why** (case: work())" in text
    assert "- +500  python  Python/ceval.c:_PyEval_EvalFrameDefault [libpython3.11.so.1.0]" \
        in text


def test_regressions_say_where_a_count_step_lives(capsys, tmp_path):
    import dataclasses
    import datetime as dt

    from torchmark.core.provenance import Provenance
    from torchmark.store import Store

    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    base, first = Provenance.capture(env="ci"), dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc)
    for k in range(16):
        run = store.start_run(dataclasses.replace(
            base, git_commit=f"{k:02d}" + "c" * 38,
            started=(first + dt.timedelta(hours=k)).isoformat()))
        store.record([_counted_result(0 if k < 8 else 50_000)], run)
        store.finish_run(run, "ok")
    store.close()
    assert main(["regressions", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "where the change lives (last good run against first bad run)" in out
    assert "instructions a run: 10,000 -> 10,500 (+5.000%)" in out
    assert "+500  python  Python/ceval.c:_PyEval_EvalFrameDefault" in out
