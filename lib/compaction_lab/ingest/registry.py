"""What an importer is (`Importer`), and every importer, registered by its own module (`IMPORTERS`).

An importer is a module of this package (or of a plug-in package, `Registry.add_package`) that provides
`Importer`'s names and registers itself, by its format name, at its end::

    IMPORTERS.add(FORMAT, sys.modules[__name__], rank=30, agent="codex")

``agent`` is the **agent key** of the agent that writes the format (the hyphenated name the strategies
registry uses: ``"claude-code"`` for the format ``claude_code``); a format no one agent writes
(``chat_jsonl``) declares none. `agent_of_format` reads it back, so a new importer touches only its own
module. ``rank`` is its place in the sniffing order: `ingest.detect` takes the first importer, by rank, whose
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
from compaction_lab.ingest.import_audit import ImportAudit


class Importer(Protocol):
    """The names an importer module provides.

    Attributes
    ----------
    FORMAT : str
        Its format name (``"codex"``, ``"claude_code"``), the name it registers under and the
        ``source_format`` of the sessions it builds. Not the agent key (``"claude-code"``), which it
        declares at registration (``agent=``, see `agent_of_format`).

    Notes
    -----
    An importer whose files may hold many sessions can also say where each starts, so that a large
    plain file is read in spans: see `SplittableImporter`.
    """

    FORMAT: str

    def sniff(self, head: Head) -> bool:
        """Tell whether a source is in this format, from its head (`files.read_head`); never raise."""
        ...

    def load(self, path: Path, audit: ImportAudit) -> Iterator[Session]:
        """Stream the sessions of a source, counting every line or row skipped in `audit`."""
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

    def load(self, path: Path, audit: ImportAudit, span: Span | None = None) -> Iterator[Session]:
        """Stream the sessions of a source, or of one span of it."""
        ...


#: Every importer, by format name and sniffing rank. Discovery imports every module of
#: `compaction_lab.ingest.importers` (one per log format; generated chains are not imported).
IMPORTERS: Registry[Importer] = Registry(
    "importer",
    packages=("compaction_lab.ingest.importers",),
)


#: Agent keys an importer may declare that name no strategy (the agent's compaction is not reimplemented).
AGENTS_WITHOUT_STRATEGY: frozenset[str] = frozenset({"swe-agent"})


def agent_of_format(fmt: str) -> str | None:
    """Return the agent key the importer of a log format declared (``claude_code`` -> ``"claude-code"``).

    Parameters
    ----------
    fmt : str
        A format name, as a session's ``source_format`` holds it.

    Returns
    -------
    str or None
        The hyphenated agent key (a strategy name, or one of `AGENTS_WITHOUT_STRATEGY`); None when no
        importer registered `fmt` or its importer declared no agent (``chat_jsonl``).
    """
    if fmt not in IMPORTERS:
        return None
    agent = IMPORTERS.entry(fmt).meta.get("agent")
    return agent if isinstance(agent, str) else None


def safely(predicate: Callable[[Any], object], obj: Any) -> bool:
    """Return `predicate(obj)`, or False when the object's odd shape makes it raise.

    Sniffers judge each head line with it, so one malformed line (a list
    where a string belongs) cannot stop a good file from being recognised.
    """
    try:
        return bool(predicate(obj))
    except Exception:
        return False


__all__ = ["AGENTS_WITHOUT_STRATEGY", "IMPORTERS", "Importer", "SplittableImporter", "agent_of_format", "safely"]
