"""Compare: torch's table layout (golden files and side by side), other formats, pickling."""

from __future__ import annotations

import csv
import io
import os
import pickle
from pathlib import Path

import pytest

from torchmark import Compare

from conftest import make_measurement
from fixtures_compare import ab_results, batched_dot_results, to_torch

GOLDEN = Path(__file__).parent / "golden"
STYLES = ("plain", "trimmed", "colorized", "rowwise", "warnings")


def styled(cls, results, style):
    c = cls(results)
    if style != "plain":
        c.trim_significant_figures()
    if style == "colorized":
        c.colorize()
    elif style == "rowwise":
        c.colorize(rowwise=True)
    elif style == "warnings":
        c.highlight_warnings()
    return c


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TORCHMARK_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("style", STYLES)
def test_golden_tables(style):
    check_golden(f"batched_dot_{style}.txt", str(styled(Compare, batched_dot_results(), style)))
    check_golden(f"ab_{style}.txt", str(styled(Compare, ab_results(), style)))


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("data", [batched_dot_results, ab_results,
                                  lambda: batched_dot_results(env="E")])
def test_identical_to_torch(style, data, monkeypatch):
    """Torch's tables, but for the deliberate difference (docs/compat.md): a trimmed cell
    keeps at least two significant figures. (These envs are given in name order, so the
    other difference, envs kept in the order given, does not show.)"""
    from torch.utils.benchmark import Compare as TorchCompare
    from torch.utils.benchmark.utils.common import Measurement as TorchMeasurement

    own = TorchMeasurement.significant_figures
    monkeypatch.setattr(TorchMeasurement, "significant_figures",
                        property(lambda self: max(own.fget(self), 2)))
    results = data()
    assert str(styled(Compare, results, style)) == str(styled(TorchCompare, to_torch(results),
                                                              style))


def test_trimming_keeps_two_figures_and_envs_keep_their_order():
    import re

    noisy = [make_measurement(1.8e-6, spread=0.4, env="before", description="x"),
             make_measurement(3.0e-6, spread=0.4, env="after", description="x", seed=1)]
    assert {m.significant_figures for m in noisy} == {1}  # what torch trims to: "2 | 3"
    c = Compare(noisy)
    c.trim_significant_figures()
    lines = str(c).splitlines()
    before = next(i for i, line in enumerate(lines) if "(before)" in line)
    after = next(i for i, line in enumerate(lines) if "(after)" in line)
    assert before < after, lines  # as given, not by name
    for i in (before, after):
        assert re.search(r"\|\s+\d\.\d\s*$", lines[i]), lines[i]


def test_colour_codes_mark_best_and_worst():
    c = styled(Compare, batched_dot_results(), "colorized")
    text = str(c)
    assert "\033[92m\033[1m" in text  # best
    assert "\033[31m\033[1m" in text  # >= 5x the best in the column
    assert "\033[" not in c.render(color=False)


def test_pickle_round_trip_gives_same_table():
    results = batched_dot_results()
    assert str(Compare(results)) == str(Compare(pickle.loads(pickle.dumps(results))))
    c = styled(Compare, results, "colorized")
    assert str(pickle.loads(pickle.dumps(c))) == str(c)


def test_one_table_per_label_and_extend():
    a = [make_measurement(1e-6, label="A", description="x")]
    b = [make_measurement(2e-3, label="B", description="x")]
    c = Compare(a)
    c.extend_results(b)
    text = str(c)
    assert text.index(" A ") < text.index(" B ")
    assert "Times are in microseconds (us)." in text
    assert "Times are in milliseconds (ms)." in text


def test_extend_rejects_non_measurements():
    with pytest.raises(ValueError, match="result 1: builtins.int is not a Measurement"):
        Compare([make_measurement(1e-6), 3])


def test_missing_description_and_mixed_env_render():
    # torch raises on both (len(None); sorting None against str)
    results = [make_measurement(1e-6, env=None), make_measurement(2e-6, env="B", seed=3)]
    text = str(Compare(results))
    assert "(Unspecified env)" in text and "(B)" in text


def test_an_empty_env_at_the_top_of_a_group_is_not_shown_as_torch():
    import torch.utils.benchmark as tb

    import torchmark

    def table(lib):
        def m(env, t):
            return lib.Measurement(1, [t], lib.TaskSpec("x", "pass", label="L", sub_label="a",
                                                        description="d", env=env))
        return str(lib.Compare([m("", 1e-5), m("X", 2e-5)]))
    ours = table(torchmark)
    assert ours == table(tb)
    assert "()" not in ours and "(X)" in ours


def test_markdown():
    c = styled(Compare, batched_dot_results(), "colorized")
    md = c.to_markdown()
    lines = md.splitlines()
    assert lines[0] == "**Batched dot**"
    assert lines[2] == "| threads |  | mul/sum | bmm |"
    assert lines[3] == "|---|---|---:|---:|"
    assert "| 1 | [1, 1] | **6** | **10** |" in lines
    assert "| 1 | [64, 64] | 14 | 15 |" in lines
    assert lines[-1] == "Times are in microseconds (us)."
    check_golden("batched_dot.md", md)


def test_markdown_with_env_column():
    md = Compare(ab_results()).to_markdown()
    assert "| threads | env |  | [1, 1] | [1024, 10000] | [10000, 1] |" in md
    assert "(environment A: mul/sum)" in md


def test_csv_is_long_form_in_seconds():
    results = batched_dot_results()
    rows = list(csv.DictReader(io.StringIO(Compare(results).to_csv())))
    assert len(rows) == len(results)
    first = rows[0]
    assert (first["label"], first["num_threads"], first["row"], first["column"]) == (
        "Batched dot", "1", "[1, 1]", "mul/sum")
    assert float(first["median_s"]) == pytest.approx(5.8e-6, rel=0.02)
    assert first["unit"] == "us" and first["samples"] == "12"


def test_html():
    html = styled(Compare, ab_results(), "colorized")._repr_html_()
    assert html.startswith("<div><table") and "<caption>Batched dot</caption>" in html
    assert "color:#1a7f37" in html  # best cell
    assert "environment A: mul/sum" in html
    assert "<script" not in Compare([make_measurement(1e-6, label="<script>")])._repr_html_()


def test_torch_measurements_join_a_torchmark_table():
    """Results pickled with torch.utils.benchmark still compare (copied into torchmark's)."""
    import torch.utils.benchmark as torch_benchmark

    import torchmark

    theirs = pickle.loads(pickle.dumps(torch_benchmark.Timer(
        "x + 1", "x = torch.ones(3)", label="add", env="torch").timeit(50)))
    ours = torchmark.Timer("x + 1", "x = torch.ones(3)", label="add", env="torchmark").timeit(50)
    table = str(torchmark.Compare(r for r in [theirs, ours]))  # a generator is fine too
    assert "(torch)" in table and "(torchmark)" in table
    merged = torchmark.Measurement.merge([theirs, theirs])
    assert isinstance(merged[0], torchmark.Measurement) and len(merged[0].times) == 2
    with pytest.raises(ValueError, match="result 1: builtins.str is not a Measurement"):
        torchmark.Compare([ours, "x"])
