"""Explanations: the exact Python-level profile names the user's function that was made
to do more work, at two commits of a planted repository; compiled function names are
shortened and grouped by library; `explain --collect` counts both commits."""

from __future__ import annotations

import shlex

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
    assert lines[-1] == "reproduce: " + shlex.join(  # the command that counted both
        ["torchmark", "explain", f"commit:{planted.commits[2][:10]}",
         f"commit:{planted.commits[3][:10]}", "--collect", "--stmt", planted.statement,
         "-s", planted.setup, "--repo", str(planted.root)])


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
    assert "x * 2: wall only, no per-function counts stored; count it and profile its " \
           "Python functions at both commits with\n  torchmark explain commit:" in out
    assert "--collect --stmt 'x * 2' -s 'x = torch.ones(8)' --repo PATH" in out
    code = main(["explain", *files, "--case", "nothing*"])
    out, err = capsys.readouterr()
    assert code == 2 and "no case is on both sides matching 'nothing*'" in err
    assert out == "" and err.count("\n") == 1  # a usage error, nothing printed before it


def test_explain_bisect_reads_bare_commits_as_commit_refs(capsys, tmp_path):
    import dataclasses

    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result
    from torchmark.store import Store

    db = str(tmp_path / "s.db")
    store = Store(db)
    case = Case(id="timeit:x * 2", frontend="timeit", stmt="x * 2", setup="x = 1")
    for commit, level in (("a" * 40, 1e-6), ("b" * 40, 2e-6)):
        run = store.start_run(dataclasses.replace(Provenance.capture(), git_commit=commit))
        store.record([Result(case=case, metric="wall", samples=(level,) * 5)], run)
        store.finish_run(run, "ok")
    store.close()
    assert main(["explain", "commit:aaaaaaaaaa", "commit:bbbbbbbbbb", "--db", db]) == 0
    refs = capsys.readouterr()
    assert main(["explain", "--bisect", "aaaaaaaaaa", "bbbbbbbbbb", "--db", db]) == 0
    assert capsys.readouterr() == refs and "x * 2: wall only" in refs.out


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


def test_the_reproduce_lines_paste_as_they_are_and_a_counted_statement_is_explained(
        capsys, tmp_path):
    """Counts bisect stored of a src-layout project at two commits, beside the same
    statement's wall time: the callgrind command carries the import folder and its own
    line (a shell runs it as pasted); the wall time is not offered --collect again."""
    import dataclasses

    from torchmark.core.provenance import Provenance
    from torchmark.core.results_file import save_results
    from torchmark.rootcause.explain import explain_results

    files = []
    for name, extra, commit in (("before", 0, "a" * 40), ("after", 50_000, "b" * 40)):
        provenance = dataclasses.replace(Provenance.capture(), git_commit=commit)
        counted = _counted_result(extra)
        counted = dataclasses.replace(counted, provenance=provenance,
                                      extra={**counted.extra, "import_path": "src"})
        wall = _timed(dataclasses.replace(counted.case, id="timeit:work", frontend="timeit"),
                      [1.0 + extra / 1e6] * 5, commit=commit)
        path = tmp_path / f"{name}.jsonl"
        save_results(path, [counted, wall])
        files.append(str(path))
    assert main(["explain", *files]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [
        "reproduce, in the repository's top folder at commit aaaaaaaaaa, then at commit "
        "bbbbbbbbbb:",
        "  PYTHONPATH=src torchmark callgrind 'work()' -s 'from planted.work import work'"]
    assert not any("no per-function counts stored" in line for line in lines)
    from torchmark.records import load_results

    found = explain_results(load_results(files[0]), load_results(files[1]))
    assert len(found.counts) == 1 and found.unexplained == []


def _count_step_store(tmp_path) -> str:
    """A store of 16 runs of one counted case, 5% more instructions from the 9th."""
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
    return db


def test_regressions_say_where_a_count_step_lives(capsys, tmp_path):
    db = _count_step_store(tmp_path)
    assert main(["regressions", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "where the change lives (last good run against first bad run)" in out
    assert "instructions a run: 10,000 -> 10,500 (+5.000%)" in out
    assert "+500  python  Python/ceval.c:_PyEval_EvalFrameDefault" in out


def _timed(case, samples, metric="wall", kernels=None, commit="a" * 40):
    """A time Result of `case`; a kernel-time one holds `kernels` (name -> (launches a
    call, seconds a call)) as kernel time stores them."""
    import dataclasses

    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Result

    extra = {}
    if kernels is not None:
        extra["metadata"] = {"clock": "cupti", "kernels": [
            {"name": n, "per_call": k, "seconds": s, "share": 0.0}
            for n, (k, s) in kernels.items()]}
    provenance = dataclasses.replace(Provenance.capture(), git_commit=commit,
                                     git_dirty=False, command=("torchmark", "timeit"))
    return Result(case=case, metric=metric, samples=tuple(samples), provenance=provenance,
                  extra=extra)


def test_a_kernel_swap_and_a_kernel_grown_are_named_with_their_share(capsys, tmp_path):
    from torchmark.core.result import Case
    from torchmark.core.results_file import save_results

    mm = Case(id="timeit:mm", frontend="timeit", stmt="a @ b", device="cuda")
    sm = Case(id="timeit:softmax", frontend="timeit", stmt="x.softmax(-1)", device="cuda")
    gemm32 = "void ampere_sgemm_128x64_nn(float const*, float*)"
    gemm16 = ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_"
              "32x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_"
              "align8::Params)")
    soft = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, "
            "float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, "
            "float const*, int)")
    before = [_timed(mm, [100e-6] * 9, "kernel", {gemm32: (1, 100e-6)}),
              _timed(sm, [20e-6] * 9, "kernel", {soft: (1, 16e-6), "elementwise": (1, 4e-6)})]
    after = [_timed(mm, [40e-6] * 9, "kernel", {gemm16: (1, 40e-6)}, commit="b" * 40),
             _timed(sm, [44e-6] * 9, "kernel", {soft: (1, 40e-6), "elementwise": (1, 4e-6)},
                    commit="b" * 40)]
    files = [tmp_path / "before.jsonl", tmp_path / "after.jsonl"]
    for path, results in zip(files, (before, after), strict=True):
        save_results(path, results)
    assert main(["explain", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "  removed      100 us ->          -  (-100 us, 167%)  ampere_sgemm_128x64_nn\n" in out
    assert ("  added             - ->      40 us  (+40 us, -67%)  cutlass::Kernel2<cutlass_80"
            in out)
    softmax = out[out.index("case: x.softmax(-1)"):]
    assert "kernel time a call: 20 us -> 44 us: slower" in softmax
    assert ("  changed       16 us ->      40 us  (+24 us, 100%)  at::native::"
            "cunn_SoftMaxForward<4, float, float, float, at::native::SoftMaxForwardEpilogue>\n"
            in softmax)
    assert "  same           4 us ->       4 us  (+0 s, 0%)  elementwise" in softmax
    assert f"reproduce (after)  at commit {'b' * 12}: torchmark timeit" in softmax
    # the gate says why its slower kernel-time case is slower, and only that one
    assert main(["gate", "--baseline", str(files[0]), "--candidate", str(files[1])]) == 1
    out = capsys.readouterr().out
    assert "cunn_SoftMaxForward" in out and "ampere_sgemm" not in out


def test_an_ops_sweep_is_explained_by_the_ops_whose_time_changed_most(capsys, tmp_path):
    from torchmark.core.result import Case
    from torchmark.core.results_file import save_results

    def op(shape):
        return Case(id=f"ops:mm|{shape}", frontend="ops", stmt="torch.mm", label="torch.mm",
                    sub_label=shape)

    shapes = ["M=8", "M=64", "M=512"]
    base = {"M=8": 1e-6, "M=64": 10e-6, "M=512": 1e-3}
    grown = {"M=8": 1e-6, "M=64": 30e-6, "M=512": 1e-3}
    jitter = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0]
    files = [tmp_path / "before.jsonl", tmp_path / "after.jsonl"]
    for path, times, commit in ((files[0], base, "a" * 40), (files[1], grown, "b" * 40)):
        save_results(path, [_timed(op(s), [times[s] * j for j in jitter], commit=commit)
                            for s in shapes])
    assert main(["explain", *map(str, files)]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith(
        "ops whose time a call changed most (3 on both sides: 1 slower, 2 "))
    assert out[head + 1].endswith("(+20 us, slower)  torch.mm: M=64")
    assert {out[head + 2].rsplit(": ", 1)[1], out[head + 3].rsplit(": ", 1)[1]} == \
        {"M=8", "M=512"}
    assert out[head + 4].startswith("reproduce (before) at commit aaaaaaaaaaaa: torchmark")


def test_the_report_says_where_a_count_step_lives(tmp_path):
    import json
    import re

    db = _count_step_store(tmp_path)
    page = tmp_path / "report.html"
    assert main(["report", "--db", db, "-o", str(page)]) == 0
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                      page.read_text(), re.S)
    data = json.loads(found.group(1))
    (why,) = data["explanations"]
    change = data["changes"][why["change"]]
    assert change["kind"] == "regression" and change["metric"] == "instructions"
    assert "instructions a run: 10,000 -> 10,500 (+5.000%)" in why["lines"]
    assert any("+500  python  Python/ceval.c:_PyEval_EvalFrameDefault" in line
               for line in why["lines"])
