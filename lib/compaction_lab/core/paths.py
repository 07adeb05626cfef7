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
``COMPACTION_LAB_PROVIDERS``
    Folder holding the providers (default ``data/providers``).
``COMPACTION_LAB_CACHE``
    Folder of derived files that are expensive to make and safe to make again (default ``data/cache``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: Repository root: lib/compaction_lab/core/paths.py -> parents[3].
REPO_ROOT: Path = Path(__file__).resolve().parents[3]

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


def providers_dir() -> Path:
    """Folder that holds the providers' YAML files (``data/providers`` unless overridden)."""
    env = os.environ.get("COMPACTION_LAB_PROVIDERS")
    return Path(env).expanduser().resolve() if env else DATA_DIR / "providers"


def cache_dir() -> Path:
    """Folder of derived files kept between processes (``data/cache`` unless overridden); deleting it is safe."""
    env = os.environ.get("COMPACTION_LAB_CACHE")
    return Path(env).expanduser().resolve() if env else DATA_DIR / "cache"


def notebook_path(name: str) -> Path:
    """Path of a chain notebook given its stem (``01_context_composition``) or file name."""
    stem = name[:-6] if name.endswith(".ipynb") else name
    return NOTEBOOKS_DIR / f"{stem}.ipynb"


def archive_path() -> Path:
    """Return the SQLite archive of original records (git-ignored; it holds users' own sessions)."""
    env = os.environ.get("COMPACTION_LAB_ARCHIVE")
    return Path(env).expanduser().resolve() if env else DATA_DIR / "archive" / "originals.sqlite"


#: Set (to a folder) in a dry run: every model client answers from a stand-in and every ledger opened is
#: ``<folder>/ledger.sqlite`` (a copy of the real one): a stand-in answer is never recorded where a real
#: run would reuse it (`compaction_lab.run.plan`).
DRY_RUN_ENV = "COMPACTION_LAB_DRY_RUN"


def dry_run_folder() -> Path | None:
    """Return the dry run's folder when this process is in one, else None."""
    value = os.environ.get(DRY_RUN_ENV, "").strip()
    return Path(value) if value else None


def ledger_path() -> Path:
    """Return the SQLite ledger of model calls (it holds requests and responses: keep it out of git)."""
    env = os.environ.get("COMPACTION_LAB_LEDGER")
    return Path(env).expanduser().resolve() if env else DATA_DIR / "ledger" / "ledger.sqlite"


# --------------------------------------------------------------------------- checking a location before using it

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"


class StoragePathError(ValueError):
    """A storage location cannot be used.

    A folder where a file belongs, a file that is not a database, a folder this process cannot write in.
    The message names the path.
    """


def _check_writable_folder(folder: str | Path, what: str) -> None:
    """Raise `StoragePathError` unless `folder` is, or can be created as, a folder this process writes in.

    Nothing is left behind: the nearest existing ancestor is probed by creating
    and removing a temporary folder in it. A real write is the only reliable
    test -- ``os.access`` says yes to root everywhere and knows nothing of
    read-only mounts.

    Parameters
    ----------
    folder : path
    what : str
        What the folder is for, for the message (``"results folder"``).
    """
    folder = Path(folder).expanduser()
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise StoragePathError(
            f"{what} {folder} is a file, not a folder"
            if probe == folder
            else f"{what} {folder} cannot be created: {probe} is a file"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=probe))
    except OSError as exc:
        raise StoragePathError(f"{what} {folder}: cannot write in {probe} ({exc.strerror or exc})") from None


def _check_sqlite_file(path: str | Path, what: str, *, create: bool) -> None:
    """Raise `StoragePathError` unless `path` is an SQLite database -- or, with `create`, can become one.

    An existing file that is not a database is never touched (SQLite would
    fail on it, or overwrite nothing but still leave journals beside it); a
    folder is refused; a missing file is an error unless `create`, and then its
    folder must be writable (`check_writable_folder`), as must an existing
    database's folder, where SQLite keeps its journal.

    Parameters
    ----------
    path : path
    what : str
        What the file is, for the message (``"archive"``, ``"checkpoint database"``).
    create : bool
        Whether the caller may create the file (and its folders).
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise StoragePathError(f"{what} {path} is a folder, not an SQLite file")
    if not path.exists():
        if not create:
            raise StoragePathError(f"no {what} at {path}")
        _check_writable_folder(path.parent, f"folder of the {what}")
        return
    if not path.is_file():
        raise StoragePathError(f"{what} {path} is not a regular file")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoragePathError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    # An empty file is what sqlite3 itself creates first: it becomes a database on first write.
    if head and head != SQLITE_HEADER:
        raise StoragePathError(f"{what} {path} is not an SQLite database (left untouched)")
    if create:
        _check_writable_folder(path.parent, f"folder of the {what}")


def _no_os_errors(check):
    """Wrap `check` so any OS error on the way is a `StoragePathError` naming the path, never a traceback.

    Such an error: a parent folder this process may not enter (``stat`` itself fails with EACCES).
    """
    import functools

    @functools.wraps(check)
    def checked(path, what, **kw):
        try:
            return check(path, what, **kw)
        except OSError as exc:
            raise StoragePathError(f"{what} {path}: {exc.strerror or exc}") from None

    return checked


check_writable_folder = _no_os_errors(_check_writable_folder)
check_sqlite_file = _no_os_errors(_check_sqlite_file)
