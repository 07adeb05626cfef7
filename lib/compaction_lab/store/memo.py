"""Results kept by what they were computed from, so work that repeats is done once.

A *memo* maps a content key -- the SHA-256 of everything a result depends on, the library's own
source included (`source_fingerprint`) -- to that result. It has two layers:

- this process's: a bounded mapping per kind. A run's notebooks share one kernel
  (`compaction_lab.run.kernel`), so the cost model and the continuation exam reuse the closed book's
  projections instead of computing them again;
- a folder, when ``COMPACTION_LAB_MEMO`` names one: one file per entry, shared by every process that
  names the same folder. A sweep names its own ``memo/`` for all its runs (in this process or on Dask
  workers), so the runs that differ only in a swept value reuse the synthetic chains and projections
  that do not depend on it. A single run names none.

Only results that are pure functions of their key are kept (an offline summary, never a model's:
those are the checkpoints' and the ledger's). An entry is written to a temporary file and renamed, so
a reader sees a whole entry or none; one that cannot be read is computed again. The files are pickles
of the library's own frozen objects, in a folder of the user's own run output, read by this library
only.

When ``COMPACTION_LAB_MEMO_STATS`` names a folder (the runner sets it to the run folder's
``.memo-stats/``), `write_stats` leaves this process's hits and misses per kind there -- the chain's
kernel does after each notebook (`compaction_lab.run.kernel`), not at every lookup -- and
`read_stats` adds them up for ``run.json``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: The folder of the shared layer (unset: this process's layer only).
MEMO_ENV = "COMPACTION_LAB_MEMO"
#: The folder that receives each process's hit and miss counts (unset: not written).
MEMO_STATS_ENV = "COMPACTION_LAB_MEMO_STATS"

#: Entries kept per kind in this process's layer (the oldest used goes first).
PROCESS_ENTRIES = 4096


@functools.cache
def source_fingerprint() -> str:
    """Return the SHA-256 of the library's source files: a changed rule never reads an older result."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def key(kind: str, *parts: Any) -> str:
    """Return the content key of a `kind` result computed from `parts` (their ``repr``, which must be stable)."""
    h = hashlib.sha256(f"{kind}\0{source_fingerprint()}".encode())
    for part in parts:
        h.update(b"\0")
        h.update(part.encode() if isinstance(part, str) else repr(part).encode())
    return h.hexdigest()


_CONTENT_KEYS: dict[int, tuple[weakref.ref[Any], str]] = {}


def content_key(obj: Any) -> str:
    """Return the SHA-256 of a frozen object's ``repr`` (a session: its id, records and metadata), once per object.

    Two objects with the same content get the same key, however they were loaded; an object whose
    ``repr`` is not stable (an address in it) only misses.
    """
    held = _CONTENT_KEYS.get(id(obj))
    if held is not None and held[0]() is obj:
        return held[1]
    k = hashlib.sha256(repr(obj).encode("utf-8", "surrogatepass")).hexdigest()
    ident = id(obj)

    def forget(_ref: weakref.ref[Any]) -> None:
        _CONTENT_KEYS.pop(ident, None)

    try:
        ref = weakref.ref(obj, forget)
    except TypeError:
        return k  # not weakly referable: not remembered
    _CONTENT_KEYS[ident] = (ref, k)
    return k


class Memo:
    """One kind's entries: this process's layer, then the shared folder (`MEMO_ENV`) when one is named."""

    def __init__(self, kind: str):
        self.kind = kind
        self.entries: OrderedDict[str, Any] = OrderedDict()
        self.hits = {"process": 0, "folder": 0}
        self.misses = 0

    def folder(self) -> Path | None:
        """Return the shared layer's folder for this kind, or None."""
        root = os.environ.get(MEMO_ENV)
        return Path(root) / self.kind if root else None

    def get(self, k: str) -> tuple[bool, Any]:
        """Return ``(True, value)`` for a kept entry, else ``(False, None)``."""
        if k in self.entries:
            self.entries.move_to_end(k)
            self.hits["process"] += 1
            return True, self.entries[k]
        folder = self.folder()
        if folder is not None:
            try:
                value = pickle.loads((folder / k[:2] / k).read_bytes())
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
                pass  # absent or unreadable: computed again
            else:
                self.hits["folder"] += 1
                self._keep(k, value)
                return True, value
        return False, None

    def put(self, k: str, value: Any) -> None:
        """Keep `value` under `k` in this process and, when one is named, in the shared folder."""
        self.misses += 1
        self._keep(k, value)
        folder = self.folder()
        if folder is None:
            return
        target = folder / k[:2] / k
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, target)
        except OSError:
            # A folder that cannot be written costs time, never a result.
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def _keep(self, k: str, value: Any) -> None:
        self.entries[k] = value
        self.entries.move_to_end(k)
        while len(self.entries) > PROCESS_ENTRIES:
            self.entries.popitem(last=False)


_MEMOS: dict[str, Memo] = {}


def memo(kind: str) -> Memo:
    """Return this process's memo of `kind` (``"projection"``, ``"chains"``, ...)."""
    return _MEMOS.setdefault(kind, Memo(kind))


def remembered(kind: str, k: str, compute: Callable[[], T]) -> T:
    """Return the `kind` result kept under key `k`, computing and keeping it first when there is none."""
    m = memo(kind)
    found, value = m.get(k)
    if found:
        return value
    value = compute()
    m.put(k, value)
    return value


def stats() -> dict[str, dict[str, int]]:
    """Return this process's hits (by layer) and misses per kind."""
    return {
        kind: {"hits": sum(m.hits.values()), "folder_hits": m.hits["folder"], "misses": m.misses}
        for kind, m in sorted(_MEMOS.items())
    }


def write_stats() -> None:
    """Write this process's `stats` to ``<COMPACTION_LAB_MEMO_STATS>/<pid>.json`` when that folder is named."""
    folder = os.environ.get(MEMO_STATS_ENV)
    if not folder:
        return
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(stats(), out)
        os.replace(tmp, Path(folder) / f"{os.getpid()}.json")
    except OSError:
        pass  # counts are a report, never a reason to fail


def read_stats(folders: Iterable[Path]) -> dict[str, dict[str, int]]:
    """Add up the counts every process wrote into `folders` (`write_stats`), per kind."""
    total: dict[str, dict[str, int]] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
            try:
                counts = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for kind, row in counts.items() if isinstance(counts, dict) else ():
                into = total.setdefault(kind, {"hits": 0, "folder_hits": 0, "misses": 0})
                for name in into:
                    into[name] += int(row.get(name, 0)) if isinstance(row, dict) else 0
    return total


__all__ = [
    "MEMO_ENV",
    "MEMO_STATS_ENV",
    "Memo",
    "content_key",
    "key",
    "memo",
    "read_stats",
    "remembered",
    "source_fingerprint",
    "stats",
]
