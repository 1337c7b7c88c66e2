import pytest

from torchmark.suite import parse_signature


@pytest.mark.parametrize("text, args, out", [
    ("f(x, w) -> y", ("x", "w"), "y"),
    ("f(x,w)->y", ("x", "w"), "y"),
    ("  f ( x ,  w )   ->   y  ", ("x", "w"), "y"),
    ("f() -> y", (), "y"),
    ("forward(x) -> out_1", ("x",), "out_1"),
])
def test_parses_with_free_spacing(text, args, out):
    sig = parse_signature(text)
    assert sig.args == args and sig.output == out
    assert sig.arg_list == ", ".join(args)


@pytest.mark.parametrize("text, fragment", [
    ("f(x, w) -> y, z", "exactly one output"),
    ("f(x) -> (y, z)", "exactly one output"),
    ("f(x, w)", "not of the form"),
    ("f x -> y", "not of the form"),
    ("f(x, 1w) -> y", "'1w' is not an identifier"),
    ("f(x, x) -> y", "appears twice"),
    ("f(x) -> x", "also an argument"),
    ("f(x) -> y.z", "not an identifier"),
    ("f(x,) -> y", "'' is not an identifier"),
    ("f(lambda) -> y", "'lambda' is not an identifier"),
    ("f(None) -> y", "'None' is not an identifier"),
    ("f(self) -> y", "'self' cannot be an argument"),
    ("f(x) -> class", "not an identifier"),
])
def test_rejects_with_a_reason(text, fragment):
    with pytest.raises(ValueError, match="signature") as e:
        parse_signature(text)
    assert fragment in str(e.value)


def test_rejects_non_strings():
    with pytest.raises(ValueError, match="must be a str"):
        parse_signature(None)
