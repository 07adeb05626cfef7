"""The engine: where the suite's heavy, independent work runs — here, or on a Dask cluster.

Tallies and imports of many or large logs, notebook 01's composition and ``run --sweep`` are cut
into independent tasks that an `Engine` (`open_engine`) runs on ``dask.distributed``:

* **embedded** (the default): a `distributed.LocalCluster` of single-threaded worker processes,
  started for the job and closed after it; inputs under `SYNC_BELOW_BYTES` run in this process;
* ``pool``: worker processes forked from this one (`concurrent.futures`, no Dask), started in
  milliseconds with what this process has loaded; ``auto`` picks it from `POOL_FROM_BYTES` for jobs
  that ask for it (``open_engine(pool=True)``: the tally, whose tasks return small tallies);
* **an existing cluster**: ``--scheduler tcp://HOST:PORT``, ``COMPACTION_LAB_SCHEDULER`` or a
  profile's ``scheduler`` key, in that order (`scheduler_setting`); the address is checked first, in
  bounded time (`check_scheduler`), and anything but a Dask scheduler is an `EngineError` naming it;
* ``sync``: everything in this process, in order (the reference the engine is tested against).

Whichever runs them, results are gathered in submission order and combined on the client exactly
as a single reading would combine them, so tables are identical. Tasks are pure functions of their
inputs, so a task Dask retries on another worker recomputes the same value.

Design: docs/architecture.md#the-engine; clusters: docs/cluster.md.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import ssl
import struct
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")

#: Environment variable naming the scheduler to use (after ``--scheduler``, before a profile's key).
SCHEDULER_ENV = "COMPACTION_LAB_SCHEDULER"

#: Scheduler values that are not addresses.
AUTO, SYNC, POOL, LOCAL = "auto", "sync", "pool", "local"
SCHEDULER_CHOICES = (AUTO, SYNC, POOL, LOCAL)

#: Below this many input bytes the embedded default runs in this process. Starting a
#: LocalCluster's worker processes and loading the tokenizer in each cost more than running here,
#: which two workers (each reading and counting its own units) earn back only from a couple of
#: hundred MB of input: the cut-over `make bench BENCH=engine` measures (its output holds the times).
SYNC_BELOW_BYTES = 192 * 1024 * 1024

#: From this many input bytes ``auto`` runs a job that accepts a pool (``open_engine(pool=True)``)
#: on a `POOL` of forked worker processes, at every larger size too: forking costs milliseconds,
#: where a LocalCluster's start costs seconds. Below it this process alone is faster (the
#: tokenizer's self-check and the forks are not repaid): the cut-over `make bench BENCH=engine`
#: measures, the whole command timed.
POOL_FROM_BYTES = 2 * 1024 * 1024


#: Seconds a scheduler address may take to accept a connection, finish TLS and greet with Dask's
#: handshake (`check_scheduler`), and then again for `distributed.Client` to register with it.
CONNECT_TIMEOUT_S = 10.0

#: Schemes whose scheduler `check_scheduler` greets itself: Dask over TCP, with or without TLS.
PROBED_SCHEMES = ("tcp", "tls")
#: Schemes that need Dask's TLS settings (`distributed.security.Security`).
TLS_SCHEMES = ("tls", "wss")
#: Dask's settings a TLS client needs (its config files, or ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE`` etc.).
TLS_SETTINGS = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert", "distributed.comm.tls.client.key")
#: A Dask handshake is one small message (~60 bytes); a first length beyond this is another protocol.
_HANDSHAKE_MAX_BYTES = 64 * 1024


class EngineError(ValueError):
    """A scheduler value that names nothing usable, or a cluster that cannot be reached.

    Its message never repeats a credential of the address it names: URL credentials are masked
    (``tcp://***@host:8786``), and so is every other form of them the message holds (Dask's own
    error quoting ``user:pass@host:8786`` without its scheme; `privacy.secrets.mask_message`).
    """

    def __init__(self, message: object = "", *args: object) -> None:
        from compaction_lab.privacy.secrets import mask_message, url_credentials  # only an error pays for it

        text = str(message)
        super().__init__(mask_message(text, url_credentials(text)), *args)


def scheduler_setting(flag: str | None = None, profile_value: str | None = None) -> str:
    """Choose the scheduler: the command-line flag, else the environment, else the profile, else ``auto``.

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
        from compaction_lab.privacy.secrets import MASK

        # An address without its scheme may still hold a credential (user:pass@host): never repeated.
        shown = f"{MASK}@{value.rpartition('@')[2]}" if "@" in value else value
        raise EngineError(
            f"{where}: {shown!r} is not a scheduler; use {', '.join(SCHEDULER_CHOICES)} "
            "or an address such as tcp://127.0.0.1:8786"
        )
    return AUTO


def reach_scheduler(address: str, timeout: float | None = None) -> Any:
    """Check that a Dask scheduler answers at `address` as a client would reach it; return the client's security.

    `scheduler_security` of the address, then `check_scheduler` with it: what `open_engine` does before it
    makes a `distributed.Client`, and what ``run`` does before it makes a run folder whose notebooks will
    connect there (`EngineError`, one line, within about `CONNECT_TIMEOUT_S`).

    Parameters
    ----------
    address : str
        A scheduler address (``tcp://host:port``, ``tls://...``, ...).
    timeout : float, optional
        Seconds for the check (default `CONNECT_TIMEOUT_S`).
    """
    security = scheduler_security(address)
    check_scheduler(address, security, timeout)
    return security


def is_address(setting: str) -> bool:
    """Whether a scheduler setting (`scheduler_setting`) names a scheduler to connect to."""
    return setting not in SCHEDULER_CHOICES


def scheduler_security(address: str) -> Any:
    """Return the `distributed.security.Security` a client uses for `address`, from Dask's own settings.

    Chosen as `distributed.Client` chooses it: the configured
    ``distributed.client.security-loader``, else ``Security()`` read from Dask's
    config (``distributed.comm.tls.*``; environment ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``,
    ``..._CLIENT__CERT``, ``..._CLIENT__KEY``).

    Parameters
    ----------
    address : str
        A scheduler address (``tcp://``, ``tls://``, ...).

    Returns
    -------
    distributed.security.Security

    Raises
    ------
    EngineError
        For a ``tls://`` (or ``wss://``) address when those settings give no TLS
        context: none configured, or files that cannot be loaded.
    """
    import dask
    from distributed.security import Security
    from distributed.utils import import_term

    loader = dask.config.get("distributed.client.security-loader", None)
    loaded = import_term(loader)({"address": address}) if loader else None
    security = Security(**loaded) if isinstance(loaded, dict) else loaded or Security()
    scheme = address.split("://", 1)[0].lower()
    if scheme not in TLS_SCHEMES:
        return security
    try:
        context = security.get_connection_args("client")["ssl_context"]
    except (OSError, ValueError) as exc:  # a missing file, a certificate ssl cannot load
        raise EngineError(
            f"{address}: Dask's TLS settings could not be loaded ({_reason(exc)}); check {', '.join(TLS_SETTINGS)}"
        ) from exc
    if context is None:
        raise EngineError(
            f"{scheme}:// needs Dask's TLS settings: none are set for {address}; set {', '.join(TLS_SETTINGS)} "
            "in Dask's config (or DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT "
            "and DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY), or use the scheduler's tcp:// address"
        )
    return security


def check_scheduler(address: str, security: Any = None, timeout: float | None = None) -> None:
    """Check, in bounded time, that a Dask scheduler answers at `address`, before a `distributed.Client` is made.

    A Client handed another service hangs (an HTTP server, or a listener that
    says nothing: Dask reads the handshake without a deadline) or crashes (an
    SSH server's greeting read as an 8-byte frame length: exabytes asked for).
    A Dask scheduler greets every new connection at once with its handshake, one
    length-prefixed msgpack message; so this connects (through TLS with the
    client's context, for ``tls://``), reads that greeting and checks its shape,
    within `timeout` in all, then closes. For ``ws://`` and ``wss://`` only the
    connection is checked; other schemes (``inproc://``, ``ucx://``) are left to Dask.

    Parameters
    ----------
    address : str
        The scheduler address, e.g. ``tcp://10.0.0.5:8786``.
    security : distributed.security.Security, optional
        Default: `scheduler_security` of the address.
    timeout : float, optional
        Seconds for it all (default `CONNECT_TIMEOUT_S`).

    Raises
    ------
    EngineError
        Naming the address and what was found: nothing listening, no answer to
        the connection, a failed TLS handshake, silence, or the first bytes of
        another protocol.
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    wait = CONNECT_TIMEOUT_S if timeout is None else timeout
    try:
        scheme, location = parse_address(address)
        if scheme not in (*PROBED_SCHEMES, "ws", "wss"):
            return
        host, port = parse_host_port(location.split("/", 1)[0])
    except ValueError as exc:
        raise EngineError(f"{address} is not a scheduler address: {exc}") from exc
    deadline = time.monotonic() + wait
    with ExitStack() as stack:
        sock = stack.enter_context(_connect(address, host, port, wait))
        if scheme not in PROBED_SCHEMES:
            return
        if scheme == "tls":
            security = scheduler_security(address) if security is None else security
            context = security.get_connection_args("client")["ssl_context"]
            sock = stack.enter_context(_tls(address, sock, host, context, deadline, wait))
        _read_handshake(address, sock, deadline, wait)


def _masked(address: str) -> str:
    """Return an address as a line may show it: its URL credentials masked (`privacy.secrets.mask_url`)."""
    from compaction_lab.privacy.secrets import mask_url

    return mask_url(address)


def _reason(exc: BaseException) -> str:
    """Say an OS or TLS error in a few words (its strerror or reason, not the errno tuple)."""
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)


def _connect(address: str, host: str, port: int, wait: float) -> socket.socket:
    unreachable = f"cannot reach the Dask scheduler at {address}"
    try:
        return socket.create_connection((host, port), timeout=wait)
    except ConnectionRefusedError as exc:
        raise EngineError(f"{unreachable}: nothing listens there (connection refused)") from exc
    except socket.gaierror as exc:
        raise EngineError(f"{unreachable}: unknown host {host!r} ({exc.strerror})") from exc
    except TimeoutError as exc:
        raise EngineError(f"{unreachable}: no answer to a connection within {wait:g} s") from exc
    except OSError as exc:
        raise EngineError(f"{unreachable}: {_reason(exc)}") from exc


def _tls(
    address: str, sock: socket.socket, host: str, context: ssl.SSLContext, deadline: float, wait: float
) -> ssl.SSLSocket:
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        return context.wrap_socket(sock, server_hostname=host if context.check_hostname else None)
    except TimeoutError as exc:
        raise EngineError(
            f"{address} is not a TLS Dask scheduler: it accepted the connection but gave no TLS answer within {wait:g} s"
        ) from exc
    except ssl.SSLError as exc:
        raise EngineError(
            f"{address}: the TLS handshake failed ({_reason(exc)}); is it a Dask scheduler started with TLS, "
            "and does distributed.comm.tls.ca-file hold the CA that signed its certificate?"
        ) from exc
    except OSError as exc:  # reset or closed mid-handshake: not a TLS server
        raise EngineError(
            f"{address} is not a TLS Dask scheduler: the TLS handshake broke off ({_reason(exc)})"
        ) from exc


def _read_handshake(address: str, sock: socket.socket, deadline: float, wait: float) -> None:
    """Read the greeting a Dask scheduler sends unasked and check it is Dask's handshake (see `check_scheduler`)."""
    not_dask = f"{address} is not a Dask scheduler"
    data, need = b"", 8
    while len(data) < need:
        chunk: bytes | None
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            chunk = sock.recv(65536)
        except TimeoutError:
            chunk = None
        except OSError as exc:
            raise EngineError(f"{not_dask}: the connection failed before a handshake ({_reason(exc)})") from exc
        if not chunk:
            if data:
                raise EngineError(f"{not_dask}: it sent {_shown(data)} instead of Dask's handshake")
            if chunk is None:
                raise EngineError(
                    f"{not_dask}: it accepted the connection but sent no Dask handshake within {wait:g} s "
                    "(a Dask scheduler greets each connection at once; is this another service, e.g. HTTP?)"
                )
            raise EngineError(f"{not_dask}: it closed the connection without a Dask handshake")
        data += chunk
        if need == 8 and len(data) >= 8:
            # Dask's frame: the message's length (native uint64), then the frame count and lengths.
            (length,) = struct.unpack("Q", data[:8])
            if not 16 <= length <= _HANDSHAKE_MAX_BYTES:
                raise EngineError(f"{not_dask}: it sent {_shown(data)} instead of Dask's handshake")
            need = 8 + length
    if not _is_handshake(data[8:need]):
        raise EngineError(f"{not_dask}: it sent {_shown(data)} instead of Dask's handshake")


def _is_handshake(body: bytes) -> bool:
    """Whether a message body is Dask's: a frame count, the frames' lengths, and a msgpack map first."""
    import msgpack  # type: ignore[import-untyped]  # msgpack ships no type information

    (frames,) = struct.unpack_from("Q", body)
    start = 8 + 8 * frames
    if not 1 <= frames <= 16 or len(body) < start:
        return False
    lengths = struct.unpack_from(f"{frames}Q", body, 8)
    if start + sum(lengths) != len(body):
        return False
    try:
        first = msgpack.unpackb(body[start : start + lengths[0]], raw=False, strict_map_key=False)
    except Exception:  # any failure to decode is "not Dask's handshake"
        return False
    return isinstance(first, dict)


def _shown(data: bytes) -> str:
    """Show the first bytes another service sent, for a one-line message (control bytes escaped, cut short)."""
    return repr(data[:60].decode("latin-1")) + ("..." if len(data) > 60 else "")


class Handle(Protocol[T_co]):
    """What `Engine.submit` returns: a `distributed.Future`, or a value already computed here."""

    def result(self) -> T_co:
        """Return the task's value, or raise the exception it raised."""
        ...

    def release(self) -> None:
        """Let go of the value, so the engine need not keep it."""
        ...


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


class _Pooled(Generic[T]):
    """A task on a `POOL` engine: its `concurrent.futures.Future`, let go of when released."""

    def __init__(self, future: Future) -> None:
        self._future: Future | None = future

    def result(self) -> T:
        if self._future is None:
            raise RuntimeError("the task's value was released")
        return self._future.result()

    def release(self) -> None:
        self._future = None


def _pool_worker() -> None:
    """Run first in each worker process of a pool: a Ctrl-C, which reaches the whole process group, ends it quietly.

    The client (this process's parent) says the stop in one line and closes the pool; a worker's
    own KeyboardInterrupt would print a traceback per worker. A client that ignores Ctrl-C (started in
    the background) leaves its workers ignoring it too: they are forked with its handling.
    """
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(128 + signum))


def _nothing() -> None:
    """Do nothing: the task that starts a pool's worker processes."""


def fork_available() -> bool:
    """Whether a `POOL` forks its workers here (Linux); elsewhere it spawns them, and ``auto`` does not pick it."""
    import multiprocessing

    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


class Engine(AbstractContextManager["Engine"]):
    """Runs tasks in this process, on forked worker processes or on a Dask cluster (see the module docstring).

    Use `open_engine` to make one. ``kind`` is ``sync``, ``pool`` (worker
    processes forked from this one), ``local`` (an embedded LocalCluster) or
    ``cluster`` (an existing scheduler); ``dashboard`` is the Dask dashboard's
    address (None without Dask).
    """

    def __init__(self, kind: str, client: Any = None, cluster: Any = None, workers: int = 1, pool: Any = None):
        self.kind = kind
        self.client = client
        self._cluster = cluster
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = pool
        self._pool_started = False

    @property
    def dashboard(self) -> str | None:
        """The Dask dashboard link (None when running in this process)."""
        return getattr(self.client, "dashboard_link", None) if self.client is not None else None

    @property
    def distributed(self) -> bool:
        """Whether tasks run in other processes (a pool's or a Dask cluster's), not in this one."""
        return self.client is not None or self._pool is not None

    def describe(self) -> str:
        """One line for terminals: where the work runs and the dashboard."""
        if self._pool is not None:
            return f"engine: {self.workers} worker process(es) {'forked from' if fork_available() else 'started by'} this one"
        if self.client is None:
            return "engine: in this process"
        where = "embedded LocalCluster" if self.kind == LOCAL else f"cluster {_masked(self.client.scheduler.address)}"
        return f"engine: {where}, {self.workers} worker(s); dashboard {self.dashboard}"

    def submit(self, fn: Callable[..., T], *args: Any, retries: int = 0, **kwargs: Any) -> Handle[T]:
        """Run ``fn(*args, **kwargs)`` as one task (here: now) and return its handle.

        Arguments that are handles of earlier tasks are passed as their values
        (on a cluster the data moves between workers, not through the client).
        `retries` re-runs a task that *raised* (a killed worker is retried by
        the scheduler anyway).
        """
        if self._pool is not None:
            args = tuple(a.result() if isinstance(a, (_Done, _Pooled)) else a for a in args)
            self._pool_started = True
            return _Pooled(self._pool.submit(_retried, fn, retries, *args, **kwargs))
        if self.client is None:
            try:
                args = tuple(a.result() if isinstance(a, _Done) else a for a in args)
                return _Done(fn(*args, **kwargs))
            except Exception as exc:  # kept in the handle, raised where the result is asked for
                return _Done(None, exc)
        return self.client.submit(fn, *args, pure=False, retries=retries, **kwargs)

    def on_every_worker(self, fn: Callable[..., T], *args: Any) -> list[Handle[T]]:
        """Submit ``fn(*args)`` once to each worker, ahead of the tasks submitted after it (in this process: nothing).

        For what every worker needs before its first task (imports, a
        tokenizer to load): started early, it runs while the client is still
        preparing the tasks. Keep the handles until the job is done: a
        released task may be dropped before it runs. On a pool whose workers
        have not started, ``fn`` runs here, and the workers are then forked
        with what it loaded (once started, they run it as tasks).
        """
        if self._pool is not None:
            if not self._pool_started:
                # The workers are forked from this process: what `fn` loads here, each of them has. They are
                # started now, before this process starts any thread of its own (a progress bar's).
                try:
                    done: Handle[T] = _Done(fn(*args))
                except Exception as exc:  # kept in the handle, as a task's error is
                    done = _Done(None, exc)
                self.submit(_nothing).result()
                return [done]
            return [self.submit(fn, *args) for _ in range(self.workers)]
        if self.client is None:
            return []
        workers = list(self.client.scheduler_info().get("workers", {}))
        return [self.client.submit(fn, *args, workers=[w], allow_other_workers=False, pure=False) for w in workers]

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
        """Close the pool (tasks not started are cancelled), or the client and the embedded cluster if this engine started one."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self.client = self._cluster = None

    def __exit__(self, *exc: object) -> None:
        """Close the engine."""
        self.close()


def _retried(fn: Callable[..., T], retries: int, *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` in a pool's worker, again up to `retries` times when it raises."""
    for _ in range(retries):
        try:
            return fn(*args, **kwargs)
        except Exception:  # retried, as Dask retries a task that raised; the last attempt's error is the task's
            pass
    return fn(*args, **kwargs)


def quiet_dask_logs() -> None:
    """Show no more of Dask's log records below CRITICAL in this process.

    For a process being stopped: what Dask logs while a stop signal tears the
    cluster down (a worker whose nanny's pipe is already closed, a lost
    heartbeat) is the stop itself, which the command tells in one line, not an
    error to print as a traceback.
    """
    log = logging.getLogger("distributed")
    log.setLevel(logging.CRITICAL)
    for handler in log.handlers:
        handler.setLevel(logging.CRITICAL)


def dask_setup(worker: object) -> None:
    """Run by Dask in each worker process of an embedded cluster (``preload``): a stop signal quiets Dask's logs.

    A terminal's Ctrl-C reaches the whole process group, the worker processes
    too; each then winds down while the client closes the cluster, and Dask
    would log each broken pipe of that as an ERROR with a traceback. The
    worker's own handling of the signal (the asyncio runner's, which cancels
    the worker) still follows.
    """
    del worker  # Dask passes the worker; only the process matters here
    previous = signal.getsignal(signal.SIGINT)

    def stopping(signum: int, frame: Any) -> None:
        quiet_dask_logs()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, stopping)
    except ValueError:  # not the process's main thread (a worker started in-process): nothing to wrap
        pass


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
    pool: bool = False,
) -> Engine:
    """Open an engine for one job (close it, or use it as a context manager).

    Parameters
    ----------
    scheduler : str, optional
        ``auto`` (default), ``sync``, ``local`` or a scheduler address; see
        `scheduler_setting` for where the value comes from.
    input_bytes : int, optional
        Size of the job's input. ``auto`` runs in this process below
        `SYNC_BELOW_BYTES` (and when it is unknown), else on a LocalCluster;
        with `pool`, below `POOL_FROM_BYTES`, else on a `POOL`.
    workers : int, optional
        Worker processes of a pool or LocalCluster (default: the CPUs this process may use).
    announce : bool
        Print the engine line (and the dashboard link) to stderr.
    pool : bool
        Whether ``auto`` may pick a `POOL` (where workers are forked, `fork_available`): for jobs
        whose tasks return little, so that no scheduler is needed to hold their results.

    Raises
    ------
    EngineError
        For a scheduler address, before anything else is done: when nothing
        answers there, when what answers is not a Dask scheduler
        (`check_scheduler`), or when it is ``tls://`` and Dask's TLS settings
        are missing (`scheduler_security`). One line naming the address and what
        was found, within about `CONNECT_TIMEOUT_S` (twice that at most, when a
        scheduler greets but then does not register the client). Callers that
        write output open the engine first, so a failure leaves nothing behind.
    """
    choice = scheduler_setting(scheduler)
    if choice == AUTO and pool and fork_available():
        choice = POOL if input_bytes is not None and input_bytes >= POOL_FROM_BYTES else SYNC
    elif choice == AUTO:
        choice = LOCAL if input_bytes is not None and input_bytes >= SYNC_BELOW_BYTES else SYNC
    if choice == SYNC:
        return Engine(SYNC)
    if choice == POOL:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        n = max(1, workers or usable_cpus())
        context = multiprocessing.get_context("fork" if fork_available() else "spawn")
        executor = ProcessPoolExecutor(n, mp_context=context, initializer=_pool_worker)
        engine = Engine(POOL, workers=n, pool=executor)
        if announce:
            print(engine.describe(), file=sys.stderr, flush=True)
        return engine
    # Only a job that runs on Dask pays for importing it.
    from distributed import Client, LocalCluster

    if choice == LOCAL:
        n = max(1, workers or usable_cpus())
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
            # Dask's own records stay quiet, errors too: a task's failure reaches the client as its exception,
            # and what a worker logs while a stop tears the cluster down (a heartbeat to a scheduler already
            # closed, when Ctrl-C reached the client alone) is the stop itself, told in one line.
            silence_logs=logging.CRITICAL,
            # Each worker process runs `dask_setup` from this module (Dask's preload mechanism).
            preload=[__name__],
        )
        engine = Engine(LOCAL, Client(cluster), cluster, n)
    else:
        # Dask's own connect has no deadline on the handshake and trusts the first 8 bytes as a length.
        security = reach_scheduler(choice)
        try:
            client = Client(choice, timeout=f"{CONNECT_TIMEOUT_S}s", security=security)
        except OSError as exc:
            raise EngineError(f"cannot reach the Dask scheduler at {choice}: {exc}") from exc
        except Exception as exc:  # it speaks Dask but is not a scheduler: a worker's or nanny's handlers refuse
            raise EngineError(
                f"{choice}: a Dask client could not register there ({type(exc).__name__}: {exc}); "
                "is it a scheduler's address, not a worker's?"
            ) from exc
        engine = Engine("cluster", client, None, max(1, len(client.scheduler_info().get("workers", {}))))
    if announce:
        print(engine.describe(), file=sys.stderr, flush=True)
    return engine
