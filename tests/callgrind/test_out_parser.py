"""The callgrind.out parser: name compression, inlined files, calls, inclusive costs."""

from __future__ import annotations

import pytest

from torchmark.callgrind.out_parser import (
    CallgrindFormatError,
    parse_callgrind_file,
    parse_callgrind_text,
)

SAMPLE = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 600

ob=(1) /lib/libc.so
fl=(1) malloc.c
fn=(1) malloc
10 300
+2 100

ob=(2) /bin/app
fl=(2) main.c
fn=(2) main
5 50
cob=(1)
cfi=(1)
cfn=(1)
calls=3 10
6 400
fi=(3) inline.h
7 25
fe=(2)
8 25

fn=(3) helper
* 100
cfn=(1)
calls=1 10
9 50
"""


def test_exclusive_inclusive_and_total():
    p = parse_callgrind_text(SAMPLE)
    exclusive = {fn: c for c, fn in p.exclusive}
    assert exclusive == {
        "malloc.c:malloc [/lib/libc.so]": 400,
        "main.c:main [/bin/app]": 75,
        "inline.h:main [/bin/app]": 25,
        "main.c:helper [/bin/app]": 100,
    }
    assert p.total == 600 == p.exclusive.sum()
    inclusive = {fn: c for c, fn in p.inclusive}
    assert inclusive["main.c:main [/bin/app]"] == 75 + 400
    assert inclusive["inline.h:main [/bin/app]"] == 25
    assert inclusive["main.c:helper [/bin/app]"] == 100 + 50
    assert not p.exclusive.inclusive and p.inclusive.inclusive
    assert [c for c, _ in p.exclusive] == sorted((c for c, _ in p.exclusive), reverse=True)


def test_summary_mismatch_is_an_error():
    with pytest.raises(CallgrindFormatError, match="summary says 999"):
        parse_callgrind_text(SAMPLE.replace("summary: 600", "summary: 999"))


def test_unknown_name_id_and_not_callgrind(tmp_path):
    with pytest.raises(CallgrindFormatError, match=r"\(7\)"):
        parse_callgrind_text("events: Ir\nfn=(7)\n1 2\n")
    path = tmp_path / "x.out"
    path.write_text("hello\n")
    with pytest.raises(CallgrindFormatError, match="x.out: not a callgrind output file"):
        parse_callgrind_file(path)


def test_two_position_columns_and_hex():
    text = "positions: instr line\nevents: Ir\nfn=(1) f\n0x10 3 0x20\n+4 * 5\n"
    p = parse_callgrind_text(text)
    assert p.total == 0x20 + 5


def test_inclusive_rows_holding_the_whole_dump_are_left_out():
    # `outer` calls everything else: its inclusive count is the dump's total (as torch's
    # reading of callgrind_annotate, such rows are dropped); the exclusive rows all stay
    text = SAMPLE.replace("summary: 600", "summary: 610") + \
        "\nfn=(4) outer\n1 10\ncfn=(2)\ncalls=1 5\n2 475\ncfn=(3)\ncalls=1 9\n3 125\n" \
        "cfn=(1)\ncalls=1 10\n4 0\n"
    p = parse_callgrind_text(text)
    assert p.total == 610 == p.exclusive.sum()
    assert "main.c:outer [/bin/app]" in {fn for _, fn in p.exclusive}
    assert "main.c:outer [/bin/app]" not in {fn for _, fn in p.inclusive}
    assert {fn: c for c, fn in p.inclusive}["main.c:main [/bin/app]"] == 475
