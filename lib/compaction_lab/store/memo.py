"""Results kept by what they were computed from, so work that repeats is done once.

A *memo* maps a content key -- the SHA-256 of everything a result depends on, the library's own
source included (`source_fingerprint`) -- to that result. It has two layers: this process's, a
bounded mapping per kind (a run's notebooks share a kernel, so later notebooks reuse the closed
book's projections); and a folder, when ``COMPACTION_LAB_MEMO`` names one, one file per entry shared
by every process that names it (a sweep names its own ``memo/``). Only results that are pure
functions of their key are kept (an offline summary, never a model's). An entry is written to a
temporary file and renamed; one that cannot be read is computed again.

**A folder's entries are signed; nothing unsigned is unpickled.** Each entry starts with `MAGIC` and
an HMAC-SHA256 of its kind, key and bytes under a key derived from this user's secret
(`MEMO_KEY_FILE_ENV`) and the folder's real path. The MAC is checked before anything is unpickled,
and `_Unpickler` builds only the library's dataclasses, enums and plain containers; an entry that
fails is *untrusted*: counted (``untrusted`` in `stats`), never loaded, computed again. Without a
usable secret (`key_problem`) the folder is neither read nor written. `check_folder` removes a
folder's untrusted entries (`compaction_lab.run.sweep.resume_sweep`).

When ``COMPACTION_LAB_MEMO_STATS`` names a folder, `write_stats` leaves this process's hits and
misses per kind there and `read_stats` adds them up for ``run.json``.

Design: docs/architecture.md#the-memo-work-done-once.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import hmac
import io
import json
import os
import pickle
import re
import stat
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from compaction_lab.core import bounded_json, paths, regular_file

T = TypeVar("T")

#: The folder of the shared layer (unset: this process's layer only).
MEMO_ENV = "COMPACTION_LAB_MEMO"
#: The folder that receives each process's hit and miss counts (unset: not written).
MEMO_STATS_ENV = "COMPACTION_LAB_MEMO_STATS"

#: The file holding this user's secret, from which every memo folder's key is derived (unset: `secret_path`).
MEMO_KEY_FILE_ENV = "COMPACTION_LAB_MEMO_KEY_FILE"

#: Entries kept per kind in this process's layer (the oldest used goes first).
PROCESS_ENTRIES = 4096

#: How every entry file starts; the 32 bytes of its MAC follow, then the pickle.
MAGIC = b"compaction-lab memo 1\n"
#: Bytes of the secret (`secret_path`) and of an entry's MAC.
SECRET_BYTES = 32
#: Largest entry read: a planted file (sparse, or growing) never fills a reader's memory.
MAX_ENTRY_BYTES = 512 * 1024 * 1024

#: An entry's file name: its content key (`key`), in a folder named by the key's first two characters.
_ENTRY_NAME = re.compile(r"^[0-9a-f]{64}$")


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


def secret_path() -> Path:
    """Return the file of this user's memo secret: `MEMO_KEY_FILE_ENV`, else ``memo.key`` in the cache folder.

    The cache folder (`core.paths.cache_dir`, ``data/cache`` or ``COMPACTION_LAB_CACHE``) is never a sweep's:
    deleting it only makes the memo folders' entries untrusted, computed again.
    """
    given = os.environ.get(MEMO_KEY_FILE_ENV)
    return Path(given).expanduser() if given else paths.cache_dir() / "memo.key"


_SECRETS: dict[str, bytes] = {}
_PROBLEMS: dict[str, str] = {}


def _read_secret(path: Path) -> bytes:
    """Read the secret; ValueError when the file could be anyone's (not this user's alone, a link, not 32 bytes)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise ValueError("owned by another account")
        if st.st_mode & 0o077:
            raise ValueError(f"other accounts may read or write it (mode {stat.S_IMODE(st.st_mode):o}; chmod 600 it)")
        data = os.read(fd, SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != SECRET_BYTES:
        raise ValueError(f"holds {len(data)} bytes, not a key of {SECRET_BYTES}")
    return data


def _secret() -> bytes | None:
    """Return this user's secret, making it on first use; None when it cannot be had (`key_problem` says why)."""
    path = secret_path()
    known = _SECRETS.get(str(path))
    if known is not None:
        return known
    try:
        try:
            value = _read_secret(path)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".memo-key-")  # mode 0600
            try:
                os.write(fd, os.urandom(SECRET_BYTES))
                os.fsync(fd)
                os.close(fd)
                try:
                    os.link(tmp, path)  # whole or not at all; another process's, made first, is kept
                except FileExistsError:
                    pass
            finally:
                os.unlink(tmp)
            value = _read_secret(path)
    except (OSError, ValueError) as exc:
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        _PROBLEMS[str(path)] = f"memo secret {path}: {reason}"
        return None
    _PROBLEMS.pop(str(path), None)
    _SECRETS[str(path)] = value
    return value


def key_problem() -> str | None:
    """Say why no memo folder can be used here (the secret cannot be made or is not this user's alone); None: it can."""
    return None if _secret() is not None else _PROBLEMS.get(str(secret_path()), "memo secret unavailable")


_FOLDER_KEYS: dict[tuple[bytes, str], bytes] = {}


def _folder_key(root: Path) -> bytes | None:
    """Return the key of memo folder `root`: this user's secret and the folder's real path; None without a secret."""
    secret = _secret()
    if secret is None:
        return None
    where = os.path.realpath(root)
    k = _FOLDER_KEYS.get((secret, where))
    if k is None:
        k = hmac.new(secret, b"compaction-lab memo folder\0" + os.fsencode(where), hashlib.sha256).digest()
        _FOLDER_KEYS[(secret, where)] = k
    return k


def _mac(folder_key: bytes, kind: str, k: str, payload: bytes | memoryview) -> bytes:
    """Return the MAC of an entry: its kind, its key and its bytes, under its folder's key."""
    h = hmac.new(folder_key, f"{kind}\0{k}\0".encode(), hashlib.sha256)
    h.update(payload)
    return h.digest()


def _read_entry(path: Path) -> bytes | None:
    """Return an entry file's bytes; None when absent; ValueError when not one to read.

    Not a regular file (a link too), unreadable, or larger than `MAX_ENTRY_BYTES` (`core.regular_file.read`:
    opened without blocking or following a link).
    """
    try:
        return regular_file.read(path, MAX_ENTRY_BYTES, follow_links=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot be opened: {exc.strerror}") from None


def _verified(data: bytes, folder_key: bytes, kind: str, k: str) -> memoryview | None:
    """Return an entry's pickle when its MAC is the one this folder's key gives (constant-time compare); else None."""
    head = len(MAGIC)
    if len(data) < head + SECRET_BYTES or not data.startswith(MAGIC):
        return None
    payload = memoryview(data)[head + SECRET_BYTES :]
    if not hmac.compare_digest(data[head : head + SECRET_BYTES], _mac(folder_key, kind, k, payload)):
        return None
    return payload


#: The only non-library globals an entry may name: plain containers and values (`_Unpickler`).
_PLAIN_GLOBALS = frozenset(
    {("builtins", n) for n in ("bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int")}
    | {("builtins", n) for n in ("list", "set", "slice", "str", "tuple")}
    | {("collections", "OrderedDict")}
    | {("datetime", n) for n in ("date", "datetime", "time", "timedelta", "timezone")}
)


class _Unpickler(pickle.Unpickler):
    """Unpickles only what an entry holds: the library's dataclasses and enums, plain containers and values.

    Defence in depth behind the MAC (`_verified`): even a signed entry names no function (``os.system``,
    ``builtins.eval``) and no other class, so it can only build data.
    """

    def find_class(self, module: str, name: str) -> Any:
        """Return the class `module`.`name` if an entry may hold it; refuse anything else."""
        if (module, name) in _PLAIN_GLOBALS:
            return super().find_class(module, name)
        if module == "compaction_lab" or module.startswith("compaction_lab."):
            found = super().find_class(module, name)
            if isinstance(found, type) and (dataclasses.is_dataclass(found) or issubclass(found, enum.Enum)):
                return found
        raise pickle.UnpicklingError(f"a memo entry may not name {module}.{name}")


def _unpickled(payload: bytes | memoryview) -> Any:
    """Unpickle a verified entry with `_Unpickler`."""
    return _Unpickler(io.BytesIO(payload)).load()


class Memo:
    """One kind's entries: this process's layer, then the shared folder (`MEMO_ENV`) when one is named."""

    def __init__(self, kind: str):
        self.kind = kind
        self.entries: OrderedDict[str, Any] = OrderedDict()
        self.hits = {"process": 0, "folder": 0}
        self.misses = 0
        self.untrusted = 0  # folder entries found but not signed for this folder by this user's secret

    def folder(self) -> Path | None:
        """Return the shared layer's folder for this kind, or None."""
        root = os.environ.get(MEMO_ENV)
        return Path(root) / self.kind if root else None

    def get(self, k: str) -> tuple[bool, Any]:
        """Return ``(True, value)`` for a kept entry, else ``(False, None)``.

        A folder entry is unpickled only once its MAC is verified (`_verified`); one that is not
        is counted ``untrusted`` and reads as absent.
        """
        if k in self.entries:
            self.entries.move_to_end(k)
            self.hits["process"] += 1
            return True, self.entries[k]
        folder = self.folder()
        folder_key = _folder_key(folder.parent) if folder is not None else None
        if folder is not None and folder_key is not None:
            try:
                data = _read_entry(folder / k[:2] / k)
            except ValueError:
                data, payload = None, None
                self.untrusted += 1
            else:
                payload = _verified(data, folder_key, self.kind, k) if data is not None else None
                if data is not None and payload is None:
                    self.untrusted += 1
            if payload is not None:
                try:
                    value = _unpickled(payload)
                except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
                    pass  # signed here, yet unreadable (a class since renamed): computed again
                else:
                    self.hits["folder"] += 1
                    self._keep(k, value)
                    return True, value
        return False, None

    def put(self, k: str, value: Any) -> None:
        """Keep `value` under `k` in this process and, when one is named, in the shared folder (signed)."""
        self.misses += 1
        self._keep(k, value)
        folder = self.folder()
        folder_key = _folder_key(folder.parent) if folder is not None else None
        if folder is None or folder_key is None:
            return
        target = folder / k[:2] / k
        tmp = None
        try:
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC)
                out.write(_mac(folder_key, self.kind, k, payload))
                out.write(payload)
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


@dataclass(frozen=True)
class FolderCheck:
    """What `check_folder` found: entries signed for the folder (kept) and entries not (removed)."""

    trusted: int
    untrusted: int


def check_folder(root: Path | str) -> FolderCheck:
    """Check every entry of memo folder `root` (``<kind>/<xx>/<key>``) and remove those not trusted.

    An entry is trusted when its MAC is the one this user's secret gives for this folder, kind and key
    (read a block at a time: a large planted file costs no memory). Only files named as entries are
    judged, and no link is followed: nothing else in or beyond the folder is touched. Without a secret
    (`key_problem`) every entry counts as untrusted and is removed -- none could be read anyway.
    """
    root = Path(root)
    folder_key = _folder_key(root)
    trusted = untrusted = 0
    for kind_dir in _subfolders(root):
        for prefix_dir in _subfolders(kind_dir):
            try:
                entries = sorted(prefix_dir.iterdir())
            except OSError:
                continue  # a folder this account cannot list: its entries cannot be read either
            for entry in entries:
                if not _ENTRY_NAME.match(entry.name) or entry.name[:2] != prefix_dir.name:
                    continue
                if folder_key is not None and _signed_file(entry, folder_key, kind_dir.name):
                    trusted += 1
                    continue
                try:
                    entry.unlink()
                except IsADirectoryError:
                    continue  # a folder named as an entry: never read, left alone
                except OSError:
                    pass
                untrusted += 1
    return FolderCheck(trusted, untrusted)


def _subfolders(folder: Path) -> list[Path]:
    """Return the folders directly in `folder` (links not followed); none when it is not a folder."""
    try:
        return sorted(p for p in folder.iterdir() if stat.S_ISDIR(p.lstat().st_mode))
    except OSError:
        return []


def _signed_file(path: Path, folder_key: bytes, kind: str) -> bool:
    """Tell whether an entry file carries the MAC this folder's key gives it, reading a block at a time."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            return False
        head = f.read(len(MAGIC) + SECRET_BYTES)
        if len(head) < len(MAGIC) + SECRET_BYTES or not head.startswith(MAGIC):
            return False
        h = hmac.new(folder_key, f"{kind}\0{path.name}\0".encode(), hashlib.sha256)
        while block := f.read(1 << 20):
            h.update(block)
        return hmac.compare_digest(head[len(MAGIC) :], h.digest())


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


def forget() -> None:
    """Forget this process's layer and its counts (a kernel that moves to another run: `run.kernel.adopt_code`).

    The folder's entries stay: the next run finds there what an earlier one kept.
    """
    _MEMOS.clear()


def stats() -> dict[str, dict[str, int]]:
    """Return this process's hits (by layer), misses and untrusted folder entries per kind."""
    return {
        kind: {
            "hits": sum(m.hits.values()),
            "folder_hits": m.hits["folder"],
            "misses": m.misses,
            "untrusted": m.untrusted,
        }
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
                counts = bounded_json.load_file(path)
            except (OSError, ValueError):
                continue
            for kind, row in counts.items() if isinstance(counts, dict) else ():
                into = total.setdefault(kind, {"hits": 0, "folder_hits": 0, "misses": 0, "untrusted": 0})
                for name in into:
                    count = row.get(name, 0) if isinstance(row, dict) else 0
                    into[name] += count if type(count) is int and 0 <= count < 2**63 else 0  # a count, else none
    return total


__all__ = [
    "MAGIC",
    "MAX_ENTRY_BYTES",
    "MEMO_ENV",
    "MEMO_KEY_FILE_ENV",
    "MEMO_STATS_ENV",
    "SECRET_BYTES",
    "FolderCheck",
    "Memo",
    "check_folder",
    "content_key",
    "forget",
    "key",
    "key_problem",
    "memo",
    "read_stats",
    "remembered",
    "secret_path",
    "source_fingerprint",
    "stats",
]
