"""What every importer shares: the import report, streaming readers, a session builder.

Importers turn a source (file, directory, database) into `Session` objects.
They never crash on bad input: a line or row that cannot be used is skipped
and *counted* in an `ImportReport` with its reason and line number, and
everything that parsed is kept. Only a source whose format cannot be
recognised at all is an error (`UnknownFormat`), naming the formats tried.

JSONL is streamed line by line (``.zst`` files through a streaming
decompressor), so memory is bounded by the largest session, not the file.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Mapping

from ..session import Record, Session

#: Bytes of a source read for content sniffing.
HEAD_BYTES = 64 * 1024
#: Parsed JSONL lines offered to sniffers.
HEAD_LINES = 20
#: Skips kept with full detail; beyond this only the per-reason counts grow,
#: so a multi-GB file full of broken lines cannot exhaust memory.
MAX_SKIP_DETAILS = 1000

SQLITE_MAGIC = b"SQLite format 3\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: Skip reasons (stable codes; tables and tests use them).
REASONS = {
    "malformed_json": "line is not valid JSON",
    "invalid_utf8": "line is not valid UTF-8",
    "truncated_last_line": "last line is cut off (no newline, not valid JSON)",
    "not_an_object": "JSON value is not an object",
    "unknown_type": "line or payload type this importer does not know",
    "missing_field": "a required field is missing or has the wrong type",
    "dangling_parent": "parent link points at no known entry (kept, ordered by position)",
    "cyclic_parent": "parent links form a cycle (kept, ordered by position)",
    "empty_file": "source holds no data",
    "duplicate_session": "the same session, identical, was already imported from another source",
    "unknown_format": "no importer recognised the source",
    "unreadable": "source could not be read",
}


class IngestError(ValueError):
    """Base class of the documented import errors."""


class UnknownFormat(IngestError):
    """No importer recognised a source; the message names every format tried."""

    def __init__(self, path: str | Path, tried: tuple[str, ...]):
        self.path, self.tried = str(path), tried
        super().__init__(f"{path}: not a recognised session format (tried: {', '.join(tried)})")


@dataclass(frozen=True)
class Skip:
    """One skipped line, row or file."""

    path: str
    line: int | None
    reason: str
    detail: str = ""


@dataclass
class ImportReport:
    """What an import read, produced and skipped (mutable accumulator).

    Attributes
    ----------
    files : int
        Sources read (files, databases, storage trees).
    sessions, records : int
        Produced.
    formats : Counter
        Sessions per source format.
    reasons : Counter
        Skips per reason code (every skip, even past `MAX_SKIP_DETAILS`).
    skipped : list of Skip
        The first `MAX_SKIP_DETAILS` skips with path, line and detail.
    """

    files: int = 0
    sessions: int = 0
    records: int = 0
    formats: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    skipped: list[Skip] = field(default_factory=list)

    def skip(self, path: str | Path, line: int | None, reason: str, detail: str = "") -> None:
        """Count one skip (reason must be one of `REASONS`)."""
        if reason not in REASONS:
            raise ValueError(f"unknown skip reason {reason!r}")
        self.reasons[reason] += 1
        if len(self.skipped) < MAX_SKIP_DETAILS:
            self.skipped.append(Skip(str(path), line, reason, detail[:300]))

    def produced(self, session: Session) -> Session:
        """Count a produced session (returns it, for use in generators)."""
        self.sessions += 1
        self.records += len(session.records)
        self.formats[session.source_format] += 1
        return session

    @property
    def n_skipped(self) -> int:
        return sum(self.reasons.values())

    def summary(self) -> str:
        """One line for terminals and notebooks."""
        fmts = ", ".join(f"{k}: {v}" for k, v in sorted(self.formats.items())) or "none"
        line = f"{self.files} sources, {self.sessions} sessions ({fmts}), {self.records} records"
        if self.n_skipped:
            why = ", ".join(f"{k} {v}" for k, v in self.reasons.most_common())
            line += f"; skipped {self.n_skipped} ({why})"
        return line

    def to_frame(self):
        """Skips as a DataFrame (path, line, reason, detail)."""
        import pandas as pd

        return pd.DataFrame([s.__dict__ for s in self.skipped], columns=["path", "line", "reason", "detail"])


# --------------------------------------------------------------------------- reading


def open_binary(path: str | Path) -> BinaryIO:
    """Open a file for streaming binary reads, decompressing zstd transparently.

    A ``.zst`` suffix or the zstd magic number selects the streaming
    decompressor, so a compressed multi-GB log is never inflated in memory.
    """
    path = Path(path)
    f = open(path, "rb")
    magic = f.read(4)
    f.seek(0)
    if path.suffix == ".zst" or magic == ZSTD_MAGIC:
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(f, closefd=True)
        return io.BufferedReader(reader, buffer_size=1 << 20)
    return f


@dataclass(frozen=True)
class Head:
    """The first bytes and parsed JSONL lines of a source, for sniffing by content."""

    path: Path
    raw: bytes
    lines: tuple[Any, ...]
    is_dir: bool = False
    is_sqlite: bool = False

    @property
    def objects(self) -> list[Mapping[str, Any]]:
        """The parsed head lines that are JSON objects."""
        return [o for o in self.lines if isinstance(o, dict)]


def read_head(path: str | Path) -> Head:
    """Read what sniffers look at: up to `HEAD_BYTES` and the JSON lines within them."""
    path = Path(path)
    if path.is_dir():
        return Head(path, b"", (), is_dir=True)
    try:
        with open_binary(path) as f:
            raw = f.read(HEAD_BYTES)
    except OSError:
        raise
    except Exception:  # a corrupt compressed stream: nothing to sniff, so no format claims it
        return Head(path, b"", ())
    if raw.startswith(SQLITE_MAGIC):
        return Head(path, raw, (), is_sqlite=True)
    lines: list[Any] = []
    for chunk in raw.split(b"\n")[:HEAD_LINES]:
        chunk = chunk.strip()
        if not chunk:
            continue
        try:
            lines.append(json.loads(chunk))
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
    return Head(path, raw, tuple(lines))


def iter_jsonl(path: str | Path, report: ImportReport) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    """Stream the JSON objects of a JSONL file with their 1-based line numbers and raw bytes.

    Bad lines are skipped and counted in `report` (invalid UTF-8, malformed
    JSON, a truncated last line, a value that is not an object); blank lines
    are ignored; an empty file is counted once as ``empty_file``.
    """
    any_data = False
    try:
        f = open_binary(path)
    except OSError as exc:
        report.skip(path, None, "unreadable", str(exc))
        return
    with f:
        lineno = 0
        try:
            for raw in f:
                lineno += 1
                stripped = raw.strip()
                if not stripped:
                    continue
                any_data = True
                try:
                    text = stripped.decode("utf-8")
                except UnicodeDecodeError as exc:
                    report.skip(path, lineno, "invalid_utf8", str(exc))
                    continue
                try:
                    obj = json.loads(text)
                except (ValueError, RecursionError) as exc:  # absurdly deep nesting is malformed too
                    reason = "truncated_last_line" if not raw.endswith(b"\n") else "malformed_json"
                    report.skip(path, lineno, reason, str(exc))
                    continue
                if not isinstance(obj, dict):
                    report.skip(path, lineno, "not_an_object", type(obj).__name__)
                    continue
                yield lineno, obj, raw
        except Exception as exc:  # a corrupt compressed stream ends the file, not the import
            if type(exc).__module__.startswith("zstandard") or isinstance(exc, (OSError, EOFError)):
                report.skip(path, lineno + 1, "unreadable", f"{type(exc).__name__}: {exc}")
            else:
                raise
    if not any_data:
        report.skip(path, None, "empty_file")


def load_json(path: str | Path, report: ImportReport) -> Any | None:
    """Parse a whole-file JSON document (``.traj``, export JSON); None (counted) when it fails."""
    try:
        with open_binary(path) as f:
            data = f.read()
    except OSError as exc:
        report.skip(path, None, "unreadable", str(exc))
        return None
    if not data.strip():
        report.skip(path, None, "empty_file")
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        report.skip(path, None, "invalid_utf8", str(exc))
        return None
    except (ValueError, RecursionError) as exc:
        report.skip(path, None, "malformed_json", str(exc)[:200] or type(exc).__name__)
        return None
    if doc is None:
        # `null` parses, but holds nothing: counted, so the caller's None is never silent.
        report.skip(path, None, "not_an_object", "document is null")
    return doc


def safely(predicate, obj: Any) -> bool:
    """`predicate(obj)`, or False when the object's odd shape makes it raise.

    Sniffers judge each head line with it, so one malformed line (a list
    where a string belongs) cannot stop a good file from being recognised.
    """
    try:
        return bool(predicate(obj))
    except Exception:
        return False


# --------------------------------------------------------------------------- building


def file_stem(path: str | Path) -> str:
    """File name without ``.zst`` and the log suffix (``rollout-x.jsonl.zst`` -> ``rollout-x``).

    The fallback session id of formats whose files do not record one.
    """
    name = Path(path).name
    for suffix in (".zst", ".jsonl", ".ndjson", ".json", ".traj"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


#: Keys of tool arguments that name what the tool acted on, in priority order.
_TARGET_KEYS = ("file_path", "filePath", "path", "notebook_path", "command", "cmd", "url", "pattern", "query", "description")


def tool_target(args: Any) -> str | None:
    """What a tool call acted on (file path, command, URL, pattern), from its arguments."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args[:500] or None
    if not isinstance(args, Mapping):
        return None
    for key in _TARGET_KEYS:
        val = args.get(key)
        if isinstance(val, list) and val and all(isinstance(v, str) for v in val):
            val = " ".join(val)
        if isinstance(val, str) and val.strip():
            if key == "pattern" and isinstance(args.get("path"), str):
                return f"{val} {args['path']}"[:500]
            return val[:500]
    return None


def tool_call_text(name: str, args: Any) -> str:
    """The text of a tool call as the model saw it: name and JSON arguments."""
    if isinstance(args, str):
        return f"{name} {args}"
    return f"{name} {json.dumps(args, ensure_ascii=False)}"


def content_text(content: Any) -> str:
    """Flatten message content (a string or a list of typed blocks) to plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                for key in ("text", "content", "output", "thinking"):
                    val = block.get(key)
                    if isinstance(val, str):
                        parts.append(val)
                        break
                    if isinstance(val, list):
                        parts.append(content_text(val))
                        break
        return "\n".join(p for p in parts if p)
    if isinstance(content, Mapping):
        return content_text([content])
    return str(content)


#: Openings of user-role text that the harness injected rather than the person typed.
INJECTED_PREFIXES = (
    "# AGENTS.md instructions", "<environment_context>", "<user_instructions>", "<user-instructions>",
    "<system-reminder>", "<command-name>", "<command-message>", "<local-command-stdout>",
    "Caveat: The messages below were generated by the user while running local commands",
    "<turn_aborted>", "<permissions instructions>",
)


def is_injected(text: str) -> bool:
    """True when user-role text starts with a known injected-context block."""
    return text.lstrip().startswith(INJECTED_PREFIXES)


class SessionBuilder:
    """Accumulates records in source order and builds a `Session`.

    Parameters
    ----------
    session_id, source_format : str
    source_path : str or Path, optional
    """

    def __init__(self, session_id: str, source_format: str, source_path: str | Path | None = None):
        self.session_id = session_id
        self.source_format = source_format
        self.source_path = str(source_path) if source_path is not None else None
        self.records: list[Record] = []
        self.metadata: dict[str, Any] = {}

    def add(self, kind: str, text: str, entry_id: str, block_index: int = 0, **fields: Any) -> Record:
        """Append a record; `source_order` is its position."""
        rec = Record(
            session_id=self.session_id, entry_id=str(entry_id), block_index=block_index,
            source_order=len(self.records), kind=kind, text=text if isinstance(text, str) else str(text),
            **fields,
        )
        self.records.append(rec)
        return rec

    def add_usage(self, entry_id: str, model: str | None = None, **counts: Any) -> None:
        """Record one model call's usage as the log reports it (normalised key names).

        Keys: input_tokens, cached_tokens, cache_write_tokens, output_tokens,
        reasoning_tokens, cost; missing ones are omitted, never invented.
        """
        row: dict[str, Any] = {"entry_id": str(entry_id)}
        if model:
            row["model"] = model
        for k, v in counts.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[k] = v
        self.metadata.setdefault("usage", []).append(row)

    def build(self) -> Session:
        return Session(
            id=self.session_id, source_format=self.source_format, source_path=self.source_path,
            metadata=self.metadata, records=tuple(self.records),
        )
