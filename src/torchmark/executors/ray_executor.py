"""The Ray executor: each item a Ray task with its resources, placed by Ray; outcomes
handed back as tasks finish; node failures retried, a case's own error never.

A task asks for the item's CPUs and GPUs (`num_cpus=1` for a wall-time case, so two
timings never share a core; `num_gpus=1` for a CUDA case) plus the `resources` given
(`--ray-resources`: pin the work to a machine kind). A task lost with its worker or node
(the worker process died, the node was lost, the memory monitor killed it) is submitted
again, up to `retries` times, wherever Ray places it (a lost node is not chosen again);
an item that raised is its own failure, recorded and not retried. At most `window`
tasks are submitted at a time. Ctrl-C cancels the tasks in flight (their workers are
killed) and is re-raised: every outcome handed back before stays. Ray is imported only
here, when a run starts (`pip install torchmark[ray]`)."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import logging
import math
import os
import socket
from collections.abc import Iterable
from typing import Any

from torchmark.core.errors import UsageError, error_line
from torchmark.core.provenance import Provenance
from torchmark.executors.base import Item, Job, OnOutcome, Outcome
from torchmark.executors.options import RayOptions

INSTALL_LINE = "pip install 'torchmark[ray]'"
# ray.exceptions that mean the worker or the node went, not the item: worth a retry
NODE_FAILURES = ("WorkerCrashedError", "NodeDiedError", "ActorDiedError",
                 "ActorUnavailableError", "LocalRayletDiedError", "ObjectLostError",
                 "OwnerDiedError", "ObjectReconstructionFailedError",
                 "ObjectFetchTimedOutError", "OutOfMemoryError")
WAIT_S = 0.5  # how often the driver wakes while waiting (Ctrl-C is seen then)
CONNECT_TIMEOUT_S = 5.0


class RayMissing(UsageError):
    """--executor ray without Ray installed."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayMissing(f"--executor ray needs Ray: {INSTALL_LINE}") from None
    return ray


@dataclasses.dataclass(frozen=True)
class RayShared:
    """A value in Ray's object store, read where it is needed."""

    ref: Any

    def get(self) -> Any:
        import ray

        return ray.get(self.ref)


def _noted_cluster() -> str:
    """The address `--ray-address auto` means: $RAY_ADDRESS, else the cluster Ray noted in
    its temporary folder (ray_current_cluster); a ConnectionError (one line) when there
    is none."""
    import tempfile

    noted = os.environ.get("RAY_ADDRESS")
    if not noted:
        path = os.path.join(os.environ.get("RAY_TMPDIR", tempfile.gettempdir()), "ray",
                            "ray_current_cluster")
        try:
            with open(path, encoding="utf-8") as f:
                noted = f.read().strip()
        except OSError:
            noted = ""
    if not noted or ":" not in noted or noted.startswith(("ray://", "local")):
        raise ConnectionError("--ray-address auto: no running Ray cluster is noted on this "
                              "machine ($RAY_ADDRESS or ray_current_cluster); give "
                              "HOST:PORT, or leave --ray-address out for a local instance")
    return noted


class RayExecutor:
    name = "ray"
    remote = True

    def __init__(self, options: RayOptions | None = None) -> None:
        self.options = options or RayOptions()
        self.window: int | None = None  # tasks in flight at most (default from the cluster)
        self.retried = 0  # node failures retried in the last run
        self._where = "a local Ray instance" if self.options.address is None else \
            f"the cluster at {self.options.address}"
        self._started_here = False  # whether this executor started Ray in this process
        self._feasible: set[tuple[tuple[str, float], ...]] = set()  # resources some node has

    def describe(self) -> str:
        return f"Ray ({self._where})"

    def share(self, value: Any) -> RayShared:
        """Put `value` in the object store (Ray is joined, or started, for it)."""
        ray = import_ray()
        self._started_here = self._connect(ray) or self._started_here
        return RayShared(ray.put(value))

    # -- connecting -------------------------------------------------------------------
    def _connect(self, ray: Any) -> bool:
        """Join the cluster (or start a local instance); whether this call started Ray
        in this process (and so shuts it down)."""
        if ray.is_initialized():
            if not self._started_here:
                self._where = "the Ray instance of this process"
            return False
        address = self.options.address
        if address == "auto":  # ray.init would wait on whatever cluster Ray last noted
            address = _noted_cluster()
        if address is not None:
            host, port = address.rsplit(":", 1)
            try:  # ray.init waits minutes for a cluster that is not there
                socket.create_connection((host.strip("[]"), int(port)),
                                         timeout=CONNECT_TIMEOUT_S).close()
            except OSError as e:
                raise ConnectionError(f"--ray-address {self.options.address}: no Ray "
                                      f"cluster answers at {address} "
                                      f"({e.strerror or e})") from None
        kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                      logging_level=logging.ERROR)
        if address is None:
            # a private instance, whatever clusters earlier runs left noted on this
            # machine (without "local", ray.init joins the one in ray_current_cluster)
            kwargs["address"] = "local"
            if self.options.num_cpus is not None:
                kwargs["num_cpus"] = self.options.num_cpus
        else:
            kwargs["address"] = address
        try:
            ray.init(**kwargs)
        except ConnectionError as e:
            raise ConnectionError(f"--ray-address {address}: {str(e).splitlines()[0]}") \
                from None
        context = ray.get_runtime_context()
        self._where = "a local instance" if address is None else \
            f"the cluster at {context.gcs_address}"
        return True

    # -- placing ----------------------------------------------------------------------
    def _task_options(self, item: Item) -> dict[str, Any]:
        resources = dict(self.options.resources)
        cpus = resources.pop("CPU", item.cpus)
        gpus = resources.pop("GPU", item.gpus)
        options: dict[str, Any] = {"num_cpus": cpus, "num_gpus": gpus, "max_retries": 0}
        if resources:
            options["resources"] = resources
        return options

    def _check_feasible(self, ray: Any, item: Item) -> None:
        """Refuse work no node of the cluster could ever take (Ray would wait for one)."""
        needs = self._needs(item)
        shape = tuple(sorted(needs.items()))
        if shape in self._feasible:
            return
        nodes = [n.get("Resources") or {} for n in ray.nodes() if n.get("Alive")]
        if not any(all(node.get(k, 0) >= v for k, v in needs.items()) for node in nodes):
            offered = "; ".join(", ".join(f"{k}: {v:g}" for k, v in sorted(node.items())
                                          if not k.startswith(("node:", "memory",
                                                               "object_store")))
                                for node in nodes) or "no live node"
            wanted = ", ".join(f"{k}: {v:g}" for k, v in sorted(needs.items()))
            raise UsageError(f"no node of the Ray cluster ({self._where}) offers "
                             f"{wanted} (nodes offer: {offered})")
        self._feasible.add(shape)

    def _needs(self, item: Item) -> dict[str, float]:
        options = self._task_options(item)
        needs = {"CPU": options["num_cpus"], "GPU": options["num_gpus"],
                 **options.get("resources", {})}
        return {k: v for k, v in needs.items() if v}

    # -- running ----------------------------------------------------------------------
    def run(self, job: Job, items: Iterable[Item], on_outcome: OnOutcome) -> None:
        fresh = iter(items)
        first = next(fresh, None)
        if first is None:  # nothing to run: no Ray to start
            return
        fresh = itertools.chain([first], fresh)
        ray = import_ray()
        from ray import exceptions as ray_errors

        from torchmark.executors import node

        failures = tuple(getattr(ray_errors, n) for n in NODE_FAILURES
                         if hasattr(ray_errors, n))
        self._started_here = self._connect(ray) or self._started_here
        self.retried = 0
        pending: dict[Any, tuple[Item, int]] = {}
        try:
            here = Provenance.capture()
            window = self.window or max(16, 2 * math.ceil(ray.cluster_resources().get(
                "CPU", 1)))
            task = ray.remote(node.run_item)
            job_ref = ray.put(job)
            settings = ray.put(node.measurement_settings(os.environ))
            retry: collections.deque[tuple[Item, int]] = collections.deque()
            more = True
            while more or retry or pending:
                while len(pending) < window and (retry or more):
                    if retry:
                        item, attempt = retry.popleft()
                    else:
                        next_item = next(fresh, None)
                        if next_item is None:
                            more = False
                            continue
                        item, attempt = next_item, 1
                        self._check_feasible(ray, item)
                    ref = task.options(**self._task_options(item)).remote(
                        job_ref, settings, item, attempt)
                    pending[ref] = (item, attempt)
                if not pending:
                    break
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
                if ready and len(pending) > 1:  # and whatever else finished meanwhile
                    ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                for ref in ready:
                    item, attempt = pending.pop(ref)
                    try:
                        record, where = ray.get(ref)
                    except failures as e:
                        if attempt <= self.options.retries:
                            self.retried += 1
                            retry.append((item, attempt + 1))
                            continue
                        record, where = job.lost(item, f"lost {attempt} times with its "
                                                 f"worker or node: {_ray_error(e)}",
                                                 attempt), None
                    except ray_errors.RayError as e:  # the item's own: not retried
                        record, where = job.lost(item, _ray_error(e), attempt), None
                    on_outcome(Outcome(item.id, record, _merged(here, where)))
        except BaseException:  # Ctrl-C (or a sink's failure): nothing more comes back
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
        finally:
            self.close()

    def close(self) -> None:
        """Shut down the Ray instance this executor started (joined ones stay up)."""
        if self._started_here:
            self._started_here = False
            import ray

            with contextlib.suppress(Exception):
                ray.shutdown()


def _ray_error(error: BaseException) -> str:
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        return error_line(cause)
    lines = [ln for ln in str(error).strip().splitlines() if ln.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}".strip()


def _merged(here: Provenance, node: dict[str, Any] | None) -> Provenance | None:
    """The node's machine, torch and Python with this run's commit, env, command and
    start (what the run is about)."""
    if node is None:
        return None
    measured = Provenance.from_dict(node)
    return dataclasses.replace(measured, git_commit=here.git_commit,
                               git_dirty=here.git_dirty, env=here.env,
                               command=here.command, started=here.started)


