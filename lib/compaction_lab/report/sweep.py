"""Sweeps: the chain once per combination of swept values, a plan to resume from, the comparison page.

``compaction-lab run --sweep window=16000,24000 --sweep seed=range(1,11)`` (or a
profile's ``sweeps:`` block) runs `run_sweep`: every combination checked first,
the plan (`SweepPlan`: the profile as it was, the values, one run folder name per
combination) written to ``sweep.json``, then one run folder per combination
(`compaction_lab.report.run.run_profile`), in this process or as tasks on the
engine, and the comparison (``sweep.parquet``, ``sweep.html`` by
`compaction_lab.report.sweep_page`). ``run --resume SWEEP_DIR`` is `resume_sweep`.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.core import paths
from compaction_lab.engine import AUTO, SYNC, Engine, open_engine, scheduler_setting
from compaction_lab.report import lifecycle, runfolder, share
from compaction_lab.report import params as params_mod
from compaction_lab.report.params import ProfileError
from compaction_lab.report.run import (
    REDACT_PARAM,
    NotebookFailed,
    Profile,
    RunResult,
    load_profile,
    public_parameters,
    run_profile,
)


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

    def to_json(self, scheduler: str) -> dict[str, Any]:
        """The ``sweep.json`` document (`SWEEP_PLAN`)."""
        prof = self.profile
        return {
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
            "scheduler": scheduler,
            "runs": [
                {"values": public_parameters(c), "run": name} for c, name in zip(self.combos, self.names, strict=True)
            ],
            "resumed": [],
        }

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
    machine's cores); with ``local`` or a scheduler address (`scheduler`, else
    ``COMPACTION_LAB_SCHEDULER``, else the profile's ``scheduler``), each run is
    one task on the engine (`_sweep_task`), its folder under `results`, which
    the workers must share. A run whose worker dies is retried by Dask: the
    dead attempt's folder is moved to ``<sweep>/attempts/`` and the run starts
    over under the same name, so every combination leaves exactly one run
    folder; model calls the dead attempt finished are answered from the ledger.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    keys = list(sweeps)
    combos = [dict(zip(keys, vals, strict=False)) for vals in itertools.product(*(sweeps[k] for k in keys))]
    _check_sweep(prof, combos, overrides, redact, results, allow_unknown)
    where = scheduler_setting(scheduler, _profile_scheduler(prof, overrides))
    folder = runfolder.create_run_dir(runfolder.new_run_name(f"sweep-{prof.name}"), results)
    plan = SweepPlan(
        profile=replace(prof, sweeps={}),
        sweeps={k: list(v) for k, v in sweeps.items()},
        combos=tuple(combos),
        names=tuple(_run_names(prof.name, combos, folder.parent)),
        overrides=dict(overrides or {}),
        redact=redact,
        allow_unknown=allow_unknown,
    )
    lifecycle.write_json_atomic(folder / SWEEP_PLAN, plan.to_json(where))
    return _execute_sweep(plan, folder, where, set(range(len(combos))), progress)


@lifecycle.stop_on_signals()
def resume_sweep(folder: Path | str, *, progress: bool = True, scheduler: str | None = None) -> SweepResult:
    """Finish a sweep as its plan says: runs that completed are kept, the others run again.

    A planned run whose folder says ``ok`` is not repeated. One that failed,
    was interrupted, was killed (``running`` with its process gone) or never
    started runs again under its planned name; an earlier attempt's folder is
    moved to ``<sweep>/attempts/<run>.attempt-N`` first. The comparison table
    and ``sweep.html`` are rebuilt from every planned run.

    Raises
    ------
    ProfileError
        The folder holds no readable plan, the plan's parameters no longer
        pass the checks, or a run of the sweep is still running (its process
        alive): never two processes in one run folder.
    """
    folder = Path(folder).expanduser().resolve()
    plan_path = folder / SWEEP_PLAN
    try:
        doc = json.loads(plan_path.read_text(encoding="utf-8"))
        plan = SweepPlan.from_json(doc)
    except FileNotFoundError:
        raise ProfileError(f"{folder} is not a sweep folder: no {SWEEP_PLAN} in it") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ProfileError(f"{plan_path}: not a readable sweep plan ({type(exc).__name__}: {exc})") from None
    results = folder.parent
    _check_sweep(plan.profile, list(plan.combos), plan.overrides, plan.redact, results, plan.allow_unknown)
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
    where = scheduler_setting(scheduler, _profile_scheduler(plan.profile, plan.overrides))
    doc.setdefault("resumed", []).append({"at": lifecycle.utc_now(), "runs": [plan.names[i] for i in sorted(todo)]})
    lifecycle.write_json_atomic(plan_path, doc)
    if progress:
        print(
            f"== resuming {folder.name}: {len(plan.names) - len(todo)} of {len(plan.names)} runs complete, "
            f"{len(todo)} to run",
            file=sys.stderr,
            flush=True,
        )
    return _execute_sweep(plan, folder, where, todo, progress)


def _execute_sweep(plan: SweepPlan, folder: Path, where: str, todo: set[int], progress: bool) -> SweepResult:
    """Run the planned runs in `todo` (the others completed earlier), then write the comparison and the page."""
    if where in (AUTO, SYNC):
        runs, frames, stopped = _sweep_here(plan, folder, todo, progress)
    else:
        with open_engine(where, announce=progress) as eng:
            runs, frames, stopped = _sweep_on_engine(eng, plan, folder, todo, progress)
    keys = list(plan.sweeps)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SWEEP_COLUMNS)
    table = table[[*keys, *[c for c in SWEEP_COLUMNS if c in table.columns]]]
    runfolder.save_table(table.astype({k: str for k in keys}), folder, "sweep")
    out = _render_sweep(folder, plan.profile, keys, table, runs)
    if stopped is not None:
        raise lifecycle.RunInterrupted(stopped.signum, stopped.run_dir, stopped.notebook, sweep_dir=folder)
    executed = tuple(plan.names[i] for i in sorted(todo) if i < len(runs))
    return SweepResult(folder, tuple(runs), table, out, executed)


def _profile_scheduler(prof: Profile, overrides: Mapping[str, Any] | None) -> str | None:
    value = {**prof.parameters, **dict(overrides or {})}.get("scheduler")
    return value if isinstance(value, str) else None


def _combo_label(combo: Mapping[str, Any]) -> str:
    return "-".join(f"{k}={_slug(v)}" for k, v in combo.items())


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
    plan: SweepPlan, folder: Path, todo: set[int], progress: bool
) -> tuple[SweepRuns, list[pd.DataFrame], lifecycle.RunInterrupted | None]:
    """The runs of a sweep one after the other in this process."""
    runs: SweepRuns = []
    frames = []
    results = folder.parent
    for i, (combo, name) in enumerate(zip(plan.combos, plan.names, strict=True)):
        if i not in todo:
            runs.append((combo, None, COMPLETED_EARLIER))
            frames.append(_ok_frame(results / name, combo))
            continue
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
            )
        except NotebookFailed as exc:
            runs.append((combo, None, f"failed: {exc}"))
            frames.append(pd.DataFrame([{"run": exc.run_dir.name, "status": "failed", **combo}]))
            continue
        except lifecycle.RunInterrupted as exc:
            # A stopped sweep stops: no next combination, but the comparison so far is written.
            runs.append((combo, None, f"interrupted by {exc.signal_name}: {exc.run_dir}"))
            frames.append(
                pd.DataFrame(
                    [{"run": exc.run_dir.name if exc.run_dir else None, "status": lifecycle.INTERRUPTED, **combo}]
                )
            )
            return runs, frames, exc
        runs.append((combo, res, "ok"))
        frames.append(_ok_frame(res.run_dir, combo))
    return runs, frames, None


def _sweep_on_engine(
    eng: Engine, plan: SweepPlan, folder: Path, todo: set[int], progress: bool
) -> tuple[SweepRuns, list[pd.DataFrame], lifecycle.RunInterrupted | None]:
    """The runs of a sweep as tasks on the engine, gathered in plan order."""
    results = folder.parent
    attempts = folder / "attempts"
    handles = {
        i: eng.submit(
            _sweep_task,
            plan.profile,
            results,
            plan.names[i],
            {**dict(plan.overrides), **plan.combos[i]},
            plan.redact,
            plan.allow_unknown,
            attempts,
        )
        for i in sorted(todo)
    }
    runs: SweepRuns = []
    frames = []
    try:
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
        # The runs still under way belong to the workers; cancelled here, they finish or die there.
        if eng.client is not None:
            eng.client.cancel(list(handles.values()))
        for combo, name in list(zip(plan.combos, plan.names, strict=True))[len(runs) :]:
            runs.append((combo, None, f"interrupted by {exc.signal_name}"))
            frames.append(pd.DataFrame([{"run": name, "status": lifecycle.INTERRUPTED, **combo}]))
        return runs, frames, exc
    return runs, frames, None


def _run_names(profile: str, combos: list[dict[str, Any]], results: Path) -> list[str]:
    """One run folder name per combination, planned up front: distinct from each other and from folders in `results`.

    Two combinations whose values read the same in a name (``a b`` and ``a/b``) get ``-2``, ``-3`` ...
    """
    names: list[str] = []
    for combo in combos:
        base = runfolder.new_run_name(f"{profile}-{_combo_label(combo)}")
        name, n = base, 1
        while (results / name).exists() or name in names:
            n += 1
            name = f"{base}-{n}"
        names.append(name)
    return names


def _earlier_attempt(run_dir: Path) -> str:
    """What a planned run's folder holds: ``absent``, ``ok`` (complete), ``alive`` (running now) or ``stale``.

    ``stale``: failed, interrupted, or ``running`` with its process gone (killed) -- to be run again.
    """
    if not run_dir.exists():
        return "absent"
    info = lifecycle.read_run_json(run_dir)
    if info.get("status") == "ok":
        return "ok"
    if info.get("status") == lifecycle.RUNNING and lifecycle.liveness(info).state == "alive":
        return "alive"
    return "stale"


def _set_aside(run_dir: Path, attempts: Path) -> None:
    """Move an earlier attempt's folder to ``attempts/<run>.attempt-N`` (kept for reading, never reused)."""
    if not run_dir.exists():
        return
    attempts.mkdir(parents=True, exist_ok=True)
    n = 1 + sum(1 for _ in attempts.glob(f"{run_dir.name}.attempt-*"))
    shutil.move(str(run_dir), attempts / f"{run_dir.name}.attempt-{n}")


def _sweep_task(
    prof: Profile,
    results: Path,
    run_name: str,
    overrides: dict[str, Any],
    redact: bool | None,
    allow_unknown: bool,
    attempts: Path,
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
        )
    except NotebookFailed as exc:
        return "failed", None, f"failed: {exc}"
    return "ok", res, "ok"


def _check_sweep(
    prof: Profile,
    combos: list[dict[str, Any]],
    overrides: Mapping[str, Any] | None,
    redact: bool | None,
    results: Path | None,
    allow_unknown: bool,
) -> None:
    """Raise one `ProfileError` listing the problems of every combination, before any folder is made."""
    from compaction_lab.providers import presets

    found: dict[str, None] = {}
    for combo in combos:
        one = prof.with_parameters({**dict(overrides or {}), **combo})
        if redact is not None:
            one = one.with_parameters({REDACT_PARAM: bool(redact)})
        one = presets.resolve_profile(one)
        found.update(
            dict.fromkeys(
                params_mod.problems(one, allow_unknown=allow_unknown, results_folder=results or paths.results_dir())
            )
        )
    if found:
        raise params_mod.error(f"profile {prof.name!r}", list(found))


def _slug(v: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "_", json.dumps(v) if isinstance(v, (list, dict)) else str(v)).strip("_")


def _render_sweep(folder: Path, prof: Profile, keys: list[str], table: pd.DataFrame, runs) -> Path:
    """``sweep.html`` in the run report's look: figures, the table by strategy, every run linked (`sweep_page`)."""
    from compaction_lab.report import sweep_page

    return sweep_page.render_sweep_page(folder, prof.name, prof.description, keys, table, runs)


__all__ = [
    "COMPLETED_EARLIER",
    "SWEEP_COLUMNS",
    "SWEEP_PLAN",
    "SweepPlan",
    "SweepResult",
    "parse_sweep",
    "resume_sweep",
    "run_sweep",
]
