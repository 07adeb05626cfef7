"""Sweeps: the chain once per combination of swept values, a plan to resume from, the comparison page.

``compaction-lab run --sweep window=16000,24000 --sweep seed=range(1,11)`` (or a
profile's ``sweeps:`` block) runs `run_sweep`: every combination checked first,
the plan (`SweepPlan`: the profile as it was, the values, one run folder name per
combination) written to ``sweep.json``, then one run folder per combination
(`compaction_lab.run.runner.run_profile`), in this process or as tasks on the
engine, and the comparison (``sweep.parquet``, ``sweep.html`` by
`compaction_lab.report.sweep_page`). ``run --resume SWEEP_DIR`` is `resume_sweep`.

A sweep is counted before it is listed (at most ``max_sweep_runs`` runs, itself at most
`parameter_rules.MAX_SWEEP_RUNS_CEILING`, which nothing raises; a resumed plan is held to the same),
reaches its cluster before it writes anything, and holds its folder's lock
(`SWEEP_LOCK`) while it runs or resumes, so two processes never share it.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import logging
import math
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.core import bounded_json, paths, runfolder
from compaction_lab.core.errors import ProfileError
from compaction_lab.engine.scheduler import AUTO, POOL, SYNC, Engine, open_engine, scheduler_setting
from compaction_lab.privacy import redactor as redactor_mod
from compaction_lab.privacy import secrets
from compaction_lab.report import share
from compaction_lab.run import kernel as kernel_mod
from compaction_lab.run import lifecycle, parameter_rules
from compaction_lab.run import params as params_mod
from compaction_lab.run.runner import (
    REDACT_PARAM,
    NotebookFailed,
    Profile,
    RunResult,
    final_sweep,
    load_profile,
    public_parameters,
    run_folder_name,
    run_profile,
)
from compaction_lab.store import memo as memo_mod

#: The sweep folder's memo (`compaction_lab.store.memo`): results every run of the sweep shares by content.
MEMO_DIR = "memo"


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``key=v1,v2,...``, ``key=[v1, v2]`` or ``key=range(1,11)`` from ``--sweep``: the values to run one folder each."""
    key, raw = text.split("=", 1) if "=" in text else (text, "")
    key = key.strip()
    if not key or not raw.strip():
        raise ProfileError(f"expected key=v1,v2,... or key=range(a,b), got {text!r}")
    try:
        return key, params_mod.sweep_values(key, raw)
    except ValueError as exc:
        raise ProfileError(f"--{exc}") from None


#: Columns of the comparison table a sweep writes (`sweep.parquet`).
SWEEP_COLUMNS = ["run", "status", *share.HEADLINE_COLUMNS]

#: The plan a sweep writes into its folder before its first run: enough to resume it (`resume_sweep`).
SWEEP_PLAN = "sweep.json"

#: The file in a sweep folder that the process running or resuming the sweep holds locked (`_hold_sweep`).
SWEEP_LOCK = ".sweep.lock"

#: The parameter (a profile's ``parameters``, ``--set``) bounding how many runs a sweep may plan.
MAX_SWEEP_RUNS = "max_sweep_runs"

#: Seconds to wait, once a stopped sweep has closed its embedded cluster, for a worker's process to be gone.
WORKERS_GONE_WAIT_S = 10.0


@dataclass(frozen=True)
class SweepResult:
    """A batch: one run per value combination and the comparison across them.

    ``executed`` names the runs this invocation ran; on a resumed sweep the
    others had completed before and were only read back.
    """

    folder: Path
    runs: tuple[tuple[dict[str, Any], RunResult | None, str], ...]  # (values, result, status)
    table: pd.DataFrame
    report: Path
    executed: tuple[str, ...] = ()


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep runs: the profile, the swept values, one planned run folder name per combination.

    Written as ``sweep.json`` before the first run starts, so a sweep that was
    killed, stopped or had failures can be resumed (`resume_sweep`) exactly as
    planned, whatever has changed in the profile file since.
    """

    profile: Profile
    sweeps: Mapping[str, list[Any]]
    combos: tuple[dict[str, Any], ...]
    names: tuple[str, ...]
    overrides: Mapping[str, Any] = field(default_factory=dict)
    redact: bool | None = None
    allow_unknown: bool = False
    notebook_html: bool = True  # False: `--no-html`, the runs render no notebook HTML (their reports still do)

    def to_json(self, scheduler: str) -> dict[str, Any]:
        """Return the ``sweep.json`` document (`SWEEP_PLAN`), every value as a sweep shows it (`_shown`).

        A credential in a value (a password in a model's URL, in any form) is kept masked: the
        plan cannot give it back, and `resume_sweep` refuses such a plan saying so (`_check_kept`).
        """
        prof = self.profile
        return _shown(
            {
                "profile": prof.name,
                "profile_spec": {
                    "name": prof.name,
                    "description": prof.description,
                    "notebooks": list(prof.notebooks),
                    "parameters": public_parameters(prof.parameters),
                    "notebook_parameters": {nb: public_parameters(ps) for nb, ps in prof.notebook_parameters.items()},
                    "path": str(prof.path) if prof.path else None,
                },
                "sweeps": {k: list(v) for k, v in self.sweeps.items()},
                "overrides": public_parameters(self.overrides),
                "redact": self.redact,
                "allow_unknown": self.allow_unknown,
                "notebook_html": self.notebook_html,
                "scheduler": scheduler,
                "runs": [
                    {"values": public_parameters(c), "run": name}
                    for c, name in zip(self.combos, self.names, strict=True)
                ],
                "resumed": [],
            }
        )

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SweepPlan:
        """Read a ``sweep.json`` back (KeyError / TypeError / ValueError on a malformed one)."""
        spec = doc["profile_spec"]
        prof = Profile(
            name=spec["name"],
            description=spec.get("description", ""),
            notebooks=tuple(spec["notebooks"]),
            parameters=dict(spec.get("parameters") or {}),
            notebook_parameters={nb: dict(ps) for nb, ps in (spec.get("notebook_parameters") or {}).items()},
            path=Path(spec["path"]) if spec.get("path") else None,
        )
        runs = list(doc["runs"])
        return cls(
            profile=prof,
            sweeps={k: list(v) for k, v in doc["sweeps"].items()},
            combos=tuple(dict(r["values"]) for r in runs),
            names=tuple(str(r["run"]) for r in runs),
            overrides=dict(doc.get("overrides") or {}),
            redact=doc.get("redact"),
            allow_unknown=bool(doc.get("allow_unknown", False)),
            notebook_html=bool(doc.get("notebook_html", True)),
        )


@lifecycle.stop_on_signals()  # a signal anywhere in the sweep stops it as RunInterrupted, never mid-traceback
def run_sweep(
    profile: Profile | str,
    sweeps: Mapping[str, list[Any]],
    *,
    results: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: bool = True,
    redact: bool | None = None,
    allow_unknown: bool = False,
    scheduler: str | None = None,
    notebook_html: bool = True,
    launch: kernel_mod.Launch | None = None,
) -> SweepResult:
    """Run the profile once per combination of swept values, each into its own run folder.

    Every combination's parameters are checked before the first run starts
    (`ProfileError` listing every problem of every combination). The plan --
    the profile, the values, one run folder name per combination -- is written
    first into ``<results>/sweep-<profile>-<timestamp>/sweep.json``. A failing
    run is recorded (status ``failed``) and the sweep goes on; the comparison
    table (`SWEEP_COLUMNS` plus one column per swept key, ``sweep.parquet``)
    and ``sweep.html`` go into the same folder. SIGINT / SIGTERM stop the sweep
    with the run under way (`lifecycle.RunInterrupted`, its ``sweep_dir`` set)
    after the comparison so far is written. A stopped, killed or partly failed
    sweep is finished by `resume_sweep` (``run --resume SWEEP_DIR``).

    Where the runs execute: with no scheduler set (``auto``) or ``sync``, one
    after the other in this process (each run's notebooks already use the
    machine's cores), all in the same warm kernels (`launch`'s, else started
    here: `kernel.launched`), which each run moves into its folder and resets
    as it does its own, so no run after the first pays for a kernel's start or
    its imports (`kernel.Launch.shared`); with ``local`` or a scheduler address (`scheduler`, else
    ``COMPACTION_LAB_SCHEDULER``, else the profile's ``scheduler``), each run is
    one task on the engine (`_sweep_task`), its folder under `results`, which
    the workers must share. A run whose worker dies is retried by Dask: the
    dead attempt's folder is moved to ``<sweep>/attempts/`` and the run starts
    over under the same name, so every combination leaves exactly one run
    folder; model calls the dead attempt finished are answered from the ledger.
    A sweep stopped while runs execute on an embedded cluster (``local``)
    closes it and marks those runs ``interrupted`` (`RunInterrupted.runs`).

    Nothing is written before the sweep is known to be able to run: the plan
    is counted first -- more runs than ``max_sweep_runs`` (a profile
    parameter or ``--set``, default `parameter_rules.DEFAULT_MAX_SWEEP_RUNS`, never
    above `parameter_rules.MAX_SWEEP_RUNS_CEILING`) is a `ProfileError` giving the
    count and the limit, before a combination is listed -- and a cluster is
    reached (`open_engine`, `EngineError` when it cannot be) before the
    sweep folder exists. The folder is locked
    (`SWEEP_LOCK`) while the sweep runs, so no resume runs beside it.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    given = dict(overrides or {})
    limit = _sweep_limit(prof, given)
    # The limit is the sweep's, not its runs': their run.json would list it among unused parameters.
    prof = replace(prof, parameters={k: v for k, v in prof.parameters.items() if k != MAX_SWEEP_RUNS})
    given.pop(MAX_SWEEP_RUNS, None)
    _check_size(prof, sweeps, limit)
    keys = list(sweeps)
    combos = [dict(zip(keys, vals, strict=False)) for vals in itertools.product(*(sweeps[k] for k in keys))]
    _check_sweep(prof, combos, given, redact, results, allow_unknown)
    where = scheduler_setting(scheduler, _profile_scheduler(prof, given))
    with _engine_for(where, progress) as eng:
        # Planned before its folder exists (names that fit, `_run_names`), so a sweep that cannot be made
        # leaves no folder behind (`_new_sweep`).
        plan = SweepPlan(
            profile=replace(prof, sweeps={}),
            sweeps={k: list(v) for k, v in sweeps.items()},
            combos=tuple(combos),
            names=tuple(_run_names(prof.name, combos, Path(results) if results else paths.results_dir())),
            overrides=given,
            redact=redact,
            allow_unknown=allow_unknown,
            notebook_html=notebook_html,
        )
        # The limit the plan was made under: a resume holds the plan to it (`_check_plan_size`).
        with _new_sweep(prof.name, results, {**plan.to_json(where), MAX_SWEEP_RUNS: limit}) as folder:
            return _execute_sweep(plan, folder, eng, set(range(len(combos))), progress, launch)


@contextmanager
def _new_sweep(profile: str, results: Path | None, doc: Mapping[str, Any]) -> Iterator[Path]:
    """Create a sweep folder, hold it (`_hold_sweep`) and write its plan `doc`; yield the folder, held.

    Until its plan is written, a failure removes the folder again: a sweep that cannot be created
    leaves no half-made folder (an `OSError` -- a full disk, a folder not writable, a name too long --
    is a `ProfileError` saying so).
    """
    where = Path(results) if results else paths.results_dir()
    try:
        folder = runfolder.create_run_dir(run_folder_name(f"sweep-{profile}"), where)
    except OSError as exc:
        raise ProfileError(f"cannot create a sweep folder in {where}: {exc.strerror or exc}") from None
    with ExitStack() as held:
        try:
            held.enter_context(_hold_sweep(folder))
            lifecycle.write_json_atomic(folder / SWEEP_PLAN, doc)
        except BaseException as exc:
            held.close()
            shutil.rmtree(folder, ignore_errors=True)
            if isinstance(exc, OSError):
                raise ProfileError(
                    f"cannot create the sweep {folder.name} in {where} ({exc.strerror or exc}); nothing was left there"
                ) from None
            raise
        yield folder


@lifecycle.stop_on_signals()
def resume_sweep(
    folder: Path | str,
    *,
    progress: bool = True,
    scheduler: str | None = None,
    launch: kernel_mod.Launch | None = None,
) -> SweepResult:
    """Finish a sweep as its plan says: runs that completed are kept, the others run again.

    A planned run whose folder says ``ok`` is not repeated. One that failed,
    was interrupted, was killed (``running`` with its process gone) or never
    started runs again under its planned name; an earlier attempt's folder is
    moved to ``<sweep>/attempts/<run>.attempt-N`` first -- also a folder whose
    ``run.json`` is missing or unreadable (an attempt cut short before it
    wrote one, or a damaged file). The comparison table and ``sweep.html``
    are rebuilt from every planned run. Before a run starts, the sweep's
    memo is checked (`_check_memo`): an entry not signed by this machine's
    key for this sweep is removed and computed again, never unpickled; how
    many is said on stderr and recorded (``resumed[].memo_untrusted``).

    Before anything is moved or written: the plan may list no more runs than
    a new sweep may plan (`_check_plan_size`: the ``max_sweep_runs`` it was
    made under, and the hard ceiling), its run names must be plain
    folder names in the sweep's results folder (`_check_run_names`), the
    sweep folder is locked (`SWEEP_LOCK`: one resume at a time, none beside
    the sweep itself) and a cluster, if one is to run the runs, is reached.

    Parameters
    ----------
    folder : path
        The sweep folder (or its ``sweep.json``).

    Raises
    ------
    ProfileError
        The folder holds no readable plan, the plan lists more runs than
        ``max_sweep_runs`` allows, the plan names a run folder outside
        the results folder, another process holds the sweep, the plan's
        parameters no longer pass the checks, or a run of the sweep is still
        running (its process alive): never two processes in one run folder.
    EngineError
        The scheduler cannot be reached (the sweep is left as it was).
    """
    folder = Path(folder).expanduser().resolve()
    if folder.name == SWEEP_PLAN and folder.is_file():
        folder = folder.parent
    elif folder.exists() and not folder.is_dir():
        raise ProfileError(f"{folder} is a file, not a sweep folder: give the folder that holds {SWEEP_PLAN}")
    plan_path = folder / SWEEP_PLAN
    try:
        doc = bounded_json.load_file(plan_path)
        plan = SweepPlan.from_json(doc)
    except FileNotFoundError:
        raise ProfileError(f"{folder} is not a sweep folder: no {SWEEP_PLAN} in it") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProfileError(f"{plan_path}: not a readable sweep plan ({type(exc).__name__}: {exc})") from None
    results = folder.parent
    _check_plan_size(plan, doc, plan_path)
    _check_run_names(plan, folder, plan_path)
    _check_kept(plan, plan_path)
    _check_sweep(plan.profile, list(plan.combos), plan.overrides, plan.redact, results, plan.allow_unknown)
    where = scheduler_setting(scheduler, _profile_scheduler(plan.profile, plan.overrides))
    with _hold_sweep(folder), _engine_for(where, progress) as eng:
        states = {name: _earlier_attempt(results / name) for name in plan.names}
        alive = [name for name, st in states.items() if st == "alive"]
        if alive:
            raise ProfileError(
                f"run(s) of this sweep still running: {', '.join(alive)}; resume once they have ended "
                "(or stop them: their run.json names the process)"
            )
        todo = {i for i, name in enumerate(plan.names) if states[name] != "ok"}
        for i in sorted(todo):
            _set_aside(results / plan.names[i], folder / "attempts")
        untrusted = _check_memo(folder / MEMO_DIR)  # before any run reads it
        doc.setdefault("resumed", []).append(
            {"at": lifecycle.utc_now(), "runs": [plan.names[i] for i in sorted(todo)], "memo_untrusted": untrusted}
        )
        lifecycle.write_json_atomic(plan_path, doc)
        if progress:
            print(
                f"== resuming {folder.name}: {len(plan.names) - len(todo)} of {len(plan.names)} runs complete, "
                f"{len(todo)} to run",
                file=sys.stderr,
                flush=True,
            )
        return _execute_sweep(plan, folder, eng, todo, progress, launch)


def _check_memo(memo_dir: Path) -> int:
    """Check a resumed sweep's memo before its runs read it; return how many entries were not trusted.

    `memo.check_folder` removes every entry not signed by this machine's key for this sweep (planted in
    a folder others could write, or from a sweep made elsewhere): no run ever unpickles one, and it is
    computed again. Said in one line on stderr whenever there is any, ``--quiet`` or not.
    """
    problem = memo_mod.key_problem()
    if problem:
        print(f"warning: {problem}; the sweep's memo is not used, its results are computed again", file=sys.stderr)
    found = memo_mod.check_folder(memo_dir)
    if found.untrusted:
        entries = "entry" if found.untrusted == 1 else "entries"
        print(
            f"warning: memo: {found.untrusted} {entries} not trusted (not signed by this machine's key for this "
            "sweep); removed, computed again",
            file=sys.stderr,
            flush=True,
        )
    return found.untrusted


@contextmanager
def _engine_for(where: str, progress: bool) -> Iterator[Engine | None]:
    """Open the engine a sweep's runs go to before the sweep writes anything; None: runs in this process."""
    if where == POOL:  # forked from this process, whose kernels' threads a fork would copy mid-way
        raise ProfileError(
            "--scheduler pool is for the tally and import commands; a sweep takes auto, sync, local or an address"
        )
    if where in (AUTO, SYNC):
        yield None
        return
    with open_engine(where, announce=progress) as eng:
        yield eng


@contextmanager
def _hold_sweep(folder: Path) -> Iterator[None]:
    """Hold the sweep folder's lock (`SWEEP_LOCK`) while the block runs; ProfileError when another process does.

    An advisory ``flock``, released by the system when its holder ends however
    it ends (even ``kill -9``), so a lock never outlives a dead sweep.
    """
    path = folder / SWEEP_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ProfileError(f"cannot lock the sweep {folder} ({path}: {exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ProfileError(
                f"another resume (or the sweep itself) holds the sweep {folder}: one process at a time runs "
                "its runs; resume once it has ended (compaction-lab runs shows what is running)"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _execute_sweep(
    plan: SweepPlan,
    folder: Path,
    eng: Engine | None,
    todo: set[int],
    progress: bool,
    launch: kernel_mod.Launch | None = None,
) -> SweepResult:
    """Run the planned runs in `todo` (the others completed earlier), then write the comparison and the page.

    `eng` None: the runs execute here, one after the other, in `launch`'s kernels (else kernels started for
    the sweep), shared from run to run. On an engine, or with no run left to execute (a finished sweep
    resumed), `launch`'s kernels are not used: they are shut down at once rather than left to warm.
    """
    if launch is not None and (eng is not None or not todo):
        launch.close()
    if eng is None:
        with ExitStack() as stack:
            if launch is None and todo:
                notebooks = [paths.notebook_path(nb) for nb in plan.profile.notebooks]
                launch = stack.enter_context(kernel_mod.launched(kernel_mod.default_kernels(), notebooks))
            shared = replace(launch, shared=True) if launch is not None else None
            runs, frames, stopped = _sweep_here(plan, folder, todo, progress, shared)
    else:
        runs, frames, stopped = _sweep_on_engine(eng, plan, folder, todo, progress)
    keys = list(plan.sweeps)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SWEEP_COLUMNS)
    table = table[[*keys, *[c for c in SWEEP_COLUMNS if c in table.columns]]]
    # The comparison shows every value as the sweep does (`_shown`): no credential in the table or the page.
    table = table.assign(**{k: table[k].map(_table_value) for k in keys if k in table.columns})
    runfolder.save_table(table.astype({k: str for k in keys}), folder, "sweep")
    shown_runs = [({k: _table_value(v) for k, v in combo.items()}, res, st) for combo, res, st in runs]
    out = _render_sweep(folder, plan.profile, keys, table, shown_runs)
    if stopped is None and any(_run_profile_of(plan, i).redact for i in range(len(plan.combos))):
        # The memo keeps what the runs computed from the sessions as written (a redacted run masks only
        # its own folder): once every run is done, a redacted sweep leaves none of it beside them.
        shutil.rmtree(folder / MEMO_DIR, ignore_errors=True)
    if stopped is not None:
        raise lifecycle.RunInterrupted(
            stopped.signum,
            stopped.run_dir,
            stopped.notebook,
            sweep_dir=folder,
            runs=stopped.runs,
            left_running=stopped.left_running,
        )
    executed = tuple(plan.names[i] for i in sorted(todo) if i < len(runs))
    return SweepResult(folder, tuple(runs), table, out, executed)


def _profile_scheduler(prof: Profile, overrides: Mapping[str, Any] | None) -> str | None:
    value = {**prof.parameters, **dict(overrides or {})}.get("scheduler")
    return value if isinstance(value, str) else None


def _combo_label(combo: Mapping[str, Any]) -> str:
    """Return a combination as run folder names and the console show it: ``key=value-...``, masked (`_slug`)."""
    return "-".join(f"{k}={_slug(v)}" for k, v in combo.items())


def _shown(value: Any) -> Any:
    """`value` as a sweep shows and keeps it: URL credentials in every form, secrets, secret keys' values masked.

    (`secrets.shown_with_credentials`.) Every name, line and file a sweep writes itself holds its values so:
    run folder names, ``sweep.json``, the console, ``sweep.parquet`` and ``sweep.html``.
    """
    return secrets.shown_with_credentials(value)


def _value_text(value: Any) -> str:
    """Return a swept value as one text, masked (`_shown`): JSON for a list or mapping."""
    value = _shown(value)
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _ok_frame(run_dir: Path, combo: Mapping[str, Any]) -> pd.DataFrame:
    head = share.headline_table(run_dir)
    head.insert(0, "status", "ok")
    head.insert(0, "run", run_dir.name)
    for k, v in combo.items():
        head[k] = json.dumps(v) if isinstance(v, (list, dict)) else v
    return head


SweepRuns = list[tuple[dict[str, Any], RunResult | None, str]]

#: The status detail of a run that completed in an earlier invocation of a resumed sweep.
COMPLETED_EARLIER = "ok (completed before this resume)"


def _sweep_here(
    plan: SweepPlan, folder: Path, todo: set[int], progress: bool, launch: kernel_mod.Launch | None
) -> tuple[SweepRuns, list[pd.DataFrame], lifecycle.RunInterrupted | None]:
    """Run a sweep's runs in this process, in `launch`'s kernels, shared by every run.

    The kernels are split into lanes (`_lanes`): with more runs to go than kernels, each kernel is a lane
    that executes one run after another, its notebooks one after the other, so both cores stay busy from
    the first run to the last (one run's notebooks wait on each other; two runs' do not); a lane takes the
    next run in plan order as soon as it is free. With one run to go it takes every kernel, as a run alone
    does. SIGINT / SIGTERM reach this thread only: each lane's run is stopped as a signal would stop it
    (`lifecycle.Stop`), recorded ``interrupted``, and no lane starts another.
    """
    results = folder.parent
    pending = sorted(todo)
    kernels = launch.kernels if launch is not None else ()
    lanes = _lanes(kernels, len(pending))
    stop = lifecycle.Stop()
    outcome: dict[int, tuple[RunResult | None, str, lifecycle.RunInterrupted | None]] = {}
    claim = threading.Lock()

    def lane(own: tuple[kernel_mod.ChainKernel, ...]) -> None:
        lent = kernel_mod.Launch(own, (), shared=True) if own else None
        while not stop.asked:
            with claim:
                if not pending:
                    return
                i = pending.pop(0)
            combo, name = plan.combos[i], plan.names[i]
            if progress:
                print(f"== sweep {i + 1}/{len(plan.combos)}: {_combo_label(combo)}", file=sys.stderr, flush=True)
            try:
                res = run_profile(
                    plan.profile,
                    results=results,
                    run_name=name,
                    progress=progress,
                    overrides={**dict(plan.overrides), **combo},
                    redact=plan.redact,
                    allow_unknown=plan.allow_unknown,
                    notebook_html=plan.notebook_html,
                    memo=folder / MEMO_DIR,
                    kernels=len(own) or None,
                    launch=lent,
                    stop=stop,
                )
            except NotebookFailed as exc:
                outcome[i] = (None, f"failed: {exc}", None)
            except lifecycle.RunInterrupted as exc:
                outcome[i] = (None, f"interrupted by {exc.signal_name}: {exc.run_dir}", exc)
                return
            else:
                outcome[i] = (res, "ok", None)

    with ThreadPoolExecutor(max(1, len(lanes)), thread_name_prefix="sweep-lane") as pool:
        running = [pool.submit(lane, own) for own in lanes]
        try:
            with lifecycle.stop_on_signals():  # the command's guard when it has one; a library call's own else
                while not all(f.done() for f in running):
                    wait(running, timeout=STOP_POLL_S)
        except lifecycle.RunInterrupted as exc:
            stop.ask(exc.signum)  # each lane's run stops as the signal would have stopped it, and is recorded
            wait(running)
        for f in running:
            f.result()  # a lane's own bug is raised here, not lost
    runs: SweepRuns = []
    frames = []
    cut: list[lifecycle.RunInterrupted] = []  # the runs a stop cut short, in plan order
    for i, (combo, name) in enumerate(zip(plan.combos, plan.names, strict=True)):
        if i not in todo:
            runs.append((combo, None, COMPLETED_EARLIER))
            frames.append(_ok_frame(results / name, combo))
        elif i in outcome:
            res, detail, interrupted = outcome[i]
            runs.append((combo, res, detail))
            if res is not None:
                frames.append(_ok_frame(res.run_dir, combo))
            elif interrupted is not None:
                cut.append(interrupted)
                where = interrupted.run_dir.name if interrupted.run_dir else None
                frames.append(pd.DataFrame([{"run": where, "status": lifecycle.INTERRUPTED, **combo}]))
            else:
                frames.append(pd.DataFrame([{"run": name, "status": "failed", **combo}]))
    if not stop.asked:
        return runs, frames, None
    first = cut[0] if cut else None  # none: stopped between two runs
    # Several runs cut short are listed (`RunInterrupted.runs`); one is told as a run alone is (its notebook).
    folders = tuple(c.run_dir for c in cut if c.run_dir is not None)
    folders = folders if len(folders) > 1 else ()
    signum = stop.signum if stop.signum is not None else 0
    return (
        runs,
        frames,
        lifecycle.RunInterrupted(
            signum, first.run_dir if first else None, first.notebook if first else None, runs=folders
        ),
    )


#: Seconds between two looks, by a sweep's thread, at whether its lanes are done (signals arrive between).
STOP_POLL_S = 0.2


def _lanes(kernels: Sequence[kernel_mod.ChainKernel], runs: int) -> list[tuple[kernel_mod.ChainKernel, ...]]:
    """Split a sweep's kernels into lanes for `runs` runs to go: one kernel each, or all in one for a single run.

    No kernels (none could be started): one lane whose runs start their own.
    """
    if not kernels:
        return [()]
    if runs <= 1:
        return [tuple(kernels)]
    return [(k,) for k in kernels[: max(1, runs)]]


def _sweep_on_engine(
    eng: Engine, plan: SweepPlan, folder: Path, todo: set[int], progress: bool
) -> tuple[SweepRuns, list[pd.DataFrame], lifecycle.RunInterrupted | None]:
    """Run a sweep's runs as tasks on the engine, gathered in plan order.

    Stopped by a signal, it closes the engine: an embedded cluster's workers
    end, and the runs they were executing are marked ``interrupted``
    (`_mark_interrupted`); runs on an existing cluster's workers are not ours
    to stop, and are named as left running.
    """
    results = folder.parent
    attempts = folder / "attempts"
    handles: dict[int, Any] = {}
    runs: SweepRuns = []
    frames = []
    try:
        for i in sorted(todo):
            handles[i] = eng.submit(
                _sweep_task,
                plan.profile,
                results,
                plan.names[i],
                {**dict(plan.overrides), **plan.combos[i]},
                plan.redact,
                plan.allow_unknown,
                attempts,
                plan.notebook_html,
                folder / MEMO_DIR,
            )
        for i, (combo, name) in enumerate(zip(plan.combos, plan.names, strict=True)):
            if i not in handles:
                runs.append((combo, None, COMPLETED_EARLIER))
                frames.append(_ok_frame(results / name, combo))
                continue
            status, res, detail = handles[i].result()
            if progress:
                print(
                    f"== sweep {i + 1}/{len(plan.combos)}: {_combo_label(combo)}: {status}", file=sys.stderr, flush=True
                )
            if status == "ok":
                runs.append((combo, res, "ok"))
                frames.append(_ok_frame(results / name, combo))
            else:
                runs.append((combo, None, detail))
                frames.append(pd.DataFrame([{"run": name, "status": status, **combo}]))
    except lifecycle.RunInterrupted as exc:
        if eng.client is not None:
            eng.client.cancel(list(handles.values()))
        # Closed, an embedded cluster's worker processes end, taking the runs they executed with them;
        # an existing cluster's workers go on with theirs (a cancelled task is not stopped mid-way).
        # What Dask logs meanwhile (a nanny whose worker the same Ctrl-C ended, a lost heartbeat) is
        # this stop itself, told in one line by the command, not an error to show as a traceback.
        dask_log = logging.getLogger("distributed")
        level = dask_log.level
        dask_log.setLevel(logging.CRITICAL)
        try:
            eng.close()
        except Exception:  # a close cut short: the liveness check below still tells which runs ended
            pass
        finally:
            dask_log.setLevel(level)
        pending = [i for i in handles if i >= len(runs)]
        marked, left = _mark_interrupted(plan, results, pending, exc)
        for i, (combo, name) in list(enumerate(zip(plan.combos, plan.names, strict=True)))[len(runs) :]:
            if i not in handles:
                runs.append((combo, None, COMPLETED_EARLIER))
                frames.append(_ok_frame(results / name, combo))
                continue
            runs.append((combo, None, f"interrupted by {exc.signal_name}"))
            frames.append(pd.DataFrame([{"run": name, "status": lifecycle.INTERRUPTED, **combo}]))
        return runs, frames, lifecycle.RunInterrupted(exc.signum, runs=tuple(marked), left_running=tuple(left))
    return runs, frames, None


def _mark_interrupted(
    plan: SweepPlan, results: Path, pending: list[int], exc: lifecycle.RunInterrupted
) -> tuple[list[Path], list[Path]]:
    """Mark ``interrupted`` the runs a stopped sweep's workers were executing, once their process is gone.

    Returns the run folders marked, and those whose process still lives (an
    existing cluster's workers; they finish or die there). A run whose folder
    says anything but ``running`` ended on its own and is left as it says.
    """
    marked: list[Path] = []
    left: list[Path] = []
    deadline = time.monotonic() + WORKERS_GONE_WAIT_S
    for i in pending:
        run_dir = results / plan.names[i]
        while True:
            try:
                info = lifecycle.read_run_json(run_dir)
            except (OSError, ValueError):  # never started, or cut short before its run.json: resume reruns it
                info = {}
            running = info.get("status") == lifecycle.RUNNING
            alive = running and lifecycle.liveness(info).state == "alive"
            if not alive or time.monotonic() >= deadline:
                break
            time.sleep(0.2)  # a closing cluster's worker may take a moment to exit
        if not running:
            continue
        if alive:
            left.append(run_dir)
            continue
        why = f"the sweep was stopped by {exc.signal_name}; the worker executing this run was closed with it"
        lifecycle.record_interrupted(run_dir, info, exc.signal_name, why)
        _scrub_stopped(plan, i, run_dir)
        marked.append(run_dir)
    return marked, left


def _run_profile_of(plan: SweepPlan, i: int) -> Profile:
    """Return the profile the sweep's run `i` runs: its combination and overrides, its ``redact``."""
    prof = plan.profile.with_parameters({**dict(plan.overrides), **plan.combos[i]})
    if plan.redact is not None:
        prof = prof.with_parameters({REDACT_PARAM: bool(plan.redact)})
    return prof


def _scrub_stopped(plan: SweepPlan, i: int, run_dir: Path) -> None:
    """Give a run stopped on a worker the final redaction sweep it did not get to (`run_profile` gives its own)."""
    prof = _run_profile_of(plan, i)
    try:
        red = redactor_mod.redactor(
            prof.redact,
            prof.parameters.get("redact_patterns") or None,
            parameters=[prof.parameters, prof.notebook_parameters],
        )
        done = final_sweep(run_dir, red)
    except Exception as err:  # recorded, as run_profile records a failed final sweep
        done = {"error": f"final sweep failed: {type(err).__name__}: {err}"}
    try:
        info = lifecycle.read_run_json(run_dir)
        lifecycle.write_json_atomic(run_dir / runfolder.RUN_JSON, {**info, "redaction": done})
    except (OSError, ValueError):
        pass


def _run_names(profile: str, combos: list[dict[str, Any]], results: Path) -> list[str]:
    """One run folder name per combination, planned up front: distinct from each other and from folders in `results`.

    Two combinations whose values read the same in a name (``a b`` and ``a/b``, two passwords masked
    alike) get ``-2``, ``-3`` ...; a name past `runner.NAME_MAX_BYTES` is cut and ends with a digest of
    its whole label (`run_folder_name`).
    """
    names: list[str] = []
    for combo in combos:
        base = run_folder_name(f"{profile}-{_combo_label(combo)}")
        name, n = base, 1
        while (results / name).exists() or name in names:
            n += 1
            name = f"{base}-{n}"
        names.append(name)
    return names


def _earlier_attempt(run_dir: Path) -> str:
    """Tell what a planned run's folder holds: ``absent``, ``ok`` (complete), ``alive`` (running now) or ``stale``.

    ``stale``: failed, interrupted, or ``running`` with its process gone (killed) -- to be run again; also
    a folder whose run.json is missing or unreadable (an attempt cut short before writing it, a damaged
    file) and a file where the folder belongs: whatever it holds is kept in ``attempts/``, never trusted.
    """
    if not os.path.lexists(run_dir):
        return "absent"
    try:
        info = lifecycle.read_run_json(run_dir)
    except (OSError, ValueError):
        return "stale"
    if info.get("status") == "ok":
        return "ok"
    if info.get("status") == lifecycle.RUNNING and lifecycle.liveness(info).state == "alive":
        return "alive"
    return "stale"


def _set_aside(run_dir: Path, attempts: Path) -> None:
    """Move an earlier attempt's folder to ``attempts/<run>.attempt-N`` (kept for reading, never reused)."""
    if not os.path.lexists(run_dir):
        return
    attempts.mkdir(parents=True, exist_ok=True)
    n = 1
    # The first free number: moved onto an existing folder, shutil.move would put the attempt inside it.
    while os.path.lexists(attempts / f"{run_dir.name}.attempt-{n}"):
        n += 1
    shutil.move(str(run_dir), attempts / f"{run_dir.name}.attempt-{n}")


def _sweep_task(
    prof: Profile,
    results: Path,
    run_name: str,
    overrides: dict[str, Any],
    redact: bool | None,
    allow_unknown: bool,
    attempts: Path,
    notebook_html: bool = True,
    memo: Path | None = None,
) -> tuple[str, RunResult | None, str]:
    """Task: one run of a sweep on a worker, under the name the plan gave it.

    A folder of that name left by an earlier attempt (its worker died) is
    judged first: complete (``ok``) -> the run is not repeated; still alive
    elsewhere -> refused (never two processes in one folder); otherwise it is
    moved to `attempts` and the run starts over. Returns ``(status, result,
    detail)``; a failing notebook is a ``failed`` status, not an exception.
    """
    run_dir = results / run_name
    state = _earlier_attempt(run_dir)
    if state == "ok":
        return "ok", None, f"completed by an earlier attempt: {run_dir}"
    if state == "alive":
        return "failed", None, f"another attempt is still running in {run_dir}"
    _set_aside(run_dir, attempts)
    try:
        res = run_profile(
            prof,
            results=results,
            run_name=run_name,
            progress=False,
            overrides=overrides,
            redact=redact,
            allow_unknown=allow_unknown,
            notebook_html=notebook_html,
            memo=memo,
            kernels=1,  # the engine runs as many runs at once as it has workers: one kernel each
        )
    except NotebookFailed as exc:
        return "failed", None, f"failed: {exc}"
    return "ok", res, "ok"


def _sweep_limit(prof: Profile, overrides: Mapping[str, Any]) -> int:
    """``max_sweep_runs`` (``--set`` over the profile's parameters; default `parameter_rules.DEFAULT_MAX_SWEEP_RUNS`).

    A whole number from 1 to `parameter_rules.MAX_SWEEP_RUNS_CEILING`: the ceiling is hard, no setting raises it.
    """
    value = {**prof.parameters, **overrides}.get(MAX_SWEEP_RUNS, parameter_rules.DEFAULT_MAX_SWEEP_RUNS)
    return _checked_limit(value, f"profile {prof.name!r}")


def _checked_limit(value: Any, where: str) -> int:
    """Return `value` as a sweep's limit of runs, or raise `ProfileError` (`where`: what set it, for the message)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ProfileError(
            f"{where}: {MAX_SWEEP_RUNS} = {value!r}: expected a whole number >= 1 (the most runs a sweep may plan)"
        )
    problem = parameter_rules.max_sweep_runs_problem(value)
    if problem:
        raise ProfileError(f"{where}: {MAX_SWEEP_RUNS} = {value:,}: {problem}")
    return value


def _check_size(prof: Profile, sweeps: Mapping[str, list[Any]], limit: int) -> None:
    """Refuse a sweep of more runs than `limit`, counted as the product of the value counts (nothing listed)."""
    counts = {k: len(v) for k, v in sweeps.items()}
    total = math.prod(counts.values())
    if total > limit:
        each = " x ".join(f"{k}: {n:,} values" for k, n in counts.items())
        raise ProfileError(
            f"profile {prof.name!r}: a sweep of {total:,} runs ({each}) is more than {MAX_SWEEP_RUNS} = {limit:,} "
            f"allows; sweep fewer values, or raise the limit (--set {MAX_SWEEP_RUNS}=N, or {MAX_SWEEP_RUNS} in "
            "the profile's parameters)"
        )


def _check_plan_size(plan: SweepPlan, doc: Mapping[str, Any], plan_path: Path) -> None:
    """Refuse a plan of more runs than a new sweep may plan: its own ``max_sweep_runs`` and the hard ceiling.

    The limit is the one ``sweep.json`` records (`run_sweep` writes it), else the default; a limit past
    `parameter_rules.MAX_SWEEP_RUNS_CEILING` is refused as such. Counted before any run is listed or checked.
    """
    where = str(plan_path)
    limit = _checked_limit(doc.get(MAX_SWEEP_RUNS, parameter_rules.DEFAULT_MAX_SWEEP_RUNS), where)
    if len(plan.names) > limit:
        raise ProfileError(
            f"{where}: the plan lists {len(plan.names):,} runs, more than {MAX_SWEEP_RUNS} = {limit:,} allows "
            f"(at most {parameter_rules.MAX_SWEEP_RUNS_CEILING:,}); nothing was moved or run (was {SWEEP_PLAN} edited "
            "by hand?)"
        )


def _check_kept(plan: SweepPlan, plan_path: Path) -> None:
    """Refuse a plan holding a value it keeps masked (`SweepPlan.to_json`): a credential it cannot give back.

    A password in a swept model URL is written ``http://***@host`` (and any other secret ``***`` or
    ``[REDACTED:...]``), so the runs cannot be run again as planned: one line naming each parameter,
    before anything is moved or run.
    """
    held: dict[str, None] = {}
    for values in (
        plan.profile.parameters,
        *plan.profile.notebook_parameters.values(),
        plan.overrides,
        *plan.combos,
    ):
        held.update(dict.fromkeys(k for k, v in values.items() if _masked_in(v)))
    if held:
        raise ProfileError(
            f"{plan_path}: {', '.join(sorted(held))} held a credential (a password in a URL, a key) that "
            f"{SWEEP_PLAN} keeps masked ({secrets.MASK}), so this sweep cannot be resumed as planned; nothing was "
            "moved or run: start the sweep again (an endpoint's key given by api_key_env is kept by name and resumes)"
        )


def _masked_in(value: Any) -> bool:
    """Whether a planned value holds text masked by `_shown` (``***``, ``[REDACTED:...]``), at any depth."""
    if isinstance(value, str):
        return secrets.MASK in value or "[REDACTED:" in value
    if isinstance(value, Mapping):
        return any(_masked_in(k) or _masked_in(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_masked_in(v) for v in value)
    return False


def _check_run_names(plan: SweepPlan, folder: Path, plan_path: Path) -> None:
    """Refuse a plan (a hand-edited ``sweep.json``) whose run names are not plain folder names beside the sweep.

    Each planned run is a folder directly in the sweep's results folder (the
    sweep folder's parent): no path separator, not ``.`` / ``..``, not the
    sweep folder itself, not a link that leads elsewhere, and no name twice --
    otherwise a resume would move, and write into, folders that are not the
    sweep's.
    """
    results = folder.parent
    bad: list[str] = []
    seen: set[str] = set()
    for name in plan.names:
        if (
            not name
            or name in (".", "..")
            or any(sep in name for sep in ("/", "\\", os.sep, os.altsep or "/", "\x00"))
            or Path(name).is_absolute()
        ):
            bad.append(f"{name!r} is not a plain folder name")
        elif name == folder.name:
            bad.append(f"{name!r} is the sweep folder itself")
        elif (results / name).resolve().parent != results:
            bad.append(f"{name!r} leads to {(results / name).resolve()}, outside {results}")
        elif name in seen:
            bad.append(f"{name!r} is planned twice")
        seen.add(name)
    if bad:
        raise ProfileError(
            f"{plan_path}: every planned run must be a folder directly in {results}, and "
            f"{'; '.join(bad)}; nothing was moved or run (was {SWEEP_PLAN} edited by hand?)"
        )


def _check_sweep(
    prof: Profile,
    combos: list[dict[str, Any]],
    overrides: Mapping[str, Any] | None,
    redact: bool | None,
    results: Path | None,
    allow_unknown: bool,
) -> None:
    """Raise one `ProfileError` listing the problems of every combination, before any folder is made."""
    from compaction_lab.endpoints import providers

    found: dict[str, None] = {}
    for combo in combos:
        one = prof.with_parameters({**dict(overrides or {}), **combo})
        if redact is not None:
            one = one.with_parameters({REDACT_PARAM: bool(redact)})
        one = providers.resolve_profile(one)
        found.update(
            dict.fromkeys(
                params_mod.problems(one, allow_unknown=allow_unknown, results_folder=results or paths.results_dir())
            )
        )
    if found:
        raise params_mod.error(f"profile {prof.name!r}", list(found))


def _table_value(value: Any) -> Any:
    """Return a swept value as the comparison holds it: masked text (`_value_text`), or a number as it is."""
    return _value_text(value) if isinstance(value, (str, list, dict)) else value


def _slug(v: Any) -> str:
    """Return a swept value as part of a folder name: masked (`_value_text`), other characters runs of ``_``."""
    return re.sub(r"[^A-Za-z0-9._]+", "_", _value_text(v)).strip("_")


def _render_sweep(folder: Path, prof: Profile, keys: list[str], table: pd.DataFrame, runs) -> Path:
    """``sweep.html`` in the run report's look: figures, the table by strategy, every run linked (`sweep_page`)."""
    from compaction_lab.report import sweep_page

    # The description as the sweep shows its values (`_shown`): the sweep folder gets no final sweep.
    return sweep_page.render_sweep_page(folder, prof.name, _shown(prof.description), keys, table, runs)


__all__ = [
    "COMPLETED_EARLIER",
    "MAX_SWEEP_RUNS",
    "SWEEP_COLUMNS",
    "SWEEP_LOCK",
    "SWEEP_PLAN",
    "SweepPlan",
    "SweepResult",
    "parse_sweep",
    "resume_sweep",
    "run_sweep",
]
