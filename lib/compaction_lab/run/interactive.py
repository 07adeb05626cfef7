"""A notebook opened by hand runs as is: it finds the inputs it needs, or makes them, and says which.

Papermill gives every notebook of a run its ``run_dir``. A notebook opened in
JupyterLab has none: it works in ``<results>/interactive`` (so exploring never
touches a real run), and "Run All" must work there even when nothing ran before
it. `prepare` looks at what the notebook needs (the chain, `compaction_lab.run.chain`:
the notebooks whose outputs it reads, each known by one output file, its mark):

1. already in the interactive folder (a notebook run there by hand earlier):
   used as they are;
2. else in the latest complete run (``run.json`` status ``ok``) that holds
   them: its tables and sessions are copied into the interactive folder;
3. else the missing notebooks are executed there first, with their own
   defaults, through papermill.

It prints one line saying which of the three happened.

The share notebook opened by hand ends with `finish`: a redacted folder gets the
final sweep the runner gives a run (`compaction_lab.privacy.scrub`), so what it
leaves can be shared.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TextIO

from compaction_lab.core import paths, runfolder
from compaction_lab.run import chain, lifecycle
from compaction_lab.run.kernel import KERNEL_NAME

#: One output file per chain notebook that proves it ran in a folder (a view of `chain.CHAIN`).
MARK: Mapping[str, str] = MappingProxyType({s.notebook: s.mark for s in chain.CHAIN})

#: The notebooks whose outputs each notebook reads, in chain order (a view of `chain.CHAIN`).
NEEDS: Mapping[str, tuple[str, ...]] = MappingProxyType({s.notebook: s.reads for s in chain.CHAIN})

#: What is copied from a complete run: the tables and JSON it wrote and its sessions (not its
#: notebooks, rendered pages or run.json: the interactive folder is not that run).
_COPIED_SUFFIXES = (".parquet", ".json")
_COPIED_FOLDERS = ("sessions", runfolder.FIGURES)


def prepare(run_dir: str | Path | None, notebook: str, *, out: TextIO | None = None) -> Path:
    """Return the folder a notebook works in, holding the inputs it needs.

    Parameters
    ----------
    run_dir : str or Path, optional
        The notebook's ``run_dir`` parameter. Given (a papermill run): that
        folder, as `runfolder.resolve` gives it; the run's chain order already
        provides the inputs.
    notebook : str
        The notebook's stem, e.g. ``"02_projection_anatomy"`` (a notebook of `chain.CHAIN`).
    out : text stream, optional
        Where the one line saying what was done goes (default stdout, so it
        shows under the cell).

    Returns
    -------
    Path
        The run folder (``<results>/interactive`` when `run_dir` is empty).
    """
    chain.step(notebook)  # an unknown notebook: ValueError, listing the chain
    folder = runfolder.resolve(run_dir)
    if run_dir:
        return folder
    stream = out if out is not None else sys.stdout
    missing = missing_inputs(folder, notebook)
    if not missing:
        return folder
    source = latest_complete_run(paths.results_dir(), missing)
    if source is not None:
        copy_inputs(source, folder)
        print(
            f"inputs of {', '.join(missing)}: copied from the latest complete run {source.name} ({source})",
            file=stream,
        )
        return folder
    print(
        f"no complete run holds the inputs of {', '.join(missing)}: running "
        f"{'it' if len(missing) == 1 else 'them'} first with their defaults, into {folder}",
        file=stream,
        flush=True,
    )
    for nb in missing:
        _execute(nb, folder)
    return folder


def finish(run_dir: str | Path | None, folder: Path, *, out: TextIO | None = None) -> None:
    """Leave a folder the notebooks ran in by hand shareable: mask it when its run is redacted.

    A run's stages compute on the sessions as written, and the runner's final sweep masks every file
    after the last notebook. By hand there is no runner: the share notebook calls this last, and a
    redacted folder (notebook 01 ran with ``redact``, `sources.run_redactor`) gets the same sweep, its
    sessions included. Given a `run_dir` (papermill), nothing is done: the runner's sweep follows.

    Parameters
    ----------
    run_dir : str or Path, optional
        The notebook's ``run_dir`` parameter.
    folder : Path
        The folder the notebook worked in (`prepare`).
    out : text stream, optional
        Where the one line saying what was masked goes (default stdout).
    """
    if run_dir:
        return
    from compaction_lab.ingest import sources
    from compaction_lab.privacy import scrub
    from compaction_lab.report import theme

    red = sources.run_redactor(folder)
    if red is None:
        return
    scrub.settle_databases(folder)
    rep = scrub.scrub_run_folder(folder, red, verbatim=theme.verbatim_texts())
    print(
        f"redacted for sharing: {rep.replacements} spans masked in {len(rep.files_changed)} files of {folder} "
        "(its sessions too: run notebook 01 again to study them as written)",
        file=out if out is not None else sys.stdout,
    )


def missing_inputs(folder: Path, notebook: str) -> list[str]:
    """Return the notebooks `notebook` needs whose outputs are not in `folder`, in chain order."""
    return [nb for nb in NEEDS[notebook] if not (folder / MARK[nb]).exists()]


def latest_complete_run(results: Path, notebooks: list[str]) -> Path | None:
    """Return the newest run folder with status ``ok`` that holds the outputs of `notebooks` (None if none does)."""
    for run in lifecycle.list_runs(results).runs:  # newest first
        path = Path(run.path)
        if run.status == lifecycle.OK and all((path / MARK[nb]).exists() for nb in notebooks):
            return path
    return None


def copy_inputs(source: Path, folder: Path) -> None:
    """Copy a run's tables, JSON (but its run.json) and sessions into `folder`, replacing what is there."""
    for item in source.iterdir():
        target = folder / item.name
        if item.is_file() and item.suffix in _COPIED_SUFFIXES and item.name != runfolder.RUN_JSON:
            shutil.copy2(item, target)
        elif item.is_dir() and item.name in _COPIED_FOLDERS:
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(item, target)


def _execute(notebook: str, folder: Path) -> None:
    """Run one chain notebook with its defaults into `folder` (its executed copy is kept there)."""
    import papermill as pm

    pm.execute_notebook(
        str(paths.NOTEBOOKS_DIR / f"{notebook}.ipynb"),
        str(folder / f"{notebook}.ipynb"),
        parameters={"run_dir": str(folder)},
        progress_bar=False,
        kernel_name=KERNEL_NAME,  # as a run does: this interpreter, whether or not `make lab` registered its kernel
        kernel_manager_class=lifecycle.IdleShutdownKernelManager,  # as a run's: its own sockets, no SIGINT at the end
    )
