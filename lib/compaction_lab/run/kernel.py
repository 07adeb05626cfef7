"""One kernel for a run's whole chain, started early and warmed: each notebook runs in it from a clean namespace.

A fresh kernel per notebook cost each of them a kernel start, the imports (pandas, Altair, the
library) and vl-convert's JavaScript engine warming up before its first figure: on the smoke profile
that fixed cost was most of the run. Here the chain's notebooks reuse the kernels of the run
(`ChainKernel`); before each later notebook the namespace is emptied (`compaction_lab.run.execution`),
so every notebook still runs as if opened alone: imported modules stay loaded, nothing else is shared.

A kernel can start before its run has a folder: `launched` starts the run's kernels as the command
begins, while the runner imports and checks the profile, and loads what the notebooks import
(`warm_code`); the runner then moves each into the run folder and gives it the run's environment
(`adopt_code`). This module imports nothing heavy (no papermill, no pandas), so the kernels start first.

The kernel belongs to the run: `chain_kernel` shuts it down when the chain ends, fails or is stopped
by a signal (then nbclient's own handler has already killed it). A kernel that died is replaced by a
fresh one for the next attempt (`ChainKernel.manager`).
"""

from __future__ import annotations

import ast
import json
import os
import queue
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_core.utils import ensure_async, run_sync

from compaction_lab.core import python_source
from compaction_lab.run import lifecycle


@dataclass
class ChainKernel:
    """A kernel a run's notebooks share: started by its first notebook, warmed (`warm`) or launched before the run.

    Attributes
    ----------
    km : kernel manager or None
        The current manager; replaced when its kernel died.
    notebooks : int
        Notebooks executed in it so far.
    closed : bool
        Set by `close`: no new kernel is started for it.
    last : str or None
        The last notebook executed in it (the runner gives a notebook the kernel that ran what it reads).
    env : dict or None
        The environment its kernel starts with (a sweep's shared kernel: its current run's); None: this
        process's.
    given : dict or None
        The environment this process gave its kernel: the one it started with (`start_options`), then as each
        run that took it moved it (`warm`'s `environment`). What the kernel set itself is not in it.
    """

    km: Any = None
    notebooks: int = 0
    last: str | None = None
    closed: bool = False
    env: dict[str, str] | None = None
    given: dict[str, str] | None = None
    _lock: Any = field(default_factory=threading.RLock, repr=False, compare=False)
    # One client at a time: jupyter_client names a client's shell socket after its manager's session, so a
    # second client of the same kernel takes the first one's replies (the first then waits for ever).
    _client: Any = field(default_factory=threading.Lock, repr=False, compare=False)

    def manager(self, kernel_name: str) -> Any:
        """Return the manager to execute the next notebook with: the running one, else a new, unstarted one."""
        if self.km is not None and self.km.has_kernel and run_sync(self.km.is_alive)():
            return self.km
        self.shutdown()
        if self.closed:
            raise RuntimeError("this kernel was closed: it starts no new process")
        self.km = lifecycle.IdleShutdownKernelManager(kernel_name=kernel_name)
        return self.km

    def warm(
        self,
        kernel_name: str,
        cwd: str,
        code: str,
        extra_arguments: Sequence[str],
        after: Future[Any] | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> bool:
        """Start the kernel now, in `cwd`, and run `code` in it (`warm_code`); return whether it is warm.

        Called on a runner thread while another kernel runs the chain's first notebook, so a notebook that
        later starts here skips the kernel's start, its imports and vl-convert's engine. Whatever `code`
        left in the namespace is cleared by the reset before that notebook. A kernel that failed to start or
        to run `code` is shut down (the notebook then starts a fresh one, as without warming): warming
        never fails a run. When `shutdown` is called meanwhile (the chain ended or was stopped) it returns.
        With `after` (another kernel's warm) the kernel starts at once but runs `code` once that is done:
        on two cores two warms at once slowed the one the first notebook waits for.
        With `environment` (a run taking a kernel started before it) the kernel first moves into `cwd` with
        that environment (`adopt_code` of what differs from `given`): the environment a kernel the run
        started itself would have, whatever this process's was when this one started.
        """
        km = None
        try:
            with self._lock:  # `shutdown` waits for a kernel being started, so none outlives the run
                km = self.manager(kernel_name)
                if not km.has_kernel:
                    # As nbclient starts a notebook's kernel (its history in memory, not in a file).
                    args = [*extra_arguments, "--HistoryManager.hist_file=:memory:"]
                    run_sync(km.start_kernel)(cwd=cwd, extra_arguments=args, **self.start_options())
            with self._client:  # a warm of the same kernel on another thread (a launched kernel's) ends first
                if self.km is not km:
                    return False  # shut down while waiting
                kc = connected(km, WARM_TIMEOUT)
                try:
                    while after is not None and self.km is km and not wait([after], timeout=0.2).done:
                        pass
                    if environment is not None:
                        code = f"{adopt_code(cwd, self.changes(environment))}\n{code}"
                    msg_id = kc.execute(code, silent=True, store_history=False)
                    deadline = time.monotonic() + WARM_TIMEOUT
                    while self.km is km and time.monotonic() < deadline:
                        try:
                            reply = run_sync(kc.get_shell_msg)(timeout=0.2)
                        except queue.Empty:
                            continue
                        if reply["parent_header"].get("msg_id") == msg_id:
                            if reply["content"].get("status") == "ok":
                                if environment is not None:
                                    self.given = dict(environment)
                                return True
                            break
                finally:
                    kc.stop_channels()
        except Exception:  # a kernel that would not start or answer: the notebook starts its own
            pass
        if self.km is km:
            self.shutdown()
        return False

    def start_options(self) -> dict[str, Any]:
        """Options for starting its kernel (`KernelManager.start_kernel`): its environment (`env`, else this process's).

        Called as the kernel starts: the environment is kept as the one it was given (`given`).
        """
        self.given = dict(os.environ if self.env is None else self.env)
        return {"env": dict(self.given)}

    def changes(self, environment: Mapping[str, str]) -> dict[str, str | None]:
        """Return what moves the kernel from the environment it was given (`given`) to `environment` (None: removed)."""
        given = self.given or {}
        out: dict[str, str | None] = {k: v for k, v in environment.items() if given.get(k) != v}
        out.update(dict.fromkeys(k for k in given if k not in environment))
        return out

    @contextmanager
    def lease(self) -> Iterator[None]:
        """Hold the kernel for one client's use (a notebook's): no warm of it talks to it meanwhile."""
        with self._client:
            yield

    def close(self) -> None:
        """Shut the kernel down for good: a warm still to start one starts none (`Launch.close`)."""
        with self._lock:
            self.closed = True
        self.shutdown()

    def shutdown(self) -> None:
        """End the kernel at once, with its process group, and forget it.

        When the chain ends its notebooks are saved and the kernel holds nothing of the run's: a
        polite shutdown only made the run wait for the kernel's own exit. When a signal stops
        the run, nbclient's handler is shutting the same kernel down already and the manager may
        refuse a second shutdown: the process is then killed directly, so no kernel outlives its run.
        """
        with self._lock:
            km, self.km = self.km, None
        if km is None:
            return
        try:
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=True)
        except Exception:  # any refusal: what matters is that the process is gone
            _kill(km)
        try:
            run_sync(km.cleanup_resources)()
        except Exception:  # connection files of a kernel already gone: nothing to keep
            pass


def _kill(km: Any) -> None:
    """Kill a kernel's process and its process group (jupyter_client starts it in a session of its own)."""
    proc = getattr(getattr(km, "provisioner", None), "process", None)
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    try:
        proc.wait(timeout=10)
    except Exception:  # reaped elsewhere, or stuck in the kernel: nothing more to do here
        pass


def connected(km: Any, timeout: float) -> Any:
    """Return a new client of `km`'s running kernel, its channels started and its output channel proven to deliver.

    What jupyter_client's ``wait_for_ready`` ensures, without its wait: that one asks for the kernel's
    info and then waits until the output channel has been quiet for 0.2 s, which every notebook after the
    first in a kernel paid (most of the gap between two notebooks). Here the client asks for
    the kernel's info until the output channel carries the kernel's "idle" after one of those requests
    (its subscription reaches the kernel a moment after it connects: what the kernel published before is
    not seen) and the reply has come; a kernel whose process ended raises at once, one silent for
    `timeout` seconds raises then. The caller closes the client's channels when done.
    """
    kc = km.client()
    # No heartbeat channel: a client its manager made asks the manager whether the kernel lives (the
    # process), and the heartbeat's thread, once the kernel has died, makes socket after socket.
    kc.start_channels(hb=False)
    try:
        run_sync(_answering)(km, kc, timeout)
    except BaseException:
        kc.stop_channels()
        raise
    kc.allow_stdin = False  # as nbclient sets its own: a notebook's input() raises rather than waits
    return kc


#: Seconds `connected` waits for the kernel's "idle" after one info request before it asks again.
_ASK_AGAIN = 0.5


async def _answering(km: Any, kc: Any, timeout: float) -> None:
    """Ask for `kc`'s kernel info until its "idle" arrives on the output channel and its reply on the shell."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not await ensure_async(km.is_alive()):
            raise RuntimeError("the kernel died before it answered")
        msg_id = kc.kernel_info()
        until = min(deadline, time.monotonic() + _ASK_AGAIN)
        idle = False
        while not idle and time.monotonic() < until:
            try:
                msg = await kc.iopub_channel.get_msg(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            idle = (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"].get("execution_state") == "idle"
            )
        if not idle:
            continue
        try:
            while True:  # the reply is on its way (sent before the "idle"): take it
                reply = await kc.shell_channel.get_msg(timeout=max(0.0, deadline - time.monotonic()))
                if reply["parent_header"].get("msg_id") == msg_id:
                    return
        except queue.Empty:
            break
    raise RuntimeError(f"the kernel did not answer within {timeout:g} s")


#: Seconds a warming kernel may take to start, and then to run its warm-up code.
WARM_TIMEOUT = 120


def warm_code(sources: Iterable[Path], encoding: str | None = None) -> str:
    """Return the code that warms a kernel for these notebooks: their imports, vl-convert's engine, the encoding.

    The imports are the notebooks' own import statements at the top level of their code cells, each run on
    its own (one that fails is left for its notebook to report), and scipy.special, which the exam's
    intervals import on first use; then `theme.warm` (the engine a notebook's first figure would start)
    and the tiktoken encoding `encoding`, when given (loaded; no text is counted, so a counter's hits and
    misses stay the notebooks' own); last, everything these made is moved out of the collector's sight
    (`gc.freeze`: it lives as long as the kernel). Only what the notebooks would load themselves: no result
    of theirs depends on it.

    Parameters
    ----------
    sources : paths of notebooks
    encoding : str, optional
        The run's ``encoding`` parameter.
    """
    statements: list[str] = []
    for source in sources:
        # The notebook's JSON as it is (nbformat 4: a cell's source a string or a list of lines); nbformat
        # itself is not imported here (slow to import), so `launched` starts the kernels sooner.
        for cell in json.loads(Path(source).read_text(encoding="utf-8")).get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            text = cell.get("source", "")
            try:
                tree = python_source.parse("".join(text) if isinstance(text, list) else text)
            except SyntaxError:  # IPython magics: not Python, nothing to import from it
                continue
            for node in tree.body:
                if isinstance(node, ast.Import | ast.ImportFrom) and ast.unparse(node) not in statements:
                    statements.append(ast.unparse(node))
    # scipy.special (slow to import) the exam's intervals import on first use, not at the notebooks' imports.
    statements.append(
        "__import__('compaction_lab.exam.statistics.intervals', fromlist=['scipy_special']).scipy_special()"
    )
    lines = [f"try:\n    {s}\nexcept Exception:\n    pass" for s in statements]
    lines.append("__import__('compaction_lab.report.theme', fromlist=['warm']).warm()")
    if encoding is not None:
        lines.append(f"__import__('compaction_lab.core.tokens', fromlist=['get_encoding']).get_encoding({encoding!r})")
    # What the imports made lives as long as the kernel: frozen out of the collector's sight, so the full
    # collection of every reset before a notebook (IPython's) and of its cells skips it.
    lines.append("__import__('gc').collect()\n__import__('gc').freeze()")
    return "\n".join(lines)


def adopt_code(cwd: str | os.PathLike[str], environment: Mapping[str, str | None]) -> str:
    """Return the code that moves a kernel started before its run (`launched`), or used by an earlier run, into the run.

    Into the run folder `cwd` (where the runner starts a kernel itself), with `environment` set: the
    variables in which a kernel started inside the run would differ (`ChainKernel.changes`: the run's
    tokenizer, scheduler and memo folders, whatever this process set since); a variable
    given as None is removed, so a kernel a sweep's earlier run used keeps none of that run's. This
    process's memo layer and counts are forgotten (`store.memo.forget`): a run's memo counts are its own,
    and what it reuses comes from the memo folder, as in a kernel of its own; so are its model clients
    (`endpoints.shared.forget`), made with an earlier run's ledger. Binds no name.
    """
    env = dict(environment)
    keep = {k: v for k, v in env.items() if v is not None}
    drop = sorted(k for k, v in env.items() if v is None)
    return (
        f"__import__('os').chdir({os.fspath(cwd)!r})\n"
        f"__import__('os').environ.update({keep!r})\n"
        f"[__import__('os').environ.pop(k, None) for k in {drop!r}]\n"
        "__import__('compaction_lab.store.memo', fromlist=['forget']).forget()\n"
        "__import__('compaction_lab.endpoints.shared', fromlist=['forget']).forget()"
    )


#: The kernel every run's notebooks execute in.
KERNEL_NAME = "python3"
#: The kernel is local and short-lived; its warning about unencrypted loopback TCP is noise in every
#: run's output, so only errors are shown.
KERNEL_ARGUMENTS = ("--IPKernelApp.log_level=ERROR",)
#: Kernels a run uses by default, at most (`default_kernels`): the chain's widest step is two notebooks
#: whose inputs are ready at once (02 beside 03; 04 beside 05 then 06).
MAX_DEFAULT_KERNELS = 2


def default_kernels() -> int:
    """Return the kernels a run uses unless told (``--kernels``): one per core the process may use, at most 2."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_KERNELS, cores))


@dataclass(frozen=True)
class Launch:
    """Kernels started before the run that takes them, each warming on its own thread (`launched`).

    Attributes
    ----------
    kernels : tuple of ChainKernel
    warming : tuple of futures
        Each kernel's `ChainKernel.warm`, True once its warm code ran.
    shared : bool
        The kernels serve run after run (a sweep's: `compaction_lab.run.sweep`): a run that takes them moves them
        into its folder and resets them as it would its own, and leaves them running when its chain ends;
        a kernel a stopped run killed is started again by the next. Else they are the one run's, ended
        with its chain.
    """

    kernels: tuple[ChainKernel, ...]
    warming: tuple[Future[bool], ...]
    shared: bool = False

    def close(self) -> None:
        """Shut every kernel down now (the command turned out to need none: a sweep on an engine); `launched` does it at the end."""
        for k in self.kernels:
            k.close()


@contextmanager
def launched(count: int, notebooks: Iterable[Path]) -> Iterator[Launch]:
    """Start `count` kernels now, in the current folder, each importing what `notebooks` import (`warm_code`).

    For ``compaction-lab run``: the kernels start and load their imports while the runner imports its
    own modules and checks the profile (a good part of a small run). The run that takes them (`run_profile`'s
    `launch`) moves each into its folder (`adopt_code`) before a notebook runs there. When the block ends
    every kernel is shut down, whether a run took it or not (a bad profile, a signal); a sweep lends them
    to each of its runs in turn (`Launch.shared`), so they stay warm from one run to the next.
    """
    try:
        code = warm_code(notebooks)
    except (OSError, ValueError, SyntaxError):  # no notebooks to read (an installed package without them)
        code, count = "", 0
    kernels = tuple(ChainKernel() for _ in range(max(0, count)))
    pool = ThreadPoolExecutor(max(1, len(kernels)), thread_name_prefix="launch")
    try:
        cwd = os.getcwd()
        warming: list[Future[bool]] = []
        for k in kernels:  # all start at once; each warms after the one before (`ChainKernel.warm`'s `after`)
            before = warming[-1] if warming else None
            warming.append(pool.submit(k.warm, KERNEL_NAME, cwd, code, KERNEL_ARGUMENTS, before))
        yield Launch(kernels, tuple(warming))
    finally:
        for k in kernels:
            k.close()  # a warm under way returns within its poll (`ChainKernel.warm`); none starts a kernel after
        pool.shutdown(wait=True)


@contextmanager
def chain_kernel() -> Iterator[ChainKernel]:
    """Yield the `ChainKernel` of one chain; its kernel is shut down when the block ends, however it ends."""
    kernel = ChainKernel()
    try:
        yield kernel
    finally:
        kernel.shutdown()


__all__ = [
    "KERNEL_ARGUMENTS",
    "KERNEL_NAME",
    "MAX_DEFAULT_KERNELS",
    "WARM_TIMEOUT",
    "ChainKernel",
    "Launch",
    "adopt_code",
    "chain_kernel",
    "connected",
    "default_kernels",
    "launched",
    "warm_code",
]
