"""What an importer is (`Importer`), and every importer, registered by its own module (`IMPORTERS`).

An importer is a module of this package (or of a plug-in package, `Registry.add_package`) that provides
`Importer`'s names and registers itself, by its format name, at its end::

    IMPORTERS.add(FORMAT, sys.modules[__name__], rank=30)

``rank`` is its place in the sniffing order: `ingest.detect` takes the first importer, by rank, whose
``sniff`` accepts a source, so the most specific signatures rank first (`opencode` 10, `swe_agent` 20,
`codex` 30, `claude_code` 40, `pi` 50, `chat_jsonl` 60: the most permissive, asked last). An importer
registered without a rank is asked after all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from compaction_lab.core.registry import Registry
from compaction_lab.core.session import Session
from compaction_lab.ingest.files import Head, Span
from compaction_lab.ingest.import_report import ImportReport


class Importer(Protocol):
    """The names an importer module provides.

    Attributes
    ----------
    FORMAT : str
        Its format name (``"codex"``, ``"claude_code"``), the name it registers under and the
        ``source_format`` of the sessions it builds.

    Notes
    -----
    An importer whose files may hold many sessions can also say where each starts, so that a large
    plain file is read in spans: see `SplittableImporter`.
    """

    FORMAT: str

    def sniff(self, head: Head) -> bool:
        """Tell whether a source is in this format, from its head (`files.read_head`); never raise."""
        ...

    def load(self, path: Path, report: ImportReport) -> Iterator[Session]:
        """Stream the sessions of a source, counting every line or row skipped in `report`."""
        ...


class SplittableImporter(Importer, Protocol):
    """An importer that says where its sessions start, so a large plain file is read in spans.

    `ingest.units.split_spans` looks for these names (today Codex has them).

    Attributes
    ----------
    SESSION_MARKER : bytes
        Bytes every line opening a session holds (lines without them are not parsed when splitting).
    """

    SESSION_MARKER: bytes

    def session_key(self, obj: Mapping[str, Any]) -> str | None:
        """Return the session a parsed line opens, or None."""
        ...

    def load(self, path: Path, report: ImportReport, span: Span | None = None) -> Iterator[Session]:
        """Stream the sessions of a source, or of one span of it."""
        ...


#: Every importer, by format name and sniffing rank. Discovery imports every module of
#: `compaction_lab.ingest.importers` (one per log format; generated chains are not imported).
IMPORTERS: Registry[Importer] = Registry(
    "importer",
    packages=("compaction_lab.ingest.importers",),
)


def safely(predicate: Callable[[Any], object], obj: Any) -> bool:
    """Return `predicate(obj)`, or False when the object's odd shape makes it raise.

    Sniffers judge each head line with it, so one malformed line (a list
    where a string belongs) cannot stop a good file from being recognised.
    """
    try:
        return bool(predicate(obj))
    except Exception:
        return False


__all__ = ["IMPORTERS", "Importer", "SplittableImporter", "safely"]
