"""The session's end, on the process that reports (pytest-xdist's controller, or the only
process): every test report's Results gathered, then written to --torchmark-json, recorded
in the store as one run, gated against --torchmark-baseline (the session fails when
--torchmark-fail-slower finds a case slower), and shown as tables in the terminal
summary."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any

import pytest

from torchmark.core.errors import TorchmarkError, UsageError, error_line
from torchmark.core.result import Result
from torchmark.pytest_plugin.options import Settings
from torchmark.verdicts import DEFAULT_THRESHOLD

REPORT_ATTR = "torchmark_results"  # a test report's Results, as JSON texts


class BenchmarkSession:
    """A plugin object for the reporting process (see the module docstring)."""

    def __init__(self, settings: Settings, command: list[str]) -> None:
        self.settings = settings
        self.command = command
        self.results: list[Result] = []
        self.baseline: list[Result] | None = None
        self.baseline_runs: tuple[int, ...] = ()  # the store's runs the baseline read
        self.notes: list[str] = []  # what went wrong writing the results
        self.provenance: Any = None
        self.run_id: int | None = None
        self.store_where: str | None = None
        self.gate_report: Any = None
        self.env_differences: list[Any] = []  # the baseline's, allowed and marked
        self.recorder: Any = None  # the run's RunRecorder, entered at the first results
        # while the run records: SIGTERM (a CI job cancelled) ends it as Ctrl-C does, so
        # the run is marked interrupted and its files written (core/signals.py)
        self.sigterm = contextlib.ExitStack()

    def load_baseline(self) -> None:
        """Read --torchmark-baseline now, before this session records a run (`latest`
        means the newest run before it); a UsageError when it names nothing."""
        from pathlib import Path

        from torchmark.regressions.refs import resolve_side

        ref = self.settings.baseline
        assert ref is not None
        store = None
        if not Path(ref).exists():
            from torchmark.store import open as open_store

            store = open_store(self.settings.store)
        try:
            side = resolve_side(ref, store)
            self.baseline = list(side.results)
            self.baseline_runs = side.runs
        finally:
            if store is not None:
                store.close()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: Any) -> None:
        texts = getattr(report, REPORT_ATTR, None)
        if not texts:
            return
        if self.provenance is None:  # the run's: taken as its first benchmark reports
            from torchmark.core.provenance import Provenance

            self.provenance = Provenance.capture(env=self.settings.env,
                                                 command=self.command)
        new = [Result.from_dict(json.loads(text)) for text in texts]
        self.results += new
        if not (self.settings.disabled or self.settings.no_store):
            self._recording().add(new)  # stored as they come: a killed session keeps them

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        if self.settings.disabled:
            return
        if self.settings.json_path:
            from torchmark.records.files import save_results

            try:
                save_results(self.settings.json_path,
                             [r.with_provenance(self.provenance) for r in self.results],
                             append=False)
            except (OSError, TorchmarkError) as e:  # a folder missing, a file locked
                self.notes.append(f"torchmark: --torchmark-json {self.settings.json_path}: "
                                  f"{error_line(e)}")
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.recorder is not None:
            self._finish_run(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
        if self.baseline is not None and self.results and self._comparable(session):
            from torchmark.regressions.comparability import mark_rows
            from torchmark.regressions.gate import gate

            threshold = self.settings.fail_slower
            baseline, unrun = self._of_tests_run(session)
            if unrun:
                self.notes.append(
                    f"torchmark: {len(unrun)} case(s) of the baseline are of tests this "
                    f"session did not run (deselected or not collected), not checked: "
                    + ", ".join(sorted({r.case.title for r in unrun})[:10])
                    + (" ..." if len({r.case.title for r in unrun}) > 10 else ""))
            # with this run's provenance, as `torchmark gate` reads the session's results
            # (two runs of one build are judged so: drift alone is no change)
            candidate = [r.with_provenance(self.provenance) for r in self.results] \
                if self.provenance is not None else self.results
            self.gate_report = gate(baseline, candidate,
                                    max_slowdown=DEFAULT_THRESHOLD if threshold is None
                                    else threshold, histories=self._histories())
            self.gate_report = dataclasses.replace(self.gate_report, rows=mark_rows(
                self.gate_report.rows, self.env_differences))
            # a gate that compared nothing (a baseline of other cases, another metric)
            # fails as one that found a regression: `torchmark gate` refuses it too
            unmatched = not self.gate_report.rows
            if unmatched:
                self.notes.append(
                    f"torchmark: the baseline {self.settings.baseline} holds none of this "
                    f"session's {len(self.results)} benchmark(s) (case id and metric): "
                    "nothing was compared" + (", so --torchmark-fail-slower fails the "
                                              "session" if threshold is not None else ""))
            if threshold is not None and (unmatched or not self.gate_report.passed) and \
                    session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _of_tests_run(self, session: Any) -> tuple[list[Result], list[Result]]:
        """The baseline's results of the tests this session ran (collected and
        selected: a case of one without a result here fails the gate, as a case missing
        from a candidate does), and those of other tests. A pytest case is named by its
        file and its name in the file (pytest_plugin/cases.py); one in a group by its
        name."""
        from torchmark.pytest_plugin.cases import location_of

        places = {location_of(item) for item in session.items}
        names, paths = {name for _, name in places}, {path for path, _ in places}

        def ran(case: Any) -> bool:
            if case.frontend != "pytest" or (case.label, case.sub_label) in places:
                return True
            grouped = case.label not in paths and not case.label.endswith(".py")
            return grouped and case.sub_label in names

        baseline = self.baseline or []
        return ([r for r in baseline if ran(r.case)],
                [r for r in baseline if not ran(r.case)])

    def _comparable(self, session: Any) -> bool:
        """Whether the baseline ran in an environment comparable with this session's
        (regressions/comparability.py); if not, and not --torchmark-allow-env-diff, the
        differences are noted and the session fails as a usage error."""
        from torchmark.regressions.comparability import EnvironmentsDiffer, check_sides

        mine = [r.with_provenance(self.provenance) for r in self.results[:1]] \
            if self.provenance is not None else []
        try:
            self.env_differences = check_sides(
                self.baseline or [], mine, self.settings.allow_env_diff,
                f"the baseline {self.settings.baseline} and this session")
        except EnvironmentsDiffer as refused:
            self.notes += [f"torchmark: {refused}; nothing was compared",
                           *(f"torchmark:   {d.describe()}" for d in refused.differences)]
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return False
        return True

    def _histories(self) -> dict[tuple[str, str], Any]:
        """Each case's A/A history in the store on this machine (none without a store:
        the engine then estimates the drift from the runs)."""
        if self.settings.no_store or self.provenance is None:
            return {}
        from torchmark.regressions.aa_history import history_ratios
        from torchmark.store import open as open_store

        try:
            with open_store(self.settings.store) as store:
                return history_ratios(store, {(r.case.id, r.metric) for r in self.results},
                                      machine=self.provenance.machine.fingerprint,
                                      env=self.provenance.env,
                                      exclude={*self.baseline_runs, *filter(None, [
                                          self.run_id])})
        except Exception as e:  # a store that cannot be read: the runs' own spreads
            self.notes.append(f"torchmark: the store's A/A history could not be read "
                              f"({error_line(e)}); drift estimated from the runs")
            return {}

    def _recording(self) -> Any:
        """The session's run, begun at its first results (store/recorder.py)."""
        if self.recorder is None:
            from torchmark.store.recorder import RunRecorder

            self.recorder = RunRecorder(self.settings.store, tags={"frontend": "pytest"},
                                        provenance=self.provenance).__enter__()
            from torchmark.core.signals import sigterm_as_interrupt

            self.sigterm.enter_context(sigterm_as_interrupt(only_unhandled=True))
        return self.recorder

    def _finish_run(self, interrupted: bool = False) -> None:
        """The session's run ended (interrupted after Ctrl-C or SIGTERM)."""
        recorder, self.recorder = self.recorder, None
        self.sigterm.close()
        if interrupted:
            recorder.status = "interrupted"
        where = getattr(recorder.store, "where", None)
        recorder.__exit__(None, None, None)
        if recorder.run_id is not None:
            self.run_id, self.store_where = recorder.run_id, where

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for note in self.notes:
            terminalreporter.write_line(note, red=True, bold=True)
        if self.settings.disabled or not self.results:
            return
        from torchmark.pytest_plugin.summary import summary_lines

        terminalreporter.write_sep("-", "torchmark")
        for line in summary_lines(self.results, self.baseline, self.gate_report,
                                  self.settings.baseline):
            terminalreporter.write_line(line)
        if self.run_id is not None:
            terminalreporter.write_line(f"torchmark: {len(self.results)} result(s) recorded "
                                        f"as run {self.run_id} of {self.store_where}")
        report = self.gate_report
        if report is not None and self.settings.fail_slower is not None and \
                not report.passed:
            names = ", ".join([*(f"{row.title} ({row.kind})" for row in report.failing),
                               *(f"{name} (missing)" for name in report.missing)])
            terminalreporter.write_line(
                f"torchmark: {len(report.failing) + len(report.missing)} case(s) slower "
                f"than the baseline {self.settings.baseline} by more than "
                f"{self.settings.fail_slower:.1%}, failed, not measured well enough for a "
                f"verdict, or not measured at all (their tests ran without a result): "
                f"{names}", red=True, bold=True)


def start(config: Any, settings: Settings) -> None:
    """Register the session's plugin object (the baseline read first); a bad baseline
    stops pytest with one line."""
    session = BenchmarkSession(settings, ["pytest", *config.invocation_params.args])
    if settings.baseline and not settings.disabled:
        try:
            session.load_baseline()
        except UsageError as e:
            raise pytest.UsageError(f"--torchmark-baseline {settings.baseline}: {e}") \
                from None
        except Exception as e:  # a store that cannot be opened or read, a file unreadable
            raise pytest.UsageError(f"--torchmark-baseline {settings.baseline}: "
                                    f"{error_line(e)}") from None
    config.pluginmanager.register(session, "torchmark-session")
