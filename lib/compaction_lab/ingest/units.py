r"""Units of import: a source, or a span of a large file holding whole sessions — read anywhere, combined in order.

An import is cut into `Unit`\ s that can be read independently (by
`compaction_lab.engine.scheduler` on other processes or machines) and combined on the
client into exactly what one sequential reading gives:

* `compaction_lab.ingest.plan` walks the paths (`iter_sources`) and yields `WalkStep`\ s: the walk's
  own skips before each source, then the source as one unit — or, for a large
  plain file of a format that marks where its sessions start (Codex rollouts:
  ``SESSION_MARKER`` / ``session_key``), as several units, each a `Span` of
  whole sessions (`split_spans`). Compressed files are never split: they
  cannot be entered in the middle.
* `read_unit` imports one unit, cutting its import audit into segments: the
  skips and notes before each session, so a client can interleave them with
  what it decides about each session (duplicates) in reading order.
* `Admission` is the one rule for a session met twice (the same data from two
  sources is kept once; the same id with other content is kept under
  ``id~N``); `compaction_lab.ingest.load_sessions` and the engine's tally and
  import both use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

from compaction_lab.core.session import Session
from compaction_lab.ingest.files import STREAM_BUFFER, Span, is_compressed, open_binary
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.json_repair import parse_json
from compaction_lab.ingest.registry import Importer, SplittableImporter

#: Spans are cut once they reach this many bytes (and a file is split only if it is at
#: least twice as large): big enough that a task's fixed cost is noise, small enough that
#: two workers share a 1 GB file evenly and a worker holds a few tens of MB of one span at a time.
SPAN_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Unit:
    """One independently readable piece of an import.

    Attributes
    ----------
    path : Path
    fmt : str
        The importer's format name.
    span : Span, optional
        The byte range to read (None: the whole source).
    size : int
        Bytes this unit reads (for progress and for choosing the engine).
    first : bool
        Whether this is the first unit of its source (sources are counted once).
    """

    path: Path
    fmt: str
    span: Span | None = None
    size: int = 0
    first: bool = True


@dataclass
class WalkStep:
    """The walk's skips met before a unit, and the unit (None after the last one)."""

    before: ImportAudit
    unit: Unit | None


class Segmented(ImportAudit):
    """An import audit whose skips and notes go to the current segment (see `cut`)."""

    def __init__(self) -> None:
        super().__init__()
        self.current = ImportAudit()

    def skip(self, path: str | Path, line: int | None, reason: str, detail: str = "") -> None:
        """Record a skip in the current segment."""
        self.current.skip(path, line, reason, detail)

    def note(self, code: str, n: int = 1) -> None:
        """Record a note in the current segment."""
        self.current.note(code, n)

    def produced(self, session: Session) -> Session:
        """Pass the session through uncounted."""
        return session  # counted by whoever admits it

    def cut(self) -> ImportAudit:
        """Return the segment so far and start a new one."""
        seg, self.current = self.current, ImportAudit()
        return seg


def source_size(path: Path) -> int:
    """Bytes under a source (a folder's files added up)."""
    try:
        if path.is_dir():
            return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        return path.stat().st_size
    except OSError:
        return 0


def read_unit(unit: Unit, mod: Importer) -> Iterator[tuple[ImportAudit, Session | None]]:
    """Import one unit with its importer `mod`: each session with the audit segment read before it, then the rest.

    The last pair has no session. The segments merged in order equal the
    unit's whole import audit; the sessions are not yet admitted (see
    `Admission`).
    """
    audit = Segmented()
    sessions = (
        cast(SplittableImporter, mod).load(unit.path, audit, span=unit.span)
        if unit.span is not None
        else mod.load(unit.path, audit)
    )
    for session in sessions:
        yield audit.cut(), session
    yield audit.cut(), None


def split_spans(path: Path, mod: Importer, target: int | None = SPAN_BYTES) -> list[Span] | None:
    """Spans of whole sessions of about `target` bytes, or None when the file is read whole.

    A file is split only when its importer says where sessions start
    (``SESSION_MARKER``, the bytes such a line always holds, and
    ``session_key(obj)``, the session a line opens or None), it is plain (not
    compressed), and it is at least twice `target`. The file is read line by
    line and only the lines holding the marker are parsed; a span starts
    where ``session_key`` changes from one session to another, which is where
    the importer (`mod`) itself would start a new session.

    Memory stays about one line: the file is read, not memory-mapped (a map
    scanned end to end keeps every page it touched resident, and counted, in
    this process: a 1 GB file cost 1 GB of RSS).
    """
    marker: bytes | None = getattr(mod, "SESSION_MARKER", None)
    key_of = getattr(mod, "session_key", None)
    if not target or marker is None or key_of is None or not path.is_file():
        return None
    try:
        size = path.stat().st_size
        if size < 2 * target:
            return None
        with open_binary(path) as f:
            if is_compressed(f):
                return None
        with open(path, "rb", buffering=STREAM_BUFFER) as f:  # as stored: offsets count a BOM
            return _spans(f, marker, key_of, target, size)
    except OSError:
        return None  # read whole: the import itself reports what is wrong with the file


def _spans(f: BinaryIO, marker: bytes, key_of, target: int, size: int) -> list[Span] | None:
    spans: list[Span] = []
    begin, line = 0, 1  # a span at 0 is read from after a BOM, as the whole file is
    for at, lines_before in _session_starts(f, marker, key_of):
        if at - begin >= target:
            spans.append(Span(begin, at, line))
            begin, line = at, lines_before + 1
    spans.append(Span(begin, size, line))
    return spans if len(spans) > 1 else None


def _session_starts(f: BinaryIO, marker: bytes, key_of) -> Iterator[tuple[int, int]]:
    """Offsets of the lines where a new session starts (never the first one), with the lines before each."""
    current: str | None = None
    at = 0
    for lines_before, raw in enumerate(f):
        if marker in raw:
            try:
                obj, _ = parse_json(raw[:-1] if raw.endswith(b"\n") else raw)
                key = key_of(obj) if isinstance(obj, dict) else None
            except (ValueError, RecursionError):  # the import counts a bad line; it starts nothing
                key = None
            if key is not None:
                if current is not None and key != current:
                    yield at, lines_before
                current = key
        at += len(raw)


@dataclass
class Admission:
    """Decides, in reading order, what becomes of each session imported (one rule for every reader).

    The same data reached twice (an OpenCode database and its storage tree, a
    folder and a file in it) is kept once; the same id with other content (a
    resumed Claude Code session copied into a new file) is kept under a new id
    ``<id>~N``.
    """

    seen: dict[tuple[str, str], list[bytes]] = field(default_factory=dict)

    def admit(self, source_format: str, session_id: str, digest: bytes) -> str | None:
        """Return the id to keep the session under, or None for a duplicate."""
        earlier = self.seen.setdefault((source_format, session_id), [])
        if digest in earlier:
            return None
        earlier.append(digest)
        return session_id if len(earlier) == 1 else f"{session_id}~{len(earlier)}"
