"""The run folder: the one place a chain of notebooks reads from and writes to.

Layout (names are a contract that users and scripts read; later stages add to
it but never rename)::

    data/results/<run>/
        run.json                      profile, parameters, versions, git commit, timings
        report.html                   the chain rendered for readers (inputs hidden)
        NN_<notebook>.ipynb           executed notebooks
        NN_<notebook>.html            each executed notebook rendered with its code
        sessions/<session_id>.jsonl   the sessions studied (canonical Session JSONL)
        sessions/facts.jsonl          planted facts and decoys of synthetic chains
        <table>.parquet               tables (composition.parquet, followups.parquet, ...)
        figures/<figure>.{png,svg,html}
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from compaction_lab.core import paths

if TYPE_CHECKING:  # pandas is imported where a table is read (slow): a run's command starts its kernels first
    import pandas as pd

FIGURES = "figures"
SESSIONS = "sessions"
RUN_JSON = "run.json"
REPORT_HTML = "report.html"

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def new_run_name(profile: str, now: datetime | None = None) -> str:
    """Name a run, sortable and filesystem-safe: ``<profile>-YYYYmmdd-HHMMSS``."""
    now = now or datetime.now(timezone.utc)
    return f"{_SAFE.sub('-', profile)}-{now.strftime('%Y%m%d-%H%M%S')}"


def create_run_dir(name: str, results: Path | None = None) -> Path:
    """Create a fresh run folder, suffixing ``-2``, ``-3`` ... rather than reuse one.

    A run never writes into another run's folder, so two runs started in the
    same second both keep their outputs.
    """
    base = Path(results) if results else paths.results_dir()
    base.mkdir(parents=True, exist_ok=True)
    candidate, n = base / name, 1
    while True:
        try:
            candidate.mkdir()
            return candidate.resolve()
        except FileExistsError:
            n += 1
            candidate = base / f"{name}-{n}"


def resolve(run_dir: str | Path | None) -> Path:
    """Resolve the run folder a notebook writes into.

    Papermill passes ``run_dir``; a notebook opened by hand in JupyterLab has
    it empty and writes into ``<results>/interactive`` so exploring never
    touches a real run.
    """
    path = Path(run_dir) if run_dir else paths.results_dir() / "interactive"
    path.mkdir(parents=True, exist_ok=True)
    (path / FIGURES).mkdir(exist_ok=True)
    return path.resolve()


def table_path(run_dir: Path, name: str) -> Path:
    """Where a named table lives in a run folder."""
    return Path(run_dir) / f"{name}.parquet"


def save_table(df: pd.DataFrame, run_dir: Path, name: str) -> Path:
    """Write a table as parquet (pyarrow) into the run folder and return its path.

    Through a temporary file and a rename: a reader, or a write that fails half way, never sees half a
    table (an earlier one stays whole).
    """
    out = table_path(run_dir, name)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        df.to_parquet(tmp, engine="pyarrow", index=False)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def maybe_table(run_dir: Path, name: str) -> pd.DataFrame | None:
    """Read a table of the run folder if a notebook wrote it; None when it did not (a notebook that did not run)."""
    return load_table(run_dir, name) if table_path(run_dir, name).exists() else None


def load_table(run_dir: Path, name: str) -> pd.DataFrame:
    """Read a table an earlier notebook wrote into this run folder.

    Raises
    ------
    FileNotFoundError
        Naming the table and the notebook chain order, when it is missing.
    """
    path = table_path(run_dir, name)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: the notebook that writes '{name}' has not run in this run folder")
    import pandas as pd

    return pd.read_parquet(path, engine="pyarrow")


def figure_stem(run_dir: Path, name: str) -> Path:
    """Path stem (no suffix) for a figure's PNG / SVG / HTML files."""
    d = Path(run_dir) / FIGURES
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def sessions_dir(run_dir: Path) -> Path:
    """Folder holding the run's sessions as canonical JSONL."""
    d = Path(run_dir) / SESSIONS
    d.mkdir(parents=True, exist_ok=True)
    return d
