"""C++ snippets compiled for real (g++ runs in CI): timing, cache, errors, callgrind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

import torchmark
from torchmark import CompileError
from torchmark.cpp import SnippetError, default_builder

from conftest import deliverable_sigint

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                       reason="no C++ compiler"),
]

MUL = ("x * y;", "auto x = torch::ones({128}); auto y = torch::ones({128});")


@pytest.fixture(scope="module")
def mul_timer():
    timer = torchmark.Timer(*MUL, language="cpp")
    timer.timeit(1)  # compile (or load from the cache)
    return timer


def test_cpp_time_is_positive_and_below_python(mul_timer):
    cpp = mul_timer.blocked_autorange(min_run_time=0.2)
    py = torchmark.Timer("x * y", "x = torch.ones(128); y = torch.ones(128)") \
        .blocked_autorange(min_run_time=0.2)
    from torchmark.verdicts import Side, judge

    assert cpp.median > 0
    # without Python's call overhead C++ takes a fraction of the time: on a quiet
    # machine "faster", under load possibly "unsure", never "slower"
    assert judge(Side(py.times), Side(cpp.times), threshold=0.1).kind != "slower"
    assert cpp.task_spec.stmt == "x * y;"


def test_language_spellings():
    for language in ("cpp", "c++", torchmark.Language.CPP):
        assert torchmark.Timer(*MUL, language=language).language is torchmark.Language.CPP


def run_in_new_process(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=600, check=False)


def test_cache_hit_in_a_second_process_runs_no_compiler(mul_timer, tmp_path):
    log = tmp_path / "compiler-calls.log"
    from torchmark.cpp.compile_cache import cxx_compiler

    real = shutil.which(cxx_compiler())  # the compiler the cached build was made with
    fake = tmp_path / "g++"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then exec {real} --version; fi\n'
                    f'echo "$@" >> {log}\nexit 1\n')
    fake.chmod(0o755)
    env = dict(os.environ, CXX=str(fake))
    proc = run_in_new_process(f"""
        import torchmark
        m = torchmark.Timer(*{MUL!r}, language="cpp").timeit(100)
        print(m.median)
    """, env)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.strip()) > 0
    assert not log.exists(), log.read_text()


@pytest.mark.slow
def test_two_processes_building_one_snippet(tmp_path):
    token = uuid.uuid4().hex
    code = f"""
        import torchmark
        t = torchmark.Timer("x + y; // {token}", "auto x = torch::ones({{4}}); auto y = x;",
                            language="cpp")
        print(t.timeit(10).median > 0)
    """
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "True"


def test_syntax_error_is_reported_at_the_users_line():
    timer = torchmark.Timer("auto a = x;\nauto b = x *;", "auto x = torch::ones({2});",
                            language="cpp")
    with pytest.raises(CompileError) as info:
        timer.timeit(1)
    assert "<stmt>:2:13:" in str(info.value)  # the user's line and column
    assert "error" in str(info.value)


def test_runtime_errors_and_global_setup():
    failing = torchmark.Timer("x;", "auto x = torch::mm(torch::ones({2, 3}), torch::ones({2, 3}));",
                              language="cpp")
    with pytest.raises(SnippetError, match="C\\+\\+ setup failed"):
        failing.timeit(1)
    # global_setup at file scope, and num_threads honoured inside the snippet; the names
    # the generated code uses for itself (worker, channel, fail, num_threads, serve) are
    # the user's to take, as in torch
    snippet = dict(stmt="auto v = fail(x) + channel + num_threads + serve;\n"
                        "TORCH_CHECK(at::get_num_threads() == 2);\n"
                        "TORCH_CHECK(++worker <= 50, \"state shared with another timer\");",
                   setup="int x = 3; int num_threads = 1; int serve = 2;", language="cpp",
                   num_threads=2,
                   global_setup="#include <vector>\nstatic int worker = 0, channel = 4;\n"
                                "static int fail(int v) { return 2 * v; }")
    helper = torchmark.Timer(**snippet)
    assert helper.timeit(30).median > 0
    # a second timer of the same snippet has state of its own (calls starts again at 0)
    assert torchmark.Timer(**snippet).timeit(30).median > 0


def test_an_error_reported_outside_the_users_lines_is_still_shown():
    from torchmark.cpp.compile_cache import _user_errors

    output = ("<stmt>:1:5: note: candidate: 'int worker'\n"
              "snippet.cpp:40:7: error: reference to 'worker' is ambiguous\n"
              "In file included from x.h:1:\nsnippet.cpp:41:1: note: something\n")
    shown = _user_errors(output)
    assert "error: reference to 'worker' is ambiguous" in shown and "<stmt>:1:5" in shown
    assert "snippet.cpp:41:1: note" not in shown


@pytest.mark.valgrind
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_cpp_callgrind_counts_repeat(mul_timer):
    stats = mul_timer.collect_callgrind(number=100, repeats=3)
    totals = [s.counts() for s in stats]
    assert all(t > 0 for t in totals)
    assert (max(totals) - min(totals)) / min(totals) <= 0.005
    assert stats[0].baseline_exclusive_stats.sum() == 0  # no Python loop to subtract
    python = torchmark.Timer("x * y", "x = torch.ones(128); y = torch.ones(128)") \
        .collect_callgrind(number=100)
    assert totals[0] < python.counts()


@pytest.mark.valgrind
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_cpp_callgrind_failure_after_the_warm_up_keeps_its_message():
    from torchmark.callgrind.collector import CallgrindError

    late = torchmark.Timer('if (++calls > 25) throw std::runtime_error("late boom");',
                           global_setup="static int calls = 0;", language="cpp")
    with pytest.raises(CallgrindError, match="late boom") as raised:
        late.collect_callgrind(number=10)  # 20 warm-up calls, then the counted ones
    assert not raised.value.crashed


def test_cache_info_and_clear(tmp_path, capsys, monkeypatch):
    from torchmark.cli.main import main

    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "C++ snippets:" in out and "cache folder:" in out
    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path / "c"))
    (tmp_path / "c" / "cpp" / "snippet-x").mkdir(parents=True)
    (tmp_path / "c" / "cpp" / "snippet-x" / "libsnippet.so").write_bytes(b"1234")
    failed = tmp_path / "c" / "cpp" / "pch-failed"  # a header whose build failed
    failed.mkdir()
    (failed / "error.log").write_text("cc1plus: out of memory")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "C++ snippets: 1" in out
    assert "precompiled header: pch-failed failed to build" in out
    (tmp_path / "c" / "notes.txt").write_text("someone else's")  # not torchmark's
    busy = tmp_path / "c" / "cpp" / "snippet-busy"
    busy.mkdir()
    import fcntl

    with open(busy / ".lock", "a") as lock:  # another process is building this one
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert main(["cache", "clear"]) == 0
    assert "1 build(s) in progress kept" in capsys.readouterr().out
    assert not (tmp_path / "c" / "cpp" / "snippet-x").exists() and busy.exists()
    assert (tmp_path / "c" / "notes.txt").read_text() == "someone else's"
    assert default_builder() is not None


def test_a_killed_header_build_does_not_block_the_next(tmp_path):
    from torchmark.cpp.compile_cache import _builder_alive

    marker = tmp_path / ".building"
    marker.write_text(str(os.getpid()))
    assert _builder_alive(marker)
    gone = subprocess.Popen(["true"])
    gone.wait()
    marker.write_text(str(gone.pid))
    assert not _builder_alive(marker)


def test_precompiled_headers_of_removed_torch_installs_are_named_and_removed(
        tmp_path, capsys, monkeypatch):
    from torchmark.cli.main import main
    from torchmark.cpp.compile_cache import PCH_IDENTITY, remove_stale_pch

    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path / "c"))
    import socket

    cpp = tmp_path / "c" / "cpp"
    installed = tmp_path / "venv" / "torch"
    installed.mkdir(parents=True)
    (installed / "version.py").write_text("__version__ = '2.14.0+cpu'\n")
    here = socket.gethostname()
    for name, identity in (
            ("pch-gone", f"torch 2.13.0 at {tmp_path / 'old-venv' / 'torch'}\nhost: {here}"),
            ("pch-upgraded", f"torch 2.13.0+cpu at {installed}\nhost: {here}"),
            ("pch-here", f"torch 2.14.0+cpu at {installed}\nhost: {here}"),
            ("pch-elsewhere", f"torch 2.13.0 at {tmp_path / 'old-venv'}\nhost: not-{here}"),
            ("pch-old", None)):
        (cpp / name).mkdir(parents=True)
        (cpp / name / "torchmark_pch.h.gch").write_bytes(b"x" * 1000)
        if identity:
            (cpp / name / PCH_IDENTITY).write_text(identity + "\n")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"pch-gone, 0.0 MB, torch 2.13.0 at {tmp_path / 'old-venv' / 'torch'} (gone: " \
           "stale)" in out
    assert f"pch-upgraded, 0.0 MB, torch 2.13.0+cpu at {installed} (gone: stale)" in out
    assert f"pch-here, 0.0 MB, torch 2.14.0+cpu at {installed}\n" in out
    assert "pch-elsewhere, 0.0 MB, torch 2.13.0 at" in out  # another machine's: not judged
    assert "pch-old, 0.0 MB, unrecorded" in out
    assert [p.name for p, _ in remove_stale_pch()] == ["pch-gone", "pch-upgraded"]
    assert main(["cache", "clear", "--stale"]) == 0  # the unrecorded one too
    assert "removed 1 precompiled header(s)" in capsys.readouterr().out
    assert sorted(p.name for p in cpp.iterdir()) == ["pch-elsewhere", "pch-here"]
    assert main(["cache", "clear", "--stale", "--keep-pch"]) == 2


def test_half_written_builds_of_killed_processes_are_removed(tmp_path, capsys, monkeypatch):
    from torchmark.cli.main import main
    from torchmark.cpp.compile_cache import LIBRARY, remove_orphan_builds

    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path / "c"))
    pch, snippet = tmp_path / "c" / "cpp" / "pch-x", tmp_path / "c" / "cpp" / "snippet-y"
    for folder in (pch, snippet):
        folder.mkdir(parents=True)
    (pch / ".torchmark_pch.h.gch.4242").write_bytes(b"x" * 3_000_000)  # a killed build's
    (pch / "torchmark_pch.h").write_text("#include <torch/torch.h>\n")
    (snippet / f".{LIBRARY}.4243").write_bytes(b"x" * 10)
    (snippet / f".{LIBRARY}.{os.getpid()}").write_bytes(b"x")  # this process's own
    assert remove_orphan_builds(snippet, mine=True) == 10
    assert [p.name for p in snippet.iterdir()] == [f".{LIBRARY}.{os.getpid()}"]
    assert main(["cache", "clear", "--stale"]) == 0
    assert "half-written builds of killed processes: 3.0 MB freed" in capsys.readouterr().out
    assert [p.name for p in pch.iterdir()] == ["torchmark_pch.h"]
    assert not list(snippet.iterdir())


def test_a_bundle_snippet_that_does_not_compile_fails_alone():
    # errors the compiler reports outside the user's lines (a `;` missing at the end of
    # a setup shows at the next generated token; an #include moved to the top) still
    # name their snippet, so the other snippets of the bundle build
    from torchmark.cpp.compile_cache import BundleCompileError, default_builder

    snippets = [("auto y = x + 1;", "auto x = torch::ones({2})", ""),  # no `;`
                ("auto y = x + 1;", "auto x = torch::ones({2});",
                 "#include <no_such_header_torchmark.h>"),
                ("auto y = x * 2;", "auto x = torch::ones({2});", "")]
    with pytest.raises(BundleCompileError) as info:  # a missing header stops gcc at once
        default_builder().build_bundle(snippets)
    assert list(info.value.failed) == [1]
    assert "<global_setup:1>:1:10: fatal error: no_such_header" in info.value.failed[1]
    with pytest.raises(BundleCompileError) as info:
        default_builder().build_bundle([snippets[0], snippets[2]])
    assert list(info.value.failed) == [0] and "error:" in info.value.failed[0]
    assert default_builder().build_bundle(snippets[2:]).exists()


# one snippet whose setup does what TM_TEST_MODE says: compiled once for the tests below
MODAL = ("int a = 1;",
         'const char* mode = std::getenv("TM_TEST_MODE");\n'
         'if (mode && std::string(mode) == "return") return 0;\n'
         'if (mode && std::string(mode) == "hang") {\n'
         '  std::fclose(std::fopen(std::getenv("TM_TEST_MARK"), "w"));  // in the hang now\n'
         '  volatile long k = 0; for (;;) k = k + 1;\n'
         '}')


def test_a_setup_that_returns_early_fails_instead_of_hanging(monkeypatch):
    monkeypatch.setenv("TM_TEST_MODE", "return")
    with pytest.raises(SnippetError, match="setup returned before the statement ran"):
        torchmark.Timer(*MODAL, language="cpp").timeit(3)


def test_ctrl_c_stops_a_snippet_that_never_ends(tmp_path):
    import signal
    import time

    torchmark.Timer(*MODAL, language="cpp")._timer.build()  # compiled here, not in the child
    script = tmp_path / "hang.py"
    script.write_text(textwrap.dedent(f"""
        import torchmark
        timer = torchmark.Timer(*{MODAL!r}, language="cpp")
        timer._timer.build()
        print("built", flush=True)
        try:
            timer.timeit(1)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        try:
            timer.timeit(1)
        except Exception as e:
            print(type(e).__name__, e, flush=True)
    """))
    mark = tmp_path / "hanging"
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TM_TEST_MODE": "hang",
                                  "TM_TEST_MARK": str(mark)},
                             preexec_fn=deliverable_sigint)
    assert child.stdout.readline().strip() == "built"
    # into the endless setup (an interrupt landing in timeit's own imports, as it did on
    # a loaded machine after a fixed 3 s, leaves torch half imported)
    deadline = time.monotonic() + 120
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), "the snippet never reached its endless loop"
    time.sleep(0.2)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert out.splitlines() == ["interrupted", "SnippetError this C++ timer was interrupted "
                                "while its snippet ran; make a new Timer"]


@pytest.mark.slow
def test_a_damaged_cached_library_is_built_again(tmp_path):
    path = torchmark.Timer(*MODAL, language="cpp")._timer.build()
    size = os.path.getsize(path)
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"not a shared library" * 50)
    os.replace(garbage, path)  # a new file: a process that mapped the old one keeps it
    assert torchmark.Timer(*MODAL, language="cpp").timeit(3).median > 0
    assert os.path.getsize(path) == pytest.approx(size, rel=0.1)


def test_a_cpp_timer_leaves_the_callers_thread_count_alone():
    code = ("import torch, torchmark\n"
            f"torchmark.Timer(*{MUL!r}, language='cpp', num_threads=1).timeit(3)\n"
            "print(torch.get_num_threads())")
    expected = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                              capture_output=True, text=True, check=True).stdout
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert got == expected


FIRST_OR_CACHED = """
import json, sys
from torchmark import Timer
m = Timer(sys.argv[1], "auto x = torch::ones({77});", language="cpp").blocked_autorange(
    min_run_time=0.5)
print(json.dumps({"times": list(m.times), "number": m.number_per_run}))
"""


@pytest.mark.compiler
@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="needs a C++ compiler")
@pytest.mark.slow
def test_a_new_snippets_first_measurement_agrees_with_a_cached_one():
    """The compile (and a header build it starts) is done before calibration: a fresh
    process's first measurement of a new snippet read 15.9 us with a block of 1 while the
    compile ran beside it, the cached one 2.3 us with blocks of 1000. The block size is
    the bug's signature; the two runs' times are judged by the verdict engine at a
    threshold of 200%: the bug's 5-7x reads slower, while two runs of a 2 us statement
    on a loaded machine (one read 4.0 us and the other 8.3 us under xdist) do not."""
    import json
    import random

    from torchmark.verdicts import Side, judge

    stmt = f"x.add_({random.randrange(10**6) + 0.25});"  # new to the cache
    run = [sys.executable, "-c", FIRST_OR_CACHED, stmt]
    first = subprocess.run(run, capture_output=True, text=True, timeout=600, check=True)
    cached = subprocess.run(run, capture_output=True, text=True, timeout=600, check=True)
    a, b = (json.loads(p.stdout.strip().splitlines()[-1]) for p in (cached, first))
    assert b["number"] >= a["number"] / 10, (first.stdout, cached.stdout)
    verdict = judge(Side(a["times"]), Side(b["times"]), threshold=2.0)
    assert verdict.kind != "slower", verdict.reason
