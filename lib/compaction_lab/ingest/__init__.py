"""Importers: agent session logs -> `Session`.

One module per source format, each exposing the same three names::

    FORMAT: str                                   # "codex", "claude_code", ...
    def sniff(head: base.Head) -> bool            # recognise a source by content
    def load(path, report) -> Iterator[Session]   # stream its sessions

`detect` asks the importers in `FORMATS` order (most specific first) and
`load_sessions` imports files, directories (recursively) and databases,
counting every skip in one `ImportReport`. Synthetic chains are generated, not
imported: see `compaction_lab.ingest.synthetic`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Iterable, Iterator

from ..session import Session
from .base import Head, ImportReport, IngestError, UnknownFormat, read_head

#: Importers in sniffing order: the most specific signatures first.
FORMATS: tuple[str, ...] = ("opencode", "swe_agent", "codex", "claude_code", "pi", "chat_jsonl")

#: File suffixes considered when walking a directory (others are not session logs).
CANDIDATE_SUFFIXES = (".jsonl", ".zst", ".json", ".traj", ".db", ".sqlite", ".ndjson")


def importer(fmt: str) -> ModuleType:
    """The importer module of a format."""
    if fmt not in FORMATS:
        raise IngestError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return importlib.import_module(f".{fmt}", __name__)


def detect(path: str | Path, head: Head | None = None) -> str:
    """The format of a source, recognised by content.

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
        raise UnknownFormat(path, FORMATS)
    return claimed[0]


def claimants(head: Head) -> list[str]:
    """Every format whose sniffer accepts this head, in `FORMATS` order (detect takes the first)."""
    return [fmt for fmt in FORMATS if importer(fmt).sniff(head)]


def iter_sources(path: str | Path, report: ImportReport) -> Iterator[tuple[Path, str]]:
    """Every importable source under `path` with its format.

    A file is one source. A directory is walked recursively in sorted order;
    a directory that is itself a source (an OpenCode storage tree) is not
    descended into. Inside a directory, unrecognised candidate files are
    counted as ``unknown_format`` skips; an explicitly named file that is not
    recognised raises `UnknownFormat`.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_file():
        yield path, detect(path)
        return
    for root, dirs, files in os.walk(path):
        dirs.sort()
        root_p = Path(root)
        fmt = next(iter(claimants(read_head(root_p))), None)
        if fmt is not None:
            dirs[:] = []  # the whole tree is one source
            yield root_p, fmt
            continue
        for name in sorted(files):
            p = root_p / name
            if not name.endswith(CANDIDATE_SUFFIXES) or not p.is_file():
                continue
            try:
                yield p, detect(p)
            except UnknownFormat as exc:
                report.skip(p, None, "unknown_format", str(exc))
            except OSError as exc:
                report.skip(p, None, "unreadable", str(exc))


def load_sessions(
    paths: str | Path | Iterable[str | Path],
    report: ImportReport | None = None,
    formats: Iterable[str] | None = None,
) -> Iterator:
    """Stream the sessions of files, directories and databases.

    Parameters
    ----------
    paths : path or iterable of paths
    report : ImportReport, optional
        Receives counts and skips (a fresh one is used if omitted).
    formats : iterable of str, optional
        Only import sources of these formats (others are not read).

    Yields
    ------
    Session
        One at a time, so memory is bounded by the largest session.
    """
    report = report if report is not None else ImportReport()
    wanted = set(formats) if formats else None
    if isinstance(paths, (str, Path)):
        paths = [paths]
    seen: dict[tuple[str, str], list[bytes]] = {}
    for p in paths:
        for source, fmt in iter_sources(p, report):
            if wanted and fmt not in wanted:
                continue
            report.files += 1
            for session in importer(fmt).load(source, report):
                key = (session.source_format, session.id)
                digest = content_digest(session)
                earlier = seen.setdefault(key, [])
                if digest in earlier:
                    # The same data reached us twice (an OpenCode db and its storage
                    # tree, a directory and a file in it): keep it once.
                    report.skip(source, None, "duplicate_session", f"session {session.id} already imported")
                    continue
                earlier.append(digest)
                if len(earlier) > 1:
                    # Same id, different content (a resumed Claude Code session copied
                    # into a new file): keep both, the later one under a new id.
                    session = renamed(session, f"{session.id}~{len(earlier)}")
                yield report.produced(session)


def content_digest(session: Session) -> bytes:
    """Hash of a session's records (not its path), to recognise the same session imported twice."""
    h = hashlib.blake2b(digest_size=16)
    for r in session.records:
        h.update(f"{r.entry_id}\x00{r.block_index}\x00{r.kind}\x00{r.tool}\x00{r.call_id}\x00".encode(
            "utf-8", "surrogatepass"))
        h.update(r.text.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.digest()


def renamed(session: Session, new_id: str) -> Session:
    """The session under another id (records follow), noting the original id in metadata."""
    records = tuple(dataclasses.replace(r, session_id=new_id) for r in session.records)
    metadata = {**session.metadata, "renamed_from": session.id}
    return dataclasses.replace(session, id=new_id, records=records, metadata=metadata)


__all__ = [
    "FORMATS", "Head", "ImportReport", "IngestError", "UnknownFormat",
    "claimants", "content_digest", "detect", "importer", "iter_sources", "load_sessions", "read_head", "renamed",
]
