"""Functions the callgrind tests send to the counted process by name.

A module of its own, importing nothing: the counted process imports it, and importing a
test module would bring pytest along.
"""


def scale(a):
    return a * 2
