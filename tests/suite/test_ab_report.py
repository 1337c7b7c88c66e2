import json

import pytest

from torchmark.cli.main import main
from torchmark.suite.ab_report import compare_results, render_markdown, render_text
from torchmark.suite.results import SCHEMA


def record(case_id, per_run, spread=0.0, status="ok"):
    return {"type": "case", "id": case_id, "status": status,
            "error": None if status == "ok" else "boom",
            "instructions": {"per_run": per_run, "spread": spread} if status == "ok" else None}


A = [record("a", 1000), record("b", 2000), record("c", 500), record("gone", 10),
     record("broken", 100)]
B = [record("a", 1005), record("b", 2100), record("c", 400), record("new", 10),
     record("broken", 0, status="failed")]


def test_deltas_sorted_by_size_and_flagged_above_threshold():
    report = compare_results(A, B, threshold=0.01)
    assert [d.id for d in report.deltas] == ["c", "b", "a"]
    assert [round(d.change, 4) for d in report.deltas] == [-0.2, 0.05, 0.005]
    assert [d.id for d in report.flagged] == ["c", "b"]
    assert [d.verdict.kind for d in report.deltas] == ["faster", "slower", "same"]
    assert [d.id for d in compare_results(A, B, threshold=0.06).slower] == []
    assert [d.id for d in compare_results(A, B, threshold=0.04).slower] == ["b"]
    assert report.only_a == ["gone"] and report.only_b == ["new"]
    assert report.failed[0][0] == "broken" and "B: boom" in report.failed[0][1]
    assert report.broken == ["broken"]


def test_text_and_markdown_renderings():
    report = compare_results(A, B)
    text = render_text(report)
    lines = text.splitlines()
    assert lines[0].split() == ["change", "A", "instr/run", "B", "instr/run", "spread",
                                "verdict", "case"]
    assert lines[1].split()[0] == "-20.00%" and lines[1].split()[-2:] == ["faster", "c"]
    assert "only in A (1): gone" in text and "not compared: broken" in text
    md = render_markdown(report)
    assert md.startswith("**Instruction counts**: 3 cases compared, 2 changed by more than 1.0%")
    assert "| +5.00% | 2,000 | 2,100 | 0.00% | slower | `b` |" in md


def test_zero_counts_on_both_sides_are_no_change():
    report = compare_results([record("z", 0)], [record("z", 0)])
    assert report.deltas[0].change == 0.0 and not report.flagged
    assert report.deltas[0].verdict.kind == "same"


def test_change_within_the_repeat_spread_is_unsure():
    report = compare_results([record("a", 1000, spread=0.03)], [record("a", 1020)])
    assert render_text(report).splitlines()[1].split()[-2] == "unsure"
    assert "+2.0%" in report.deltas[0].verdict.reason


def _write(path, records):
    header = {"type": "header", "schema": SCHEMA, "version": 1}
    path.write_text("\n".join(json.dumps(r) for r in [header, *records]) + "\n")


def test_cli_compare_gates_on_growth(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, A)
    _write(b, B)
    assert main(["suite", "compare", str(a), str(b)]) == 0
    capsys.readouterr()
    # a case that counted in A and failed in B fails the gate, whatever the threshold
    assert main(["suite", "compare", str(a), str(b), "--fail-above", "10%"]) == 1
    err = capsys.readouterr().err
    assert "1 case(s) counted in A failed in B: broken" in err and "slower" not in err
    assert main(["suite", "compare", str(a), str(b), "--fail-above", "2%"]) == 1
    err = capsys.readouterr().err
    assert "1 case(s) slower by more than 2.0%: b" in err
    fixed = tmp_path / "fixed.jsonl"
    _write(fixed, [r for r in B if r["id"] != "broken"])
    assert main(["suite", "compare", str(a), str(fixed), "--fail-above", "0.1"]) == 0
    assert main(["suite", "compare", str(a), str(fixed), "--fail-above", "10"]) == 2
    assert main(["suite", "compare", str(a), str(b), "--format", "markdown", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "`c`" in out and "`b`" not in out


@pytest.mark.parametrize("content, message", [
    ('{"type": "header", "schema": "other"}\n', "not a torchmark suite results file"),
    ("not json\n", "holds no torchmark suite results"),
])
def test_cli_compare_bad_files(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    assert main(["suite", "compare", str(bad), str(bad)]) == 2
    assert message in capsys.readouterr().err
    assert main(["suite", "compare", str(tmp_path / "missing"), str(bad)]) == 2


@pytest.mark.parametrize("counts, message", [
    ({"per_run": float("nan")}, "per_run is nan, not a finite number >= 0"),
    ({"per_run": -5.0}, "per_run is -5.0"),
    ({"spread": 0.0}, "per_run is None"),
    ({"per_run": 10.0, "spread": "x"}, "spread is x"),
])
def test_malformed_counts_are_refused_not_waved_through(counts, message):
    good = {"id": "c", "status": "ok", "instructions": {"per_run": 10.0, "spread": 0.0}}
    bad = {"id": "c", "status": "ok", "instructions": counts}
    with pytest.raises(ValueError, match=f"new.jsonl: case 'c': instructions {message}"):
        compare_results([good], [bad], names=("old.jsonl", "new.jsonl"))
    with pytest.raises(ValueError, match="a record's id is 5, not a str"):
        compare_results([{**good, "id": 5}], [good])
