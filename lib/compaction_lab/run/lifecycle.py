"""The run lifecycle: which process runs a run folder, whether it still lives, how it ended; the listing.

A run folder's ``run.json`` goes through these statuses:

``running``
    Written when the run starts, with the process running it (``pid``, ``host`` from `host_id`,
    ``process_started``) and a ``heartbeat`` refreshed every `HEARTBEAT_EVERY` seconds and at every
    notebook boundary; ``notebook_running`` / ``notebooks_running`` name what executes.
``ok`` / ``failed``
    The chain finished / a notebook raised (``error`` names it).
``interrupted``
    SIGINT or SIGTERM stopped the run (`stop_on_signals`); a sweep marks a run it stopped on a
    worker (`record_interrupted`).
``dead``
    ``running`` whose process is gone without a word: `liveness` decides, `list_runs` reports it,
    and `record_dead` (called by ``compaction-lab run`` before it starts) writes it.

`list_runs` is ``compaction-lab runs``: every run folder under the results folder, newest first,
with its status, profile, start and wall time.

Design: docs/run-folder.md#statuses.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import psutil
from jupyter_client import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir
from jupyter_core.utils import ensure_event_loop

from compaction_lab.core import bounded_json
from compaction_lab.core.processes import pid_alive
from compaction_lab.core.runfolder import RUN_JSON

RUNNING, OK, FAILED, INTERRUPTED, DEAD = "running", "ok", "failed", "interrupted", "dead"
#: Shown for a folder whose run.json cannot be read.
UNREADABLE = "unreadable"

#: Seconds between heartbeats while a notebook executes.
HEARTBEAT_EVERY = 15.0
#: A run on another host whose heartbeat is older than this is taken for dead (its pid means nothing here).
STALE_AFTER = 300.0
#: Two readings of one process's creation time may differ by a clock adjustment; a reused pid differs by more.
START_TOLERANCE = 1.0

#: The signals that stop a run cleanly, and the exit code each conventionally gives (128 + number).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


# --------------------------------------------------------------------------- the process


def utc_now() -> str:
    """Return the current UTC time as run.json writes it (ISO 8601, seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def process_started(pid: int) -> float | None:
    """When process `pid` was created (epoch seconds), or None when unknown or gone.

    Together with the pid this names one process: a later process given the
    same pid has a later creation time.
    """
    try:
        return round(psutil.Process(pid).create_time(), 3)
    except (psutil.Error, OSError):
        return None


def _zombie(pid: int) -> bool:
    """Whether `pid` has exited and only waits to be reaped (signal 0 still reaches a zombie)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


def host_id() -> str:
    """Identify this machine as run.json records it: a hash of the host name, never the name.

    Run folders are shared, and a host name often names its owner
    (``alices-macbook``); liveness only needs to tell "this host" from
    "another", which a hash does as well.
    """
    return "host-" + hashlib.blake2b(socket.gethostname().encode("utf-8"), digest_size=6).hexdigest()


@dataclass(frozen=True)
class ProcessMark:
    """The process that runs a run folder: pid, host and creation time."""

    pid: int
    host: str
    started: float | None

    @classmethod
    def current(cls) -> ProcessMark:
        """Mark the current process."""
        pid = os.getpid()
        return cls(pid, host_id(), process_started(pid))

    def fields(self) -> dict[str, Any]:
        """Return the run.json fields that record it (and a first heartbeat)."""
        return {"pid": self.pid, "host": self.host, "process_started": self.started, "heartbeat": utc_now()}


@dataclass(frozen=True)
class Verdict:
    """Whether the process recorded in a ``running`` run.json still runs it.

    ``state`` is ``alive``, ``dead`` or ``unknown`` (nothing to tell by: a
    run.json written before pids were recorded); ``reason`` says why, for people.
    """

    state: Literal["alive", "dead", "unknown"]
    reason: str


def _parse_time(text: Any) -> datetime | None:
    try:
        t = datetime.fromisoformat(str(text))
    except (TypeError, ValueError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def liveness(
    info: Mapping[str, Any], *, host: str | None = None, now: datetime | None = None, stale_after: float = STALE_AFTER
) -> Verdict:
    """Judge whether a run.json's recorded process is alive (the liveness rule).

    On this host: dead when the pid is gone (or a zombie), or when it now
    belongs to a process created at another time than the recorded one (the
    pid was reused). On another host the pid means nothing here: dead when
    the heartbeat is older than `stale_after` seconds.

    Parameters
    ----------
    info : mapping
        The run.json contents (``pid``, ``host``, ``process_started``, ``heartbeat``).
    host : str, optional
        This host's id (default `host_id`).
    now : datetime, optional
        The time to judge a heartbeat against (default: now).
    """
    here = host or host_id()
    pid, where = info.get("pid"), info.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return Verdict("unknown", "run.json records no process (written by an older version)")
    if where == here:
        if not pid_alive(pid) or _zombie(pid):
            return Verdict("dead", f"process {pid} on this host is gone")
        recorded, actual = info.get("process_started"), process_started(pid)
        if isinstance(recorded, (int, float)) and actual is not None and abs(actual - recorded) > START_TOLERANCE:
            return Verdict(
                "dead",
                f"process {pid} is gone (pid {pid} now belongs to a process started "
                f"{datetime.fromtimestamp(actual, timezone.utc).isoformat(timespec='seconds')})",
            )
        return Verdict("alive", f"process {pid} on this host")
    beat = _parse_time(info.get("heartbeat"))
    age = ((now or datetime.now(timezone.utc)) - beat).total_seconds() if beat else None
    if age is None or age > stale_after:
        since = f"since {info.get('heartbeat')}" if beat else "ever"
        return Verdict("dead", f"no heartbeat from process {pid} on host {where} {since}")
    return Verdict("alive", f"process {pid} on host {where}, heartbeat {age:.0f} s ago")


# --------------------------------------------------------------------------- run.json while running


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file."""
    path = Path(path)
    # One temporary name per writer thread: the heartbeat and the runner never share one.
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class RunRecord:
    """A run's ``run.json`` while the run goes on.

    Stateful on purpose: the runner and the heartbeat thread both write the
    one file, so every change and every write goes through one lock (re-entrant,
    so a runner stopped by a signal mid-write can still record why).

    Parameters
    ----------
    path : Path
        The run.json file.
    info : dict
        Its contents; kept and updated in place.
    view : callable, optional
        What is written for `info` (the run's redactor's ``value``: secrets masked).
    """

    def __init__(self, path: Path, info: dict[str, Any], view: Callable[[Any], Any] | None = None):
        self.path = Path(path)
        self._info = info
        self._view = view or (lambda d: d)
        self._lock = threading.RLock()

    @property
    def info(self) -> dict[str, Any]:
        """A copy of the current contents."""
        with self._lock:
            return dict(self._info)

    def update(self, **fields: Any) -> None:
        """Set fields, refresh the heartbeat and write."""
        with self._lock:
            self._info.update(fields)
            self._info["heartbeat"] = utc_now()
            write_json_atomic(self.path, self._view(self._info))

    def beat(self) -> None:
        """Refresh the heartbeat; a failed write is skipped (the next beat or update retries)."""
        try:
            self.update()
        except OSError:
            pass


@contextmanager
def heartbeat(record: RunRecord, every: float = HEARTBEAT_EVERY) -> Iterator[None]:
    """Refresh `record`'s heartbeat every `every` seconds from a daemon thread while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            record.beat()

    thread = threading.Thread(target=beat, name="compaction-lab-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


# --------------------------------------------------------------------------- stopping on signals


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM.

    A `KeyboardInterrupt` so that the libraries between the signal and the
    runner (asyncio in nbclient, tqdm) pass it on as they pass Ctrl-C.

    Attributes
    ----------
    signum : int
    run_dir : Path or None
        The run folder, marked ``interrupted`` (None: stopped before it existed).
    notebook : str or None
        The notebook that was executing.
    sweep_dir : Path or None
        The comparison folder of a sweep that stopped with it.
    runs : tuple of Path
        Run folders a sweep's workers were executing, marked ``interrupted`` (`record_interrupted`).
    left_running : tuple of Path
        Run folders still executing on an existing cluster's workers, which the sweep cannot stop.
    """

    def __init__(
        self,
        signum: int,
        run_dir: Path | None = None,
        notebook: str | None = None,
        sweep_dir: Path | None = None,
        runs: tuple[Path, ...] = (),
        left_running: tuple[Path, ...] = (),
    ):
        super().__init__(signum)
        self.signum, self.run_dir, self.notebook, self.sweep_dir = int(signum), run_dir, notebook, sweep_dir
        self.runs, self.left_running = tuple(runs), tuple(left_running)

    @property
    def signal_name(self) -> str:
        """Name the signal (``SIGINT``), or ``signal N`` for a number without a name."""
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_code(self) -> int:
        """The shell's convention for a command ended by a signal: 128 + its number (130, 143)."""
        return 128 + self.signum

    def __str__(self) -> str:
        """Say what the signal interrupted and which run folders were marked interrupted."""
        if self.runs:
            msg = (
                f"interrupted by {self.signal_name} while {len(self.runs)} run(s) of the sweep were executing: "
                f"run folder(s) {', '.join(str(p) for p in self.runs)} marked interrupted"
            )
        elif self.run_dir is None and not self.left_running:
            msg = f"interrupted by {self.signal_name}; no run folder was being written"
        elif self.run_dir is None:
            msg = f"interrupted by {self.signal_name}"
        else:
            where = f" while {self.notebook} was executing (partial notebook kept)" if self.notebook else ""
            msg = f"interrupted by {self.signal_name}{where}: run folder {self.run_dir} marked interrupted"
        if self.left_running:
            msg += (
                f"; still running on the cluster's workers, which this process cannot stop: "
                f"{', '.join(str(p) for p in self.left_running)}"
            )
        if self.sweep_dir is not None:
            msg += (
                f"; sweep stopped, comparison so far in {self.sweep_dir} "
                f"(finish it with: compaction-lab run --resume {self.sweep_dir})"
            )
        return msg


#: The signal that is stopping the run, while `stop_on_signals` is active (read by the kernel manager).
_stopping: int | None = None
_guard_depth = 0


def stopping() -> bool:
    """Whether a stop signal arrived and the run is being wound down."""
    return _stopping is not None


class Stop:
    """A stop asked of runs executing on threads a signal cannot reach (a sweep's lanes: `compaction_lab.run.sweep`).

    The thread that caught the signal asks (`ask`); each run checks (`check`) between its notebooks'
    events and raises `RunInterrupted` with that signal, so it is stopped and recorded as the signal would.
    """

    def __init__(self) -> None:
        self._signum: int | None = None
        self._lock = threading.Lock()

    @property
    def asked(self) -> bool:
        """Whether a stop was asked."""
        return self._signum is not None

    @property
    def signum(self) -> int | None:
        """The signal the stop was asked for, or None."""
        return self._signum

    def ask(self, signum: int) -> None:
        """Ask every run checking this to stop as signal `signum` would stop it (the first signal counts)."""
        with self._lock:
            if self._signum is None:
                self._signum = int(signum)

    def check(self) -> None:
        """Raise `RunInterrupted` when a stop was asked."""
        if self._signum is not None:
            raise RunInterrupted(self._signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into `RunInterrupted` while the block runs.

    The first signal raises; later ones are ignored until the block exits, so
    a second Ctrl-C cannot cut short the recording of the first. Nested
    blocks (a sweep's runs, the command around them) share the outermost
    one's handlers. Outside the main thread signals cannot be caught: the
    block runs unguarded.
    """
    global _guard_depth, _stopping
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _guard_depth:
        _guard_depth += 1
        try:
            yield
        finally:
            _guard_depth -= 1
        return

    def handler(signum: int, frame: Any) -> None:
        global _stopping
        if _stopping is not None:
            return
        _stopping = signum
        raise RunInterrupted(signum)

    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    _stopping, _guard_depth = None, 1
    try:
        for s in STOP_SIGNALS:
            signal.signal(s, handler)
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        _stopping, _guard_depth = None, 0


def settle_event_loop() -> None:
    """Cancel and collect what a stopped notebook client left pending on this thread's event loop.

    nbclient drives each step with ``loop.run_until_complete`` on a loop it
    keeps per thread; a signal raised out of it leaves that step's tasks
    pending there. Left alone, the next run on the thread would finish them
    with errors nobody reads ("Task exception was never retrieved", logged
    whenever the garbage collector gets to them). A running loop (a notebook
    that calls the runner) is not ours to drive and is left alone.
    """
    loop = ensure_event_loop()
    if loop.is_running() or loop.is_closed():
        return
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


#: Longest path a Unix socket may have (``sun_path``: 108 bytes on Linux, 104 on macOS, its NUL included),
#: less the ``-N`` suffix of a kernel's channel.
_SOCKET_PATH_MAX = 103 - len("-99")


#: A kernel's socket as `socket_prefix` names it: the host (`host_id`) and process that started the kernel, a
#: random part, the channel.
_SOCKET_NAME = re.compile(r"cl-([0-9a-f]+)-(\d+)-[0-9a-f]{16}-\d+")


def socket_prefix() -> str | None:
    """Return a path prefix of one kernel's own for its channels' Unix sockets; None when none is short.

    Jupyter's runtime folder (private to the user) comes first, then the temporary folder. A prefix no
    other kernel has means no other process's kernel can bind, or reach, this kernel's channels. A kernel
    cleans its sockets up as it ends; those of a process killed outright (SIGKILL) are removed here, once
    the process on this host that started their kernel is gone (`_remove_orphan_sockets`).
    """
    name = f"cl-{_host_tag()}-{os.getpid()}-{uuid.uuid4().hex[:16]}"
    for folder in map(os.path.abspath, (jupyter_runtime_dir(), tempfile.gettempdir())):
        prefix = os.path.join(folder, name)
        if len(prefix.encode()) > _SOCKET_PATH_MAX:
            continue
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK | os.X_OK):
            _remove_orphan_sockets(folder)
            return prefix
    return None


def _host_tag() -> str:
    """Return how a socket's name tells this host: `host_id`'s hash (hosts may share a home folder)."""
    return host_id().removeprefix("host-")


def _remove_orphan_sockets(folder: str) -> None:
    """Remove the sockets `socket_prefix` named in `folder` whose starting process is gone: no one can use them.

    Only this host's: a process id means nothing on another host sharing the folder.
    """
    here = _host_tag()
    try:
        entries = os.scandir(folder)
    except OSError:
        return
    with entries:
        for entry in entries:
            match = _SOCKET_NAME.fullmatch(entry.name)
            if match and match.group(1) == here and not pid_alive(int(match.group(2))):
                try:
                    os.unlink(entry.path)
                except OSError:  # removed meanwhile by another process, or not ours to remove
                    pass


class IdleShutdownKernelManager(AsyncKernelManager):
    """The kernel manager of our notebook runs: channels on Unix sockets; no SIGINT on the way down.

    jupyter_client's default transport, TCP, picks a kernel's five ports before the kernel binds them:
    kernels started at the same moment by two processes (two runs, two test workers) could be given the
    same port, and one died ("Address already in use") or received the other's client's messages
    ("Invalid Signature"). On POSIX each kernel binds Unix sockets under a path prefix of its own
    (`socket_prefix`; ``transport="ipc"``), removed when it is cleaned up; TCP where no short path is at
    hand (or on Windows), or when the caller names a transport.

    jupyter_client's ``shutdown_kernel`` always interrupts the kernel (SIGINT)
    before it asks it to shut down. papermill shuts the kernel down right after
    the reply to its final ``kernel_info_request``, often before ipykernel has
    left that request's handler — inside which ipykernel turns SIGINT into a
    KeyboardInterrupt and logs ``[IPKernelApp] ERROR | KeyboardInterrupt
    caught in kernel.`` So successful runs printed an error that was none. A
    finished or failed notebook leaves the kernel idle, and an idle kernel
    honours the shutdown request without an interrupt; the kernel's log level
    is untouched, so its real errors still show.

    A run stopped by a signal abandons the cell under way (papermill has saved
    the partial notebook): its kernel, maybe busy, is killed at once with its
    process group — interrupting it and asking it to shut down races its
    reply to the cell against its own closing sockets and prints a traceback.
    """

    def __init__(self, **kwargs: Any) -> None:
        prefix = socket_prefix() if os.name == "posix" and "transport" not in kwargs else None
        if prefix is not None:
            kwargs.update(transport="ipc", ip=prefix)
        super().__init__(**kwargs)

    async def shutdown_kernel(  # type: ignore[override]  # jupyter_client's async manager declares it sync
        self, now: bool = False, restart: bool = False
    ) -> None:
        """Shut the kernel down, at once (``now``) when a signal is stopping the run."""
        await super().shutdown_kernel(now=now or stopping(), restart=restart)

    async def _async_interrupt_kernel(self) -> None:
        # The one private hook: jupyter_client's shutdown calls it directly before asking the kernel to go.
        if self.shutting_down:
            return
        await super()._async_interrupt_kernel()


# --------------------------------------------------------------------------- the listing


@dataclass(frozen=True)
class RunSummary:
    """One run folder as ``compaction-lab runs`` lists it.

    ``status`` is the effective one (``dead`` for a ``running`` run.json whose
    process is gone); ``recorded_status`` what run.json says. ``notebook`` is
    the failing, interrupted or executing notebook; ``wall_seconds`` the run's
    wall time (so far, for a running run; until its last heartbeat, for a dead one).
    """

    name: str
    path: str
    status: str
    recorded_status: str | None
    profile: str | None
    started: str | None
    finished: str | None
    wall_seconds: float | None
    notebook: str | None
    detail: str | None
    pid: int | None
    host: str | None

    def to_dict(self) -> dict[str, Any]:
        """Return the row as a plain dict (``compaction-lab runs --json``)."""
        return asdict(self)


@dataclass(frozen=True)
class Skipped:
    """A folder under the results folder that is not a run folder."""

    name: str
    reason: str


@dataclass(frozen=True)
class RunListing:
    """Every run folder under a results folder, newest first, and what was not listed."""

    results: str
    runs: tuple[RunSummary, ...]
    skipped: tuple[Skipped, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return the listing as plain dicts and lists (``compaction-lab runs --json``)."""
        return {
            "results": self.results,
            "runs": [r.to_dict() for r in self.runs],
            "skipped": [asdict(s) for s in self.skipped],
        }


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """Read a run folder's run.json as a mapping.

    Raises
    ------
    FileNotFoundError
        No run.json.
    ValueError
        Unreadable, not JSON, or not a JSON object.
    """
    path = Path(run_dir) / RUN_JSON
    try:
        info = bounded_json.load_file(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable: {exc}") from exc
    if not isinstance(info, dict):
        raise ValueError(f"{path}: not a JSON object")
    return info


def _seconds_between(a: Any, b: Any) -> float | None:
    start, end = _parse_time(a), _parse_time(b)
    return round((end - start).total_seconds(), 3) if start and end else None


def _last_interrupted(info: Mapping[str, Any]) -> str | None:
    rows = [r for r in info.get("notebooks") or [] if isinstance(r, dict) and r.get("status") == INTERRUPTED]
    return rows[-1].get("notebook") if rows else None


def summarize(
    run_dir: Path, info: Mapping[str, Any], *, host: str | None = None, now: datetime | None = None
) -> RunSummary:
    """Build a run folder's listing row from its run.json contents (the liveness rule applied)."""
    now = now or datetime.now(timezone.utc)
    recorded = info.get("status")
    status, detail, notebook = str(recorded or "unknown"), None, None
    wall = info.get("seconds") if isinstance(info.get("seconds"), (int, float)) else None
    if recorded == RUNNING:
        verdict = liveness(info, host=host, now=now)
        notebook = info.get("notebook_running")
        status = DEAD if verdict.state == "dead" else RUNNING
        detail = verdict.reason
        last = info.get("heartbeat") if status == DEAD else now.isoformat()
        wall = _seconds_between(info.get("started"), last)
    elif recorded == DEAD:
        notebook = info.get("notebook_running")
        dead = info.get("dead")
        detail = dead.get("reason") if isinstance(dead, Mapping) else None
        wall = _seconds_between(info.get("started"), info.get("heartbeat"))
    elif recorded == FAILED:
        error = info.get("error")
        err: Mapping[str, Any] = error if isinstance(error, Mapping) else {}
        notebook = err.get("notebook")
        detail = f"{err.get('ename', '?')}: {err.get('evalue', '')}".strip() if err else None
    elif recorded == INTERRUPTED:
        notebook = _last_interrupted(info)
        detail = f"stopped by {info.get('signal') or 'a signal'}"
    pid = info.get("pid")
    return RunSummary(
        name=Path(run_dir).name,
        path=str(run_dir),
        status=status,
        recorded_status=None if recorded is None else str(recorded),
        profile=info.get("profile"),
        started=info.get("started"),
        finished=info.get("finished"),
        wall_seconds=wall,
        notebook=notebook,
        detail=None if detail is None else " ".join(str(detail).split())[:200],
        pid=pid if isinstance(pid, int) else None,
        host=info.get("host"),
    )


def _unreadable(run_dir: Path, error: Exception) -> RunSummary:
    return RunSummary(
        Path(run_dir).name, str(run_dir), UNREADABLE, None, None, None, None, None, None, str(error), None, None
    )


def _sort_key(row: RunSummary) -> float:
    t = _parse_time(row.started)
    if t is not None:
        return t.timestamp()
    try:
        return Path(row.path).stat().st_mtime
    except OSError:
        return 0.0


def list_runs(results: Path, *, host: str | None = None, now: datetime | None = None) -> RunListing:
    """Every run folder directly under `results`, newest first.

    Folders without a run.json (a sweep's comparison folder, the
    ``interactive`` folder of notebooks opened by hand) are not runs: they are
    returned in ``skipped`` with the reason. A run.json that cannot be read
    is listed with status ``unreadable``, never dropped.
    """
    results = Path(results)
    rows: list[RunSummary] = []
    skipped: list[Skipped] = []
    folders = sorted(p for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    for folder in folders:
        try:
            info = read_run_json(folder)
        except FileNotFoundError:
            sweep = folder.name.startswith("sweep-") and (folder / "sweep.html").exists()
            skipped.append(Skipped(folder.name, "sweep comparison (its runs are listed)" if sweep else "no run.json"))
            continue
        except (ValueError, OSError) as exc:
            rows.append(_unreadable(folder, exc))
            continue
        try:
            rows.append(summarize(folder, info, host=host, now=now))
        except Exception as exc:  # a hand-edited or foreign run.json: listed as unreadable, never fatal
            rows.append(_unreadable(folder, exc))
    rows.sort(key=_sort_key, reverse=True)
    return RunListing(str(results), tuple(rows), tuple(skipped))


def record_interrupted(run_dir: Path, info: Mapping[str, Any], signal_name: str, reason: str) -> dict[str, Any]:
    """Write ``status: interrupted`` into the run.json of a run stopped from outside its process.

    A sweep stopped by a signal closes the workers executing its runs; they
    cannot record it themselves. The result reads as a run the runner
    interrupted: ``signal``, ``finished``, ``seconds``, the notebook cut short
    in ``notebooks`` with status ``interrupted`` (its partial ``.ipynb`` kept
    when it was saved), plus an ``interrupted`` block saying why and when.

    Parameters
    ----------
    run_dir : Path
    info : mapping
        The run.json contents as read (``running``).
    signal_name : str
        ``SIGINT`` / ``SIGTERM``.
    reason : str
        For people: what stopped the run.

    Returns
    -------
    dict
        What was written.
    """
    now = utc_now()
    notebooks = [r for r in info.get("notebooks") or [] if isinstance(r, dict)]
    many = info.get("notebooks_running")
    cuts = many if isinstance(many, list) and many else [info.get("notebook_running")]
    for cut in cuts:
        if isinstance(cut, str) and cut:
            out = Path(run_dir) / f"{cut}.ipynb"
            notebooks.append({"notebook": cut, "status": INTERRUPTED, "output": out.name if out.exists() else None})
    written = {
        **info,
        "status": INTERRUPTED,
        "signal": signal_name,
        "notebook_running": None,
        "notebooks_running": [],
        "notebooks": notebooks,
        "finished": now,
        "seconds": _seconds_between(info.get("started"), now),
        "interrupted": {"detected": now, "reason": reason},
    }
    write_json_atomic(Path(run_dir) / RUN_JSON, written)
    return written


def record_dead(results: Path, *, host: str | None = None) -> list[RunSummary]:
    """Write ``status: dead`` into the run.json of every run under `results` whose process is gone.

    Returns the runs found dead, each with its reason. A run.json that cannot
    be rewritten is still returned (its ``detail`` says so): the caller warns
    either way.
    """
    found: list[RunSummary] = []
    noticed_by = ProcessMark.current()
    for row in list_runs(results, host=host).runs:
        if row.status != DEAD or row.recorded_status != RUNNING:
            continue
        folder = Path(row.path)
        try:
            info = read_run_json(folder)
            if info.get("status") != RUNNING:  # it finished meanwhile
                continue
            info.update(
                status=DEAD,
                dead={"detected": utc_now(), "reason": row.detail, "noticed_by": f"{noticed_by.host}:{noticed_by.pid}"},
            )
            write_json_atomic(folder / RUN_JSON, info)
        except (OSError, ValueError) as exc:
            row = replace(row, detail=f"{row.detail}; not recorded: {exc}")
        found.append(row)
    return found


def format_seconds(seconds: float | None) -> str:
    """Wall time for people: ``38.3 s``, ``12 min 3 s``, ``2 h 5 min``."""
    if seconds is None:
        return "?"
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"


def format_listing(listing: RunListing) -> str:
    """Format the listing as an aligned text table (``compaction-lab runs``)."""
    if not listing.runs:
        return f"no run folders in {listing.results}"
    header = ("RUN", "STATUS", "PROFILE", "STARTED", "WALL", "NOTEBOOK")
    rows = [
        (r.name, r.status, r.profile or "?", r.started or "?", format_seconds(r.wall_seconds), r.notebook or "")
        for r in listing.runs
    ]
    widths = [max(len(str(x[i])) for x in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=False)).rstrip() for row in [header, *rows]]
    for r in listing.runs:
        if r.status in (DEAD, FAILED, UNREADABLE) and r.detail:
            lines.append(f"{r.name}: {r.status}: {r.detail}")
    if listing.skipped:
        lines.append(f"not runs: {', '.join(f'{s.name} ({s.reason})' for s in listing.skipped)}")
    return "\n".join(lines)
