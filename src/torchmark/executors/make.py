"""The executor a command line asks for: the local pool, or a Ray cluster."""

from __future__ import annotations

from typing import Any

from torchmark.core.errors import UsageError
from torchmark.executors.options import (
    DEFAULT_RETRIES,
    EXECUTORS,
    RayOptions,
    parse_address,
    parse_resources,
)


def make_executor(name: str, *, workers: int = 1, address: str | None = None,
                  resources: str | None = None, retries: int = DEFAULT_RETRIES,
                  wall: bool = True) -> Any:
    """The executor for these options: a LocalExecutor of `workers`, or a RayExecutor.
    Ray options without `--executor ray` are refused (they would be ignored)."""
    if name not in EXECUTORS:
        raise UsageError(f"--executor {name!r}: expected one of {', '.join(EXECUTORS)}")
    if name == "local":
        given = [flag for flag, v in (("--ray-address", address),
                                      ("--ray-resources", resources)) if v is not None]
        if given:
            raise UsageError(f"{given[0]} is for --executor ray")
        from torchmark.executors.local import LocalExecutor

        return LocalExecutor(workers)
    options = RayOptions(address=parse_address(address),
                         resources=parse_resources(resources, wall=wall), retries=retries)
    from torchmark.executors.ray_executor import RayExecutor, import_ray

    import_ray()  # missing: the install line now, before any file is touched
    return RayExecutor(options)
