"""Importers: agent session logs -> `Session`.

One module per source format, each providing the names of the `Importer`
protocol and registering itself in `IMPORTERS` (`ingest.registry`)::

    FORMAT: str                                   # "codex", "claude_code", ... (a format, not an agent key)
    def sniff(head: Head) -> bool                 # recognise a source by content
    def load(path, audit) -> Iterator[Session]    # stream its sessions
    IMPORTERS.add(FORMAT, sys.modules[__name__], rank=30, agent="codex")

`detect` asks the importers in rank order (`formats`: most specific first) and
`load_sessions` imports files, directories (recursively) and databases,
counting every skip in one `ImportAudit`: only a path that does not exist at
all raises (`FileNotFoundError`); an unreadable, empty, damaged or
unrecognised source -- named explicitly or found in a folder -- is a counted
skip with its reason. Folders are walked once (`iter_sources`): symbolic links
to folders are followed, loop-safe. Synthetic chains are generated, not
imported: see `compaction_lab.ingest.synthetic`.

What importers share lives in one module per concept: `import_audit` (the
audit, skip reasons, errors), `json_repair` (the one JSON decode), `files`
(the one file-opening path: zstd with damage handling, heads, JSONL, JSON) and
`builder` (`SessionBuilder`).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from compaction_lab.core.registry import UnknownName
from compaction_lab.core.session import Session
from compaction_lab.engine.scheduler import Engine, open_engine
from compaction_lab.ingest.files import Head, find_damage, read_head
from compaction_lab.ingest.import_audit import ImportAudit, IngestError, UnknownFormat, os_reason
from compaction_lab.ingest.registry import IMPORTERS, Importer, agent_of_format
from compaction_lab.ingest.units import (
    SPAN_BYTES,
    Admission,
    Segmented,
    Unit,
    WalkStep,
    read_unit,
    source_size,
    split_spans,
)

T = TypeVar("T")

#: File suffixes considered when walking a directory (others are not session logs).
CANDIDATE_SUFFIXES = (".jsonl", ".zst", ".json", ".traj", ".db", ".sqlite", ".ndjson")


def formats() -> tuple[str, ...]:
    """Return every registered format, in sniffing order (the most specific signatures first)."""
    return IMPORTERS.names()


def importer(fmt: str) -> Importer:
    """Return the importer of a format.

    Raises
    ------
    IngestError
        When no importer has that format (the message lists the known ones).
    """
    try:
        return IMPORTERS.get(fmt)
    except UnknownName:
        raise IngestError(f"unknown format {fmt!r}; known: {', '.join(formats())}") from None


def detect(path: str | Path, head: Head | None = None) -> str:
    """Return the format of a source, recognised by content.

    Raises
    ------
    UnknownFormat
        Naming every format tried.
    FileNotFoundError
        If the path does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    claimed = claimants(head or read_head(path))
    if not claimed:
        raise UnknownFormat(path, formats())
    return claimed[0]


def claimants(head: Head) -> list[str]:
    """Return every format whose sniffer accepts this head, in sniffing order (detect takes the first)."""
    return [e.name for e in IMPORTERS.entries() if e.obj.sniff(head)]


def check_paths(paths: Iterable[str | Path]) -> None:
    """Raise `FileNotFoundError` for the first path that does not exist at all (not even as a link).

    What `iter_sources` refuses, said before any source is read: a command calls it before it creates
    anything (``import`` its archive), so a mistyped path writes nothing. A path that exists but cannot be
    read is not refused here: the import counts it as an ``unreadable`` skip.
    """
    for p in paths:
        path = Path(p).expanduser()
        try:
            os.lstat(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file or directory") from None
        except OSError:
            continue  # unreadable (a parent folder this account may not enter): counted by the import


def iter_sources(path: str | Path, audit: ImportAudit) -> Iterator[tuple[Path, str]]:
    """Every importable source under `path` with its format; everything else is a counted skip.

    A file is one source. A directory is walked recursively in sorted order;
    a directory that is itself a source (an OpenCode storage tree) is not
    descended into. Symbolic links to folders are followed once: a link back
    into a folder being walked is a ``symlink_loop`` skip, a second way into an
    already walked folder a ``duplicate_path`` skip. Unreadable folders and
    files are ``unreadable`` skips with the operating system's reason;
    dangling links and link loops among the files are ``dangling_symlink`` /
    ``symlink_loop`` skips. A file -- named explicitly or found in a folder --
    that no importer recognises is an ``unknown_format`` skip naming the
    formats tried (``empty_file`` when it holds nothing, ``nul_tail`` when only
    NUL bytes, ``corrupt_compressed`` when its damaged compression hides the
    format). Inside a folder, only files with a `CANDIDATE_SUFFIXES` name are
    considered.

    Raises
    ------
    FileNotFoundError
        Only when `path` itself does not exist (not even as a link).
    """
    path = Path(path).expanduser()
    check_paths([path])
    try:
        os.lstat(path)
    except OSError as exc:  # a parent folder this account may not enter: counted, like any unreadable source
        audit.skip(path, None, "unreadable", os_reason(exc))
        return
    if not path.is_dir():
        fmt = _classify(path, audit)
        if fmt is not None:
            yield path, fmt
        return
    yield from _walk(path, audit)


def _walk(top: Path, audit: ImportAudit) -> Iterator[tuple[Path, str]]:
    """Yield the sources of a folder tree (see `iter_sources`): one walk, links followed once."""

    def unreadable(exc: OSError) -> None:
        audit.skip(exc.filename or top, None, "unreadable", os_reason(exc))

    # Real paths of the folders walked or about to be (reserved when listed, so that two
    # links to one folder in the same listing are caught too) -> the path it was read as.
    walked: dict[str, str] = {os.path.realpath(top): str(top)}
    for root, dirs, files in os.walk(top, onerror=unreadable, followlinks=True):
        root_p = Path(root)
        fmt = next(iter(claimants(read_head(root_p))), None)
        if fmt is not None:
            dirs[:] = []  # the whole tree is one source
            yield root_p, fmt
            continue
        here = os.path.realpath(root)
        keep = []
        # Real folders claim their place before links to them, so the real path is the one read.
        for name in sorted(dirs, key=lambda d: (os.path.islink(os.path.join(root, d)), d)):
            full = os.path.join(root, name)
            real = os.path.realpath(full)
            if real in walked:
                if here == real or here.startswith(real.rstrip(os.sep) + os.sep):
                    audit.skip(full, None, "symlink_loop", f"links back to {real}, a folder being walked")
                else:
                    audit.skip(full, None, "duplicate_path", f"{real} is already read as {walked[real]}")
                continue
            walked[real] = full
            keep.append(name)
        dirs[:] = sorted(keep)
        for name in sorted(files):
            p = root_p / name
            if name.endswith(CANDIDATE_SUFFIXES):
                fmt = _classify(p, audit)
                if fmt is not None:
                    yield p, fmt
            elif not p.suffix and os.path.islink(p) and not os.path.exists(p):
                _broken_link(p, audit)  # it may have led to a folder of sessions: say so


def _broken_link(p: Path, audit: ImportAudit) -> None:
    """Count a symbolic link that leads nowhere: a loop, a dangling link, or an unreachable target."""
    try:
        os.stat(p)
        return  # it leads somewhere after all
    except OSError as exc:
        err = exc
    if err.errno == errno.ELOOP:
        audit.skip(p, None, "symlink_loop", "the link leads back to itself (through other links)")
    elif err.errno in (errno.ENOENT, errno.ENOTDIR):
        try:
            target = os.readlink(p)
        except OSError:
            target = "?"
        audit.skip(p, None, "dangling_symlink", f"points at {target}, which does not exist")
    else:
        audit.skip(p, None, "unreadable", os_reason(err))


def _classify(p: Path, audit: ImportAudit) -> str | None:
    """Return the format of one file, or None with the reason counted (never raises OSError)."""
    try:
        st = os.stat(p)
    except OSError as exc:
        if os.path.islink(p):
            _broken_link(p, audit)
        else:
            audit.skip(p, None, "unreadable", os_reason(exc))
        return None
    if not stat.S_ISREG(st.st_mode):
        audit.skip(p, None, "unreadable", "not a regular file (a device, socket or pipe)")
        return None
    try:
        head = read_head(p)
    except OSError as exc:
        audit.skip(p, None, "unreadable", os_reason(exc))
        return None
    claimed = claimants(head)
    if claimed:
        return claimed[0]
    damage, line = head.damage, head.raw.count(b"\n") + 1
    if damage is None and head.compressed:
        # Garbage in the head may be a damage the decoder only notices later (a checksum).
        try:
            damage, line = find_damage(p)
        except OSError as exc:
            audit.skip(p, None, "unreadable", os_reason(exc))
            return None
    if damage is not None:
        audit.skip(
            p,
            line,
            "corrupt_compressed",
            f"{damage.describe()}; no format recognised in what decoded (tried: {', '.join(formats())})",
        )
    elif head.blank and b"\x00" in head.raw:
        at = head.raw.index(b"\x00")
        audit.skip(p, head.raw.count(b"\n", 0, at) + 1, "nul_tail", "the file holds only NUL bytes (and blanks)")
    elif head.blank:
        audit.skip(p, None, "empty_file", "0 bytes" if not head.raw else "only whitespace")
    else:
        audit.skip(p, None, "unknown_format", str(UnknownFormat(p, formats())))
    return None


def plan(
    paths: Iterable[str | Path],
    formats: Iterable[str] | None = None,
    split_bytes: int | None = None,
) -> Iterator[WalkStep]:
    """Yield the units of an import, in reading order, with the walk's skips before each.

    Parameters
    ----------
    paths : iterable of paths
    formats : iterable of str, optional
        Only sources of these formats become units.
    split_bytes : int, optional
        Split large plain files of splittable formats into spans of about this
        many bytes (None: one unit per source).

    Raises
    ------
    FileNotFoundError
        When a path does not exist at all (as `iter_sources`).
    """
    wanted = set(formats) if formats else None
    walk = Segmented()
    for p in paths:
        for source, fmt in iter_sources(p, walk):
            if wanted and fmt not in wanted:
                continue
            spans = split_spans(source, importer(fmt), split_bytes) if split_bytes else None
            if not spans:
                yield WalkStep(walk.cut(), Unit(source, fmt, None, source_size(source)))
                continue
            for i, span in enumerate(spans):
                yield WalkStep(
                    walk.cut() if i == 0 else ImportAudit(), Unit(source, fmt, span, span.end - span.start, i == 0)
                )
    yield WalkStep(walk.cut(), None)


def load_sessions(
    paths: str | Path | Iterable[str | Path],
    audit: ImportAudit | None = None,
    formats: Iterable[str] | None = None,
    engine: Engine | str | None = None,
) -> Iterator[Session]:
    """Stream the sessions of files, directories and databases.

    Parameters
    ----------
    paths : path or iterable of paths
    audit : ImportAudit, optional
        Receives counts and skips (a fresh one is used if omitted).
    formats : iterable of str, optional
        Only import sources of these formats (others are not read).
    engine : Engine or str, optional
        Read the sources on this engine (`compaction_lab.engine.scheduler`), or on one
        opened for the input's size from this scheduler setting (``auto``,
        ``sync``, ``local``, an address) and closed at the end. None: read
        here, one source at a time.

    Yields
    ------
    Session
        One at a time, in reading order whichever engine reads them. In this
        process memory is bounded by the largest session; on an engine by a
        few units (files, or spans of about `SPAN_BYTES` of a large file) per
        worker, read ahead while earlier ones are consumed.

    Raises
    ------
    FileNotFoundError
        When a path does not exist at all; every other fault of a source is a
        skip counted in `audit` (see `iter_sources`).

    Notes
    -----
    Built on `compaction_lab.ingest.units`: the same units, audit segments and
    `Admission` in every reading, so each engine gives the same sessions and
    the same audit.
    """
    audit = audit if audit is not None else ImportAudit()
    if isinstance(paths, (str, Path)):
        paths = [paths]
    admission = Admission()
    if engine is None:
        for step in plan(paths, formats):
            audit.merge(step.before)
            if step.unit is None:
                continue
            audit.files += step.unit.first
            for segment, session in read_unit(step.unit, importer(step.unit.fmt)):
                audit.merge(segment)
                if session is not None and (kept := admit(admission, session, step.unit.path, audit)) is not None:
                    yield audit.produced(kept)
        return
    steps = list(plan(paths, formats, split_bytes=SPAN_BYTES))
    for unit, handle in units_on_engine(steps, audit, engine, lambda e, u: e.submit(_read_whole, u)):
        pairs = handle.result()
        handle.release()
        for segment, session in pairs:
            audit.merge(segment)
            if session is not None and (kept := admit(admission, session, unit.path, audit)) is not None:
                yield audit.produced(kept)


def _read_whole(unit: Unit) -> list[tuple[ImportAudit, Session | None]]:
    """Task: one unit's sessions with their audit segments (see `read_unit`)."""
    return list(read_unit(unit, importer(unit.fmt)))


def units_on_engine(
    steps: list[WalkStep],
    audit: ImportAudit,
    engine: Engine | str,
    start: Callable[[Engine, Unit], T],
    window: int | None = None,
) -> Iterator[tuple[Unit, T]]:
    """Start every unit of a plan on an engine (`start` submits its tasks); yield them in reading order.

    At most `window` units run ahead of the one yielded (`Engine.ordered`).
    The walk's skips before each unit and the count of sources are merged into
    `audit` as a sequential reading would merge them; what the unit's tasks
    return is the caller's to collect and merge. An engine given by its
    scheduler setting is opened for the plan's size and closed when the
    iteration ends.
    """
    units = [st.unit for st in steps if st.unit is not None]
    own = not isinstance(engine, Engine)
    eng = open_engine(engine, input_bytes=sum(u.size for u in units)) if not isinstance(engine, Engine) else engine
    befores = iter(st.before for st in steps)
    try:
        for unit, started in eng.ordered(units, start, window):
            audit.merge(next(befores))
            audit.files += unit.first
            yield unit, started
        for before in befores:
            audit.merge(before)
    finally:
        if own:
            eng.close()


def admit(admission: Admission, session: Session, source: str | Path, audit: ImportAudit) -> Session | None:
    """Return the session as kept (renamed when its id was taken), or None for a duplicate (counted in `audit`)."""
    sid = admit_id(admission, session.source_format, session.id, content_digest(session), source, audit)
    if sid is None:
        return None
    return session if sid == session.id else renamed(session, sid)


def admit_id(
    admission: Admission, source_format: str, session_id: str, digest: bytes, source: str | Path, audit: ImportAudit
) -> str | None:
    """`Admission.admit`, counting a duplicate as a ``duplicate_session`` skip of `source`."""
    sid = admission.admit(source_format, session_id, digest)
    if sid is None:
        audit.skip(source, None, "duplicate_session", f"session {session_id} already imported")
    return sid


def content_digest(session: Session) -> bytes:
    """Hash of a session's records (not its path), to recognise the same session imported twice.

    Every imported session's text passes through it once: SHA-256, which x86-64 and ARM CPUs run in
    hardware (SHA extensions), hashes faster than BLAKE2b here and is a small share of the import's
    time (``make bench BENCH=import`` measures both). Only compared within one import, never stored.
    """
    h = hashlib.sha256()
    for r in session.records:
        h.update(
            f"{r.entry_id}\x00{r.block_index}\x00{r.kind}\x00{r.tool}\x00{r.call_id}\x00".encode(
                "utf-8", "surrogatepass"
            )
        )
        h.update(r.text.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.digest()


def renamed(session: Session, new_id: str) -> Session:
    """Return the session under another id (records follow), noting the original id in metadata."""
    records = tuple(dataclasses.replace(r, session_id=new_id) for r in session.records)
    metadata = {**session.metadata, "renamed_from": session.id}
    return dataclasses.replace(session, id=new_id, records=records, metadata=metadata)


__all__ = [
    "IMPORTERS",
    "Head",
    "Importer",
    "ImportAudit",
    "IngestError",
    "UnknownFormat",
    "admit",
    "agent_of_format",
    "admit_id",
    "check_paths",
    "claimants",
    "content_digest",
    "detect",
    "formats",
    "importer",
    "iter_sources",
    "load_sessions",
    "plan",
    "units_on_engine",
    "read_head",
    "renamed",
]
