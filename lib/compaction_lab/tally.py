"""What a tally's workers do: read a unit of logs, count tokens of texts (the tasks of `composition.tally`).

Kept apart from `compaction_lab.composition` (which combines the results into
tables with pandas) so that a Dask worker running these tasks imports only the
importers and the token counter: less start-up time and a smaller resident
footprint per worker.

A unit is read once (`read_for_tally`) into its sessions' tallies -- kinds,
sizes, digests, report segments -- and their context texts cut into parts of
about `PART_CHARS`; each part is taken out where it was read (`take_part`)
and counted by any worker (`count_part`), so one large session is counted by
every worker while only its texts travel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compaction_lab.core.session import CONTEXT_KINDS
from compaction_lab.core.tokens import counter
from compaction_lab.ingest.import_report import ImportReport
from compaction_lab.ingest.units import Unit

#: Texts of one unit are counted in parts of about this many characters, so one large
#: session is counted by several workers at once.
PART_CHARS = 4 * 1024 * 1024


@dataclass(frozen=True)
class SessionTally:
    """What a tally keeps of one imported session (its texts travel separately, to be counted)."""

    source_format: str
    session_id: str
    digest: bytes
    n_records: int
    kinds: tuple[str, ...]
    chars: tuple[int, ...]


@dataclass(frozen=True)
class UnitRead:
    """One unit read for a tally.

    Attributes
    ----------
    segments : tuple of ImportReport
        The report segment before each session, then the trailing one.
    sessions : tuple of SessionTally
    parts : tuple of tuple of str
        The sessions' context texts, in order, cut into contiguous parts.
    """

    segments: tuple[ImportReport, ...]
    sessions: tuple[SessionTally, ...]
    parts: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class PartCount:
    """The token counts of one part, with the worker cache's hits and misses for it (texts and characters)."""

    counts: tuple[int, ...]
    hits: int
    misses: int
    hit_chars: int
    miss_chars: int


def read_for_tally(unit: Unit, parts: int = 1) -> UnitRead:
    """Task: import one unit and keep what the tally needs, its texts cut into `parts` parts."""
    from compaction_lab.ingest import content_digest, importer
    from compaction_lab.ingest.units import read_unit

    segments: list[ImportReport] = []
    sessions: list[SessionTally] = []
    texts: list[str] = []
    for segment, s in read_unit(unit, importer(unit.fmt)):
        segments.append(segment)
        if s is None:
            continue
        recs = [r for r in s.records if r.kind in CONTEXT_KINDS]
        sessions.append(
            SessionTally(
                s.source_format,
                s.id,
                content_digest(s),
                len(s.records),
                tuple(r.kind for r in recs),
                tuple(r.chars for r in recs),
            )
        )
        texts += [r.text for r in recs]
    return UnitRead(tuple(segments), tuple(sessions), split_parts(texts, parts))


def split_parts(texts: Sequence[str], parts: int) -> tuple[tuple[str, ...], ...]:
    """`texts` cut into `parts` contiguous parts of about equal characters (some may be empty)."""
    parts = max(1, parts)
    total = sum(len(t) for t in texts)
    out: list[list[str]] = [[] for _ in range(parts)]
    seen = 0
    for t in texts:
        # The part a text starts in: texts stay whole and in order.
        out[min(parts - 1, seen * parts // total) if total else 0].append(t)
        seen += len(t)
    return tuple(tuple(p) for p in out)


def without_texts(read: UnitRead) -> UnitRead:
    """Task: the part of a read unit the client needs (its texts stay on the workers)."""
    return UnitRead(read.segments, read.sessions)


def take_part(read: UnitRead, part: int) -> tuple[str, ...]:
    """Task: one part of a read unit's texts (runs where the unit was read; only the part travels on)."""
    return read.parts[part]


def count_part(texts: Sequence[str], encoding: str, tokenizer: str) -> PartCount:
    """Task: token counts of texts with this worker's shared counter (and its cache)."""
    tok = counter(encoding, tokenizer)
    before = (tok.hits, tok.misses, tok.hit_chars, tok.miss_chars)
    counts = tok.count_many(texts)
    return PartCount(
        tuple(counts),
        tok.hits - before[0],
        tok.misses - before[1],
        tok.hit_chars - before[2],
        tok.miss_chars - before[3],
    )
