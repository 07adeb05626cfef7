"""One kernel for a run's whole chain: papermill executes every notebook in it, each from a clean namespace.

A fresh kernel per notebook cost each of them a kernel start, ~1 s of imports (pandas, Altair, the
library) and vl-convert's JavaScript engine warming up before its first figure: on the smoke profile
that fixed cost was most of the run. Here the chain's first notebook starts the kernel and the others
reuse it; before each later notebook IPython's ``reset(new_session=True)`` empties the namespace (no
variable of one notebook is seen by the next) and restarts the execution count, so every notebook
still runs as if opened alone: imported modules stay loaded, nothing else is shared.

The kernel belongs to the run: `chain_kernel` shuts it down when the chain ends, fails or is stopped
by a signal (then nbclient's own handler has already killed it). A kernel that died is replaced by a
fresh one for the next attempt (`ChainKernel.manager`).

The engine is papermill's documented extension point (``papermill_engines.register``): it differs
from papermill's default engine in the namespace reset, in closing its client's channels after each
notebook (nbclient leaves them open when it does not own the kernel), and in saving the executed
notebook at most every `SAVE_EVERY` seconds while its cells run rather than twice per cell.
"""

from __future__ import annotations

import ast
import os
import queue
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from jupyter_core.utils import run_sync
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines
from papermill.utils import merge_kwargs, remove_args

from compaction_lab.run import lifecycle

#: The engine's name for papermill's ``engine_name``.
ENGINE = "compaction-lab-chain"

#: What clears a reused kernel before the next notebook: user names gone, execution count back to 1.
RESET_CODE = "get_ipython().reset(new_session=True)"
#: What the kernel runs after each notebook: its memo counts left for ``run.json`` (`store.memo.write_stats`),
#: once per notebook rather than at every lookup. Binds no name.
STATS_CODE = "__import__('compaction_lab.store.memo', fromlist=['write_stats']).write_stats()"


class _ChainClient(PapermillNotebookClient):
    """papermill's notebook client: a reused kernel's namespace emptied before the first cell, memo counts after."""

    def __init__(self, nb_man: Any, *, reset: bool, **kw: Any):
        super().__init__(nb_man, **kw)
        self.reset = reset

    def papermill_execute_cells(self) -> None:
        if self.reset:
            self._silently(RESET_CODE, "reset before the next notebook")
        super().papermill_execute_cells()  # returns after a failing cell too (papermill records it)
        self._silently(STATS_CODE, "asked for its memo counts")

    def _silently(self, code: str, what: str) -> None:
        # Silent and outside the history: the notebook's own cells are numbered from 1, as alone.
        reply = self.wait_for_reply(self.kc.execute(code, silent=True, store_history=False)) if self.kc else None
        if reply is None or reply["content"].get("status") != "ok":
            raise RuntimeError(f"the chain's kernel could not be {what}: {reply}")


#: Seconds between two saves of the executed notebook while its cells run (papermill saves it at every
#: cell's start and end: for short cells that was most of the runner's own time, each save serialising
#: and validating the whole notebook). The start and the end of the notebook, a failing cell and any
#: interruption are always saved.
SAVE_EVERY = 1.0


class _ChainManager(NotebookExecutionManager):
    """papermill's execution manager, saving the notebook at most every `SAVE_EVERY` seconds between cells."""

    throttled = False

    def save(self, **kwargs: Any) -> None:
        if self.throttled and (self.now() - self.last_save_time).total_seconds() < SAVE_EVERY:
            return
        super().save(**kwargs)

    @contextmanager
    def _throttling(self) -> Iterator[None]:
        self.throttled = True
        try:
            yield
        finally:
            self.throttled = False

    def cell_start(self, cell: Any, cell_index: int | None = None, **kwargs: Any) -> None:
        with self._throttling():
            super().cell_start(cell, cell_index, **kwargs)

    def cell_complete(self, cell: Any, cell_index: int | None = None, **kwargs: Any) -> None:
        with self._throttling():
            super().cell_complete(cell, cell_index, **kwargs)


class ChainEngine(NBClientEngine):
    """papermill engine running a notebook in the chain's kernel (`ChainKernel`), reset first if it ran one."""

    @classmethod
    def execute_notebook(
        cls,
        nb: Any,
        kernel_name: str,
        output_path: str | None = None,
        progress_bar: Any = True,
        log_output: bool = False,
        autosave_cell_every: int = 30,
        **kwargs: Any,
    ) -> Any:
        """`papermill.engines.Engine.execute_notebook` with `_ChainManager` (fewer saves while cells run)."""
        nb_man = _ChainManager(
            nb,
            output_path=output_path,
            progress_bar=progress_bar,
            log_output=log_output,
            autosave_cell_every=autosave_cell_every,
        )
        nb_man.notebook_start()
        try:
            cls.execute_managed_notebook(nb_man, kernel_name, log_output=log_output, **kwargs)
        finally:
            nb_man.cleanup_pbar()
            nb_man.notebook_complete()  # always saved: a failed or interrupted notebook is kept whole
        return nb_man.nb

    @classmethod
    def execute_managed_notebook(
        cls,
        nb_man: Any,
        kernel_name: str,
        log_output: bool = False,
        stdout_file: Any = None,
        stderr_file: Any = None,
        start_timeout: int = 60,
        execution_timeout: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """Execute `nb_man`'s notebook with the kernel of ``kwargs["chain"]``; the same arguments as papermill's."""
        chain: ChainKernel = kwargs.pop("chain")
        # Where a kernel starts: given to nbclient rather than as papermill's ``cwd``, which changes the
        # directory of the whole process around each notebook (two notebooks on two threads would leave it
        # in a run folder).
        kernel_cwd = kwargs.pop("kernel_cwd", None)
        if kernel_cwd is not None:
            kwargs["resources"] = {"metadata": {"path": str(kernel_cwd)}}
        kwargs = remove_args(["input_path", "timeout", "startup_timeout"], **kwargs)
        final = merge_kwargs(
            kwargs,
            timeout=execution_timeout,
            startup_timeout=start_timeout,
            kernel_name=kernel_name,
            log_output=log_output,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
        )
        km = chain.manager(kernel_name)
        client = _ChainClient(nb_man, km=km, reset=km.has_kernel, **final)
        try:
            return client.execute()
        finally:
            chain.notebooks += 1
            if client.kc is not None:
                client.kc.stop_channels()


papermill_engines.register(ENGINE, ChainEngine)


@dataclass
class ChainKernel:
    """The kernel a run's notebooks share (started by the first notebook, in the run folder).

    Attributes
    ----------
    km : kernel manager or None
        The current manager; replaced when its kernel died.
    notebooks : int
        Notebooks executed in it so far.
    last : str or None
        The last notebook executed in it (the runner gives a notebook the kernel that ran what it reads).
    """

    km: Any = None
    notebooks: int = 0
    last: str | None = None
    _lock: Any = field(default_factory=threading.RLock, repr=False, compare=False)

    def manager(self, kernel_name: str) -> Any:
        """Return the manager to execute the next notebook with: the running one, else a new, unstarted one."""
        if self.km is not None and self.km.has_kernel and run_sync(self.km.is_alive)():
            return self.km
        self.shutdown()
        self.km = lifecycle.IdleShutdownKernelManager(kernel_name=kernel_name)
        return self.km

    def warm(self, kernel_name: str, cwd: str, code: str, extra_arguments: Sequence[str]) -> bool:
        """Start the kernel now, in `cwd`, and run `code` in it (`warm_code`); return whether it is warm.

        Called on a runner thread while another kernel runs the chain's first notebook, so a notebook that
        later starts here skips the kernel's start, its imports and vl-convert's engine. Whatever `code`
        left in the namespace is cleared by the reset before that notebook. A kernel that failed to start or
        to run `code` is shut down (the notebook then starts a fresh one, as without warming): warming
        never fails a run. When `shutdown` is called meanwhile (the chain ended or was stopped) it returns.
        """
        km = None
        try:
            with self._lock:  # `shutdown` waits for a kernel being started, so none outlives the run
                km = self.manager(kernel_name)
                if not km.has_kernel:
                    # As nbclient starts a notebook's kernel (its history in memory, not in a file).
                    args = [*extra_arguments, "--HistoryManager.hist_file=:memory:"]
                    run_sync(km.start_kernel)(cwd=cwd, extra_arguments=args)
            kc = km.client()
            kc.start_channels()
            try:
                run_sync(kc.wait_for_ready)(timeout=WARM_TIMEOUT)
                msg_id = kc.execute(code, silent=True, store_history=False)
                deadline = time.monotonic() + WARM_TIMEOUT
                while self.km is km and time.monotonic() < deadline:
                    try:
                        reply = run_sync(kc.get_shell_msg)(timeout=0.2)
                    except queue.Empty:
                        continue
                    if reply["parent_header"].get("msg_id") == msg_id:
                        if reply["content"].get("status") == "ok":
                            return True
                        break
            finally:
                kc.stop_channels()
        except Exception:  # a kernel that would not start or answer: the notebook starts its own
            pass
        if self.km is km:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """End the kernel at once, with its process group, and forget it.

        When the chain ends its notebooks are saved and the kernel holds nothing of the run's: a
        polite shutdown only made the run wait ~1 s for the kernel's own exit. When a signal stops
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


#: Seconds a warming kernel may take to start, and then to run its warm-up code.
WARM_TIMEOUT = 120


def warm_code(sources: Iterable[Path], encoding: str | None = None) -> str:
    """Return the code that warms a kernel for these notebooks: their imports, vl-convert's engine, the encoding.

    The imports are the notebooks' own import statements at the top level of their code cells, each run on
    its own (one that fails is left for its notebook to report), and scipy.special, which the exam's
    intervals import on first use; then `theme.warm` (the engine a notebook's first figure would start)
    and the tiktoken encoding `encoding`, when given (loaded; no text is counted, so a counter's hits and
    misses stay the notebooks' own). Only what the notebooks would load themselves: no result of theirs
    depends on it.

    Parameters
    ----------
    sources : paths of notebooks
    encoding : str, optional
        The run's ``encoding`` parameter.
    """
    statements: list[str] = []
    for source in sources:
        for cell in nbformat.read(source, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:  # IPython magics: not Python, nothing to import from it
                continue
            for node in tree.body:
                if isinstance(node, ast.Import | ast.ImportFrom) and ast.unparse(node) not in statements:
                    statements.append(ast.unparse(node))
    # scipy.special (~0.5 s) the exam's intervals import on first use, not at the notebooks' imports.
    statements.append("__import__('compaction_lab.exam.intervals', fromlist=['scipy_special']).scipy_special()")
    lines = [f"try:\n    {s}\nexcept Exception:\n    pass" for s in statements]
    lines.append("__import__('compaction_lab.report.theme', fromlist=['warm']).warm()")
    if encoding is not None:
        lines.append(f"__import__('compaction_lab.core.tokens', fromlist=['get_encoding']).get_encoding({encoding!r})")
    return "\n".join(lines)


@contextmanager
def chain_kernel() -> Iterator[ChainKernel]:
    """Yield the `ChainKernel` of one chain; its kernel is shut down when the block ends, however it ends."""
    kernel = ChainKernel()
    try:
        yield kernel
    finally:
        kernel.shutdown()


__all__ = [
    "ENGINE",
    "RESET_CODE",
    "STATS_CODE",
    "WARM_TIMEOUT",
    "ChainEngine",
    "ChainKernel",
    "chain_kernel",
    "warm_code",
]
