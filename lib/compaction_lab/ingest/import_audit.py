"""The import audit: what an import read, produced and skipped, and why; and the documented import errors.

Importers turn a source (file, directory, database) into `Session` objects.
They never crash on bad input: a line or row that cannot be used is skipped
and *counted* in an `ImportAudit` with its reason and line number, and
everything that parsed is kept. Only a source whose format cannot be
recognised at all is an error (`UnknownFormat`, raised by ``detect``; a walk
or an import counts it as an ``unknown_format`` skip instead).

The audit is the import's own account; the *report* is the rendered run page
(`compaction_lab.report`). Spec: docs/session-formats.md (skips and reasons).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from compaction_lab.core.session import Session

#: Skips kept with full detail; beyond this only the per-reason counts grow,
#: so a multi-GB file full of broken lines cannot exhaust memory.
MAX_SKIP_DETAILS = 1000

#: Skip reasons (stable codes; tables and tests use them).
REASONS = {
    "malformed_json": "line is not valid JSON (or nests deeper than bounded_json.MAX_DEPTH levels)",
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
    "corrupt_compressed": "compressed data is damaged or cut off: what decoded before the damage is kept, "
    "the line it cuts (its true line number) and everything after it are lost",
    "nul_tail": "file ends in a run of NUL bytes (as a crash leaves it): the NULs are ignored, "
    "every record before them is kept",
    "symlink_loop": "a symbolic link leads to itself or back into a folder being walked: not followed",
    "duplicate_path": "a folder reached a second time through a symbolic link: read once",
    "dangling_symlink": "a symbolic link points at nothing",
}

#: Notes: things an import changed or noticed without dropping anything (never skips).
NOTES = {
    "lone_surrogates_replaced": "lines or documents whose JSON held lone UTF-16 surrogates (\\ud800-\\udfff); "
    "each was replaced by U+FFFD, nothing was dropped",
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
class ImportAudit:
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
    notes : Counter
        Lines or documents per note code (`NOTES`): changed or noticed, nothing
        dropped, so never counted as skips.
    """

    files: int = 0
    sessions: int = 0
    records: int = 0
    formats: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    skipped: list[Skip] = field(default_factory=list)
    notes: Counter = field(default_factory=Counter)

    def skip(self, path: str | Path, line: int | None, reason: str, detail: str = "") -> None:
        """Count one skip (reason must be one of `REASONS`)."""
        if reason not in REASONS:
            raise ValueError(f"unknown skip reason {reason!r}")
        self.reasons[reason] += 1
        if len(self.skipped) < MAX_SKIP_DETAILS:
            self.skipped.append(Skip(str(path), line, reason, detail[:300]))

    def note(self, code: str, n: int = 1) -> None:
        """Count a note (code must be one of `NOTES`)."""
        if code not in NOTES:
            raise ValueError(f"unknown note {code!r}")
        self.notes[code] += n

    def merge(self, other: ImportAudit) -> None:
        """Add another audit's counts and skips after this one's, as if it had been read next.

        Skip details stay capped at `MAX_SKIP_DETAILS` exactly as one audit
        filling up would cap them, so audits of parts read apart (a file's
        spans, the sessions of a worker's task) merged in reading order equal
        the audit of one reading.
        """
        self.files += other.files
        self.sessions += other.sessions
        self.records += other.records
        self.formats.update(other.formats)
        self.reasons.update(other.reasons)
        self.notes.update(other.notes)
        room = MAX_SKIP_DETAILS - len(self.skipped)
        if room > 0:
            self.skipped.extend(other.skipped[:room])

    def produced(self, session: Session) -> Session:
        """Count a produced session (returns it, for use in generators)."""
        self.count_session(session.source_format, len(session.records))
        return session

    def count_session(self, source_format: str, records: int) -> None:
        """Count a produced session by its format and number of records."""
        self.sessions += 1
        self.records += records
        self.formats[source_format] += 1

    @property
    def n_skipped(self) -> int:
        """Return the number of skips, every reason counted."""
        return sum(self.reasons.values())

    def summary(self) -> str:
        """One line for terminals and notebooks."""
        fmts = ", ".join(f"{k}: {v}" for k, v in sorted(self.formats.items())) or "none"
        line = f"{self.files} sources, {self.sessions} sessions ({fmts}), {self.records} records"
        if self.n_skipped:
            why = ", ".join(f"{k} {v}" for k, v in self.reasons.most_common())
            line += f"; skipped {self.n_skipped} ({why})"
        if self.notes:
            line += "; noted " + ", ".join(f"{k} {v}" for k, v in self.notes.most_common())
        return line

    def to_frame(self):
        """Skips as a DataFrame (path, line, reason, detail)."""
        import pandas as pd

        return pd.DataFrame([s.__dict__ for s in self.skipped], columns=["path", "line", "reason", "detail"])


def os_reason(exc: OSError) -> str:
    """Return the operating system's reason for a failed file operation, with the path (for skip details)."""
    if exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename is not None else exc.strerror
    return str(exc) or type(exc).__name__
