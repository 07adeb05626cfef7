"""The engine: where the suite's heavy, independent work runs — here, or on a Dask cluster.

Tallies and imports of many or large logs, notebook 01's composition and
``run --sweep`` are cut into independent tasks (a file, a span of a large file
holding whole sessions, a batch of texts to count, one run of a sweep) that
`Engine` runs on ``dask.distributed``:

* **embedded** (the default, nothing to set up): a `distributed.LocalCluster`
  sized to the machine — one single-threaded worker *process* per core,
  because the tokenizers hold the GIL (bpe-openai) or release it only in part
  (tiktoken) — started for the job and closed after it. Inputs smaller than
  `SYNC_BELOW_BYTES` run in this process instead: starting worker processes
  costs more than it saves on them (`make bench` measures the cut-over).
* **an existing cluster**: ``--scheduler tcp://HOST:PORT``, the
  ``COMPACTION_LAB_SCHEDULER`` environment variable, or a profile's
  ``scheduler`` key (in that order) — a ``dask scheduler`` with ``dask worker``
  processes, dask-jobqueue (SLURM, PBS, ...), dask-kubernetes or Coiled.
  Workers must have compaction-lab installed and read the same paths
  (README, "Running on a cluster").
* ``sync``: everything in this process, in order (the reference the engine
  is tested against, and the fallback for tiny inputs).

Whichever runs them, results are gathered in submission order and combined
on the client exactly as a single reading would combine them, so tables are
identical. A worker killed mid-task is retried by Dask on another worker
(``distributed.scheduler.allowed-failures``); tasks are pure functions of
their inputs, so a retry recomputes the same value.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")

#: Environment variable naming the scheduler to use (after ``--scheduler``, before a profile's key).
SCHEDULER_ENV = "COMPACTION_LAB_SCHEDULER"

#: Scheduler values that are not addresses.
AUTO, SYNC, LOCAL = "auto", "sync", "local"
SCHEDULER_CHOICES = (AUTO, SYNC, LOCAL)

#: Below this many input bytes the embedded default runs in this process. Starting a
#: LocalCluster's worker processes and loading the tokenizer in each costs ~2-4 s, which two
#: workers earn back (~54 MB/s of logs against ~30 MB/s in one process, on 2 cores) only from a
#: few hundred MB: `make bench BENCH=engine` measured the CLI in-process faster up to 256 MB and
#: slower at 384 MB (cut-over ~275 MB).
SYNC_BELOW_BYTES = 256 * 1024 * 1024


#: Seconds to wait for a scheduler to answer before saying it cannot be reached.
CONNECT_TIMEOUT_S = 10.0


class EngineError(ValueError):
    """A scheduler value that names nothing usable, or a cluster that cannot be reached."""


def scheduler_setting(flag: str | None = None, profile_value: str | None = None) -> str:
    """The scheduler to use: the command-line flag, else the environment, else the profile, else ``auto``.

    Parameters
    ----------
    flag : str, optional
        ``--scheduler`` as given.
    profile_value : str, optional
        A profile's ``scheduler`` parameter.

    Returns
    -------
    str
        ``auto``, ``sync``, ``local`` or a scheduler address (``tcp://host:port``,
        ``tls://...``, ``ws://...``, ``inproc://...``).

    Raises
    ------
    EngineError
        For a value that is none of these, naming where it came from.
    """
    for where, value in (
        ("--scheduler", flag),
        (SCHEDULER_ENV, os.environ.get(SCHEDULER_ENV)),
        ("the profile's scheduler", profile_value),
    ):
        if value is None or not str(value).strip():
            continue
        value = str(value).strip()
        if value in SCHEDULER_CHOICES or "://" in value:
            return value
        raise EngineError(
            f"{where}: {value!r} is not a scheduler; use {', '.join(SCHEDULER_CHOICES)} "
            "or an address such as tcp://127.0.0.1:8786"
        )
    return AUTO


class Handle(Protocol[T_co]):
    """What `Engine.submit` returns: a `distributed.Future`, or a value already computed here."""

    def result(self) -> T_co: ...

    def release(self) -> None: ...


@dataclass
class _Done(Generic[T]):
    """A task run in this process: its value (or the exception it raised)."""

    value: Any
    error: BaseException | None = None

    def result(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value

    def release(self) -> None:
        self.value = None


class Engine(AbstractContextManager["Engine"]):
    """Runs tasks in this process or on a Dask cluster (see the module docstring).

    Use `open_engine` to make one. ``kind`` is ``sync``, ``local`` (an
    embedded LocalCluster) or ``cluster`` (an existing scheduler);
    ``dashboard`` is the Dask dashboard's address (None when in-process).
    """

    def __init__(self, kind: str, client: Any = None, cluster: Any = None, workers: int = 1):
        self.kind = kind
        self.client = client
        self._cluster = cluster
        self.workers = workers

    @property
    def dashboard(self) -> str | None:
        return getattr(self.client, "dashboard_link", None) if self.client is not None else None

    @property
    def distributed(self) -> bool:
        return self.client is not None

    def describe(self) -> str:
        """One line for terminals: where the work runs and the dashboard."""
        if self.client is None:
            return "engine: in this process"
        where = "embedded LocalCluster" if self.kind == LOCAL else f"cluster {self.client.scheduler.address}"
        return f"engine: {where}, {self.workers} worker(s); dashboard {self.dashboard}"

    def submit(self, fn: Callable[..., T], *args: Any, retries: int = 0, **kwargs: Any) -> Handle[T]:
        """Run ``fn(*args, **kwargs)`` as one task (here: now) and return its handle.

        Arguments that are handles of earlier tasks are passed as their values
        (on a cluster the data moves between workers, not through the client).
        `retries` re-runs a task that *raised* (a killed worker is retried by
        the scheduler anyway).
        """
        if self.client is None:
            try:
                args = tuple(a.result() if isinstance(a, _Done) else a for a in args)
                return _Done(fn(*args, **kwargs))
            except Exception as exc:  # kept in the handle, raised where the result is asked for
                return _Done(None, exc)
        return self.client.submit(fn, *args, pure=False, retries=retries, **kwargs)

    def scatter(self, value: T) -> Handle[T]:
        """Place a large value on a worker once (tasks then take the handle, not the value)."""
        if self.client is None:
            return _Done(value)
        # A list given to `Client.scatter` is scattered element by element; this is one value.
        return self.client.scatter([value], hash=False)[0]

    def ordered(
        self,
        items: Iterable[U],
        start: Callable[[Engine, U], T],
        window: int | None = None,
    ) -> Iterator[tuple[U, T]]:
        """Start `items` in order, at most `window` ahead of the one being consumed; yield them in order.

        `start` submits an item's tasks and returns what `finish`-side code
        needs (handles); the consumer turns them into results. Bounding how far
        ahead work runs bounds the memory results take while waiting to be
        consumed in order (default: four per worker).
        """
        ahead = max(1, window if window is not None else 4 * self.workers)
        queue: deque[tuple[U, T]] = deque()
        for item in items:
            queue.append((item, start(self, item)))
            if len(queue) > ahead:
                yield queue.popleft()
        while queue:
            yield queue.popleft()

    def close(self) -> None:
        """Close the client, and the embedded cluster if this engine started one."""
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self.client = self._cluster = None

    def __exit__(self, *exc: object) -> None:
        self.close()


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity, which containers and batch systems set)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def open_engine(
    scheduler: str | None = None,
    *,
    input_bytes: int | None = None,
    workers: int | None = None,
    announce: bool = True,
) -> Engine:
    """An engine for one job (close it, or use it as a context manager).

    Parameters
    ----------
    scheduler : str, optional
        ``auto`` (default), ``sync``, ``local`` or a scheduler address; see
        `scheduler_setting` for where the value comes from.
    input_bytes : int, optional
        Size of the job's input. ``auto`` runs in this process below
        `SYNC_BELOW_BYTES` (and when it is unknown), else on a LocalCluster.
    workers : int, optional
        LocalCluster worker processes (default: the CPUs this process may use).
    announce : bool
        Print the engine line (and the dashboard link) to stderr.

    Raises
    ------
    EngineError
        When a scheduler address cannot be reached (the message names it).
    """
    choice = scheduler_setting(scheduler)
    if choice == AUTO:
        choice = LOCAL if input_bytes is not None and input_bytes >= SYNC_BELOW_BYTES else SYNC
    if choice == SYNC:
        return Engine(SYNC)
    # Only a job that runs on Dask pays for importing it.
    import logging

    from distributed import Client, LocalCluster

    if choice == LOCAL:
        n = max(1, workers or usable_cpus())
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
            silence_logs=logging.ERROR,
        )
        engine = Engine(LOCAL, Client(cluster), cluster, n)
    else:
        try:
            client = Client(choice, timeout=f"{CONNECT_TIMEOUT_S}s")
        except OSError as exc:
            raise EngineError(f"cannot reach the Dask scheduler at {choice}: {exc}") from exc
        engine = Engine("cluster", client, None, max(1, len(client.scheduler_info().get("workers", {}))))
    if announce:
        print(engine.describe(), file=sys.stderr, flush=True)
    return engine
