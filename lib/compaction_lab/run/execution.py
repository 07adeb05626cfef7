"""The papermill engine of a run's chain: notebooks executed in the run's kernels (`compaction_lab.run.kernel`).

The engine is papermill's documented extension point (``papermill_engines.register``): it differs
from papermill's default engine in the namespace reset before a notebook in a kernel that ran one, in
closing its client's channels after each notebook (nbclient leaves them open when it does not own the
kernel), and in saving the executed notebook at most every `SAVE_EVERY` seconds while its cells run
rather than twice per cell.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines
from papermill.utils import merge_kwargs, remove_args

from compaction_lab.run.kernel import ChainKernel, connected

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
        with chain.lease():
            client = _ChainClient(nb_man, km=km, reset=km.has_kernel, **final)
            if km.has_kernel:  # nbclient's own client would first wait for 0.2 s of quiet (`kernel.connected`)
                client.kc = connected(km, start_timeout)
            try:
                return client.execute(**({} if km.has_kernel else chain.start_options()))
            finally:
                chain.notebooks += 1
                if client.kc is not None:
                    client.kc.stop_channels()


papermill_engines.register(ENGINE, ChainEngine)


__all__ = ["ENGINE", "RESET_CODE", "SAVE_EVERY", "STATS_CODE", "ChainEngine"]
