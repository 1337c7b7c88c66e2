"""The options that choose where a command's work runs: --executor local|ray,
--ray-address, --ray-resources and --retries (suite, ops, fuzz --time)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from torchmark.executors.options import DEFAULT_RETRIES, EXECUTORS


def executor_options(retries_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed([
            click.option("--executor", type=click.Choice(EXECUTORS), default="local",
                         show_default=True,
                         help="Where the cases run: this machine, or a Ray cluster "
                              "(pip install 'torchmark[ray]'; docs/cluster.md)."),
            click.option("--ray-address", metavar="auto|HOST:PORT", default=None,
                         help="The Ray cluster to join: auto (the one this machine "
                              "belongs to) or its head's HOST:PORT [default: start a "
                              "local Ray instance]."),
            click.option("--ray-resources", metavar="JSON", default=None,
                         help="Resources every case asks Ray for besides its CPU (and "
                              "GPU), to pin it to a machine kind: '{\"a100\": 1}'."),
            click.option("--retries", type=click.IntRange(min=0), default=DEFAULT_RETRIES,
                         show_default=True, help=retries_help),
        ]):
            command = option(command)
        return command
    return decorate


def executor_from(executor: str, ray_address: str | None, ray_resources: str | None,
                  retries: int, workers: int = 1, wall: bool = True) -> Any:
    """The executor the options ask for (bad input: a UsageError, exit 2)."""
    from torchmark.executors.make import make_executor

    return make_executor(executor, workers=workers, address=ray_address,
                         resources=ray_resources, retries=retries, wall=wall)


def node_provenance(record: dict[str, Any]) -> Any:
    """The provenance of the node that measured a record (one from Ray carries it), for
    the store to file its results under that machine; None: this machine's."""
    data = record.get("provenance")
    if not isinstance(data, dict):
        return None
    from torchmark.core.provenance import Provenance

    return Provenance.from_dict(data)
