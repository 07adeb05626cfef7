"""Every filesystem location the suite uses, in one place.

The repository root is found from this file's location (the package is
installed editable from ``lib/``). Two environment variables override the
defaults, so batch users can keep results elsewhere without editing code:

``COMPACTION_LAB_RESULTS``
    Folder that receives run folders (default ``data/results``).
``COMPACTION_LAB_PARAMS``
    Folder holding the profile YAML files (default ``papermill_params``).
``COMPACTION_LAB_ARCHIVE``
    The archive of originals, an SQLite file (default ``data/archive/originals.sqlite``).
``COMPACTION_LAB_LEDGER``
    The ledger of model calls, an SQLite file (default ``data/ledger/ledger.sqlite``).
"""

from __future__ import annotations

import os
from pathlib import Path

#: Repository root: lib/compaction_lab/paths.py -> parents[2].
REPO_ROOT: Path = Path(__file__).resolve().parents[2]

NOTEBOOKS_DIR: Path = REPO_ROOT / "notebooks"
DATA_DIR: Path = REPO_ROOT / "data"
MANIFESTS_DIR: Path = DATA_DIR / "manifests"
PRICES_DIR: Path = DATA_DIR / "prices"
SHAPES_DIR: Path = DATA_DIR / "shapes"


def results_dir() -> Path:
    """Folder that holds run folders (``data/results`` unless overridden)."""
    env = os.environ.get("COMPACTION_LAB_RESULTS")
    return Path(env).expanduser().resolve() if env else DATA_DIR / "results"


def params_dir() -> Path:
    """Folder that holds the profile YAML files (``papermill_params`` unless overridden)."""
    env = os.environ.get("COMPACTION_LAB_PARAMS")
    return Path(env).expanduser().resolve() if env else REPO_ROOT / "papermill_params"


def notebook_path(name: str) -> Path:
    """Path of a chain notebook given its stem (``01_context_composition``) or file name."""
    stem = name[:-6] if name.endswith(".ipynb") else name
    return NOTEBOOKS_DIR / f"{stem}.ipynb"


def archive_path() -> Path:
    """The SQLite archive of original records (git-ignored; it holds users' own sessions)."""
    env = os.environ.get("COMPACTION_LAB_ARCHIVE")
    return Path(env).expanduser().resolve() if env else DATA_DIR / "archive" / "originals.sqlite"


def ledger_path() -> Path:
    """The SQLite ledger of model calls (it holds requests and responses: keep it out of git)."""
    env = os.environ.get("COMPACTION_LAB_LEDGER")
    return Path(env).expanduser().resolve() if env else DATA_DIR / "ledger" / "ledger.sqlite"
