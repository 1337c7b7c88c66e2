"""A plugin module for the registry tests (`--plugin plugin_ops`)."""

from torchmark.ops import register_op


def double(x):
    return x * 2


def make_scaler(factor):
    return lambda x: x * factor


register_op("test.double", double)
register_op("test.scaler", builder=make_scaler)
