"""What a tally's workers do: read a unit of logs and count its texts where it was read (the tasks of `composition.tally`).

Kept apart from `compaction_lab.tally.composition` (which combines the results into
tables with pandas) so that a Dask worker running these tasks imports only the
importers and the token counter: less start-up time and a smaller resident
footprint per worker.

A unit (a file, or a span of whole sessions of a large one) is read and its
context texts counted by one task (`read_for_tally`), session by session, so
only the tallies travel: kinds, sizes, token totals, a digest. One large
session is read by several tasks at once: its unit is cut into pieces at line
starts (`plan_pieces`), every piece after the first holding no line that can
open a session, so each piece is imported as it stands and its records simply
continue the session the pieces before it left open; `stitch` puts the pieces'
tallies back together into what one reading of the unit gives. Only a session
met twice needs the digest of a session read in pieces; `session_digest`
computes it then, from one reading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from compaction_lab.core.session import CONTEXT_KINDS, Session
from compaction_lab.core.tokens import TokenCounter, counter
from compaction_lab.ingest.files import Span, is_compressed, open_binary
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.units import Unit

#: Texts of in-memory sessions are counted in batches of about this many characters
#: (`composition.composition_table` on the engine).
PART_CHARS = 4 * 1024 * 1024

#: Bytes `plan_pieces` reads at a time while it looks for places to cut.
_SCAN_BYTES = 1 << 20

#: Bytes before a cut that `_cut_after` looks at (what they end in, trailing whitespace aside).
_LAST_CHARS_BEFORE_CUT = 256


@dataclass(frozen=True)
class SessionTally:
    """What a tally keeps of one imported session: its identity and its context records' totals by kind.

    Attributes
    ----------
    source_format, session_id : str
    digest : bytes or None
        `compaction_lab.ingest.content_digest` of the session; None for a
        session read in pieces (`stitch`), whose digest `session_digest`
        computes when it is needed.
    n_records : int
        Records of every kind (``meta`` included).
    totals : tuple of (int, int, int)
        Records, characters and tokens of each kind of `CONTEXT_KINDS`, in that order.
    """

    source_format: str
    session_id: str
    digest: bytes | None
    n_records: int
    totals: tuple[tuple[int, int, int], ...]

    def continued(self, more: SessionTally) -> SessionTally:
        """Return this session with the records a later piece read of it (`more`) added (and no digest)."""
        return SessionTally(
            self.source_format,
            self.session_id,
            None,
            self.n_records + more.n_records,
            tuple((a + x, b + y, c + z) for (a, b, c), (x, y, z) in zip(self.totals, more.totals, strict=True)),
        )


@dataclass(frozen=True)
class PartCount:
    """The token counts of one part, with the worker cache's hits and misses for it (texts and characters)."""

    counts: tuple[int, ...]
    hits: int
    misses: int
    hit_chars: int
    miss_chars: int


@dataclass(frozen=True)
class UnitRead:
    """One unit (or piece of one) read and counted for a tally.

    Attributes
    ----------
    segments : tuple of ImportAudit
        The audit segment before each session, then the trailing one.
    sessions : tuple of SessionTally
    counted : PartCount
        The counter's hits and misses while counting them (no counts: they are in `sessions`).
    """

    segments: tuple[ImportAudit, ...]
    sessions: tuple[SessionTally, ...]
    counted: PartCount


def read_for_tally(unit: Unit, encoding: str, tokenizer: str, whole: bool = True) -> UnitRead:
    """Task: import one unit (or piece of one) and count its sessions' context texts with this process's counter.

    Each session is counted as soon as it is read (the last one of a piece
    once the piece is read) and then let go, so memory holds about one session
    at a time, never the unit's texts. A piece of a unit read in several
    (`whole` false) leaves its last session without a digest: later pieces
    may continue it (`stitch`).
    """
    from compaction_lab.ingest import content_digest, importer
    from compaction_lab.ingest.units import read_unit

    tok = counter(encoding, tokenizer)
    before = (tok.hits, tok.misses, tok.hit_chars, tok.miss_chars)
    segments: list[ImportAudit] = []
    sessions: list[SessionTally] = []
    held: Session | None = None  # a piece's session, until it is known whether it is the last
    for segment, s in read_unit(unit, importer(unit.fmt)):
        segments.append(segment)
        if held is not None:
            sessions.append(_tallied(held, tok, content_digest(held) if s is not None else None))
            held = None
        if s is not None and whole:
            sessions.append(_tallied(s, tok, content_digest(s)))
        elif s is not None:
            held = s
    counted = PartCount(
        (),
        tok.hits - before[0],
        tok.misses - before[1],
        tok.hit_chars - before[2],
        tok.miss_chars - before[3],
    )
    return UnitRead(tuple(segments), tuple(sessions), counted)


def _tallied(s: Session, tok: TokenCounter, digest: bytes | None) -> SessionTally:
    """Tally a session, its context texts counted with `tok`."""
    recs = [r for r in s.records if r.kind in CONTEXT_KINDS]
    counts = tok.count_many([r.text for r in recs])
    return SessionTally(
        s.source_format,
        s.id,
        digest,
        len(s.records),
        kind_totals([r.kind for r in recs], [r.chars for r in recs], counts),
    )


def kind_totals(kinds: Sequence[str], chars: Sequence[int], counts: Sequence[int]) -> tuple[tuple[int, int, int], ...]:
    """Add up records, characters and tokens by kind: one triple per kind of `CONTEXT_KINDS`, in that order."""
    agg = {k: [0, 0, 0] for k in CONTEXT_KINDS}
    for kind, n_chars, n in zip(kinds, chars, counts, strict=True):
        a = agg[kind]
        a[0] += 1
        a[1] += n_chars
        a[2] += n
    return tuple((a[0], a[1], a[2]) for a in agg.values())


def prepare(encoding: str, tokenizer: str) -> None:
    """Task: load what reading and counting need in this process (the importers, numpy, the tokenizer) before its first unit.

    On a pool it runs in the client before the workers are forked: loaded once, shared by all of them.
    """
    import numpy  # noqa: F401  # reading imports it at a text of many brackets (`core.bounded_json.text_depth`)

    from compaction_lab.ingest import formats

    formats()  # the importers' registry imports every importer
    counter(encoding, tokenizer)


def session_digest(unit: Unit, index: int) -> bytes:
    """Task: `compaction_lab.ingest.content_digest` of the `index`-th session of a unit, read whole."""
    from compaction_lab.ingest import content_digest, importer
    from compaction_lab.ingest.units import read_unit

    found = [s for _, s in read_unit(unit, importer(unit.fmt)) if s is not None]
    return content_digest(found[index])


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


# --------------------------------------------------------------------------- one unit read in pieces


def plan_pieces(unit: Unit, piece_bytes: int) -> tuple[Unit, ...]:
    """Cut a unit into pieces of about `piece_bytes` that can be read at the same time, or return it whole.

    Only a plain file of an importer that marks the lines opening its sessions
    (``SESSION_MARKER``, `compaction_lab.ingest.registry.SplittableImporter`)
    at least twice `piece_bytes` long is cut, and only after the last line
    holding that marker: every piece but the first then continues the last
    session of the one before it (see `stitch`). Cuts are made at line
    starts where a whole reading judges the line before on its own too
    (`_cut_after`), and each piece starts with its line number, so entry
    ids and skips read the same.
    """
    from compaction_lab.ingest import importer

    marker: bytes | None = getattr(importer(unit.fmt), "SESSION_MARKER", None)
    if not marker or piece_bytes <= 0 or unit.size < 2 * piece_bytes:
        return (unit,)
    span = unit.span
    try:
        if span is None:
            with open_binary(unit.path) as f:
                if is_compressed(f):  # cannot be entered in the middle
                    return (unit,)
            span = Span(0, unit.path.stat().st_size, 1)
        cuts = _cuts(unit, span, marker, piece_bytes)
    except OSError:
        return (unit,)  # read whole: the reading itself reports what is wrong with the file
    if not cuts:
        return (unit,)
    starts = [(span.start, span.first_line), *cuts]
    ends = [at for at, _ in cuts] + [span.end]
    return tuple(
        Unit(unit.path, unit.fmt, Span(at, end, line), end - at, unit.first and i == 0)
        for i, ((at, line), end) in enumerate(zip(starts, ends, strict=True))
    )


#: Where a piece may start: a line that opens a JSON object, and (`_cut_after`) after text that,
#: trailing whitespace aside, does not end in NUL bytes. A whole reading judges the lines before such
#: a place on their own too; a line ending in NULs it holds back, with the blank lines after it, as
#: the possible start of a NUL tail, to be judged by what follows.
_OPENS_OBJECT = re.compile(rb"\n(?=\{)")


def _cuts(unit: Unit, span: Span, marker: bytes, piece_bytes: int) -> list[tuple[int, int]]:
    """Offsets and line numbers where pieces of `span` start (its start excluded), after its last marker."""
    cuts: list[tuple[int, int]] = []
    last_marker = -1
    base, newlines = span.start, 0  # file offset of buf[0]; newlines in the span before it (see `counted`)
    target = span.start + piece_bytes
    buf = bytearray()
    with open(unit.path, "rb") as f:
        f.seek(span.start)
        while base + len(buf) < span.end:
            block = f.read(min(_SCAN_BYTES, span.end - base - len(buf)))
            if not block:
                break
            buf += block
            # Only whole lines are looked at (a marker never spans lines); the rest waits for more.
            if base + len(buf) >= span.end:
                whole = len(buf)
            elif (nl := block.rfind(b"\n")) != -1:
                whole = len(buf) - len(block) + nl + 1
            else:
                continue
            found = buf.find(marker, 0, whole)  # forward: faster than rfind, and markers are few
            while found != -1:
                last_marker = base + found
                found = buf.find(marker, found + 1, whole)
            counted = 0  # newlines in buf[:counted] are in `newlines`
            while target < span.end - piece_bytes // 2 and target <= base + whole:
                cut = _cut_after(buf, max(0, target - base - 1), whole)
                if cut is None:
                    break
                newlines, counted = newlines + buf.count(b"\n", counted, cut), cut
                cuts.append((base + cut, span.first_line + newlines))
                target = base + cut + piece_bytes
            newlines += buf.count(b"\n", counted, whole)
            del buf[:whole]
            base += whole
    # A piece after the first must hold no line that may open a session.
    return [(at, line) for at, line in cuts if at > last_marker]


def _cut_after(buf: bytearray, pos: int, end: int) -> int | None:
    """First line start in ``buf[pos:end]`` where a piece may start (see `_OPENS_OBJECT`), or None."""
    for match in _OPENS_OBJECT.finditer(buf, pos, end):
        nl = match.start()
        before = bytes(buf[max(0, nl - _LAST_CHARS_BEFORE_CUT) : nl]).rstrip()
        if before and not before.endswith(b"\x00"):
            return nl + 1
    return None


def stitch(reads: Sequence[UnitRead]) -> UnitRead:
    """Join the reads of a unit's pieces (`plan_pieces`) into what one reading of the unit gives.

    Each piece after the first holds no line that opens a session: its
    records (if any) continue the last session read before it, and everything
    its reading reported came before that session ended, so it joins that
    session's audit segment (the segment after the last session is then
    empty, as a reading of the whole unit leaves it). The session the later
    pieces continued has no digest (`SessionTally.digest`).

    Raises
    ------
    ValueError
        When a piece after the first holds more than one session (it was not cut after the last marker).
    """
    if len(reads) == 1:
        return reads[0]
    segments = list(reads[0].segments)
    sessions = list(reads[0].sessions)
    counted = PartCount(
        (),
        sum(r.counted.hits for r in reads),
        sum(r.counted.misses for r in reads),
        sum(r.counted.hit_chars for r in reads),
        sum(r.counted.miss_chars for r in reads),
    )
    for i, read in enumerate(reads[1:], 1):
        if len(read.sessions) > 1:
            raise ValueError(f"piece {i} of a unit holds {len(read.sessions)} sessions; a later piece continues one")
        if read.sessions:
            if sessions:
                sessions[-1] = sessions[-1].continued(read.sessions[0])
            else:  # the unit's first session starts here: what was reported so far comes before it
                sessions.append(read.sessions[0])
        # What was reported from the last session's start on, in reading order, goes before it.
        keep = max(0, len(sessions) - 1)
        joined = ImportAudit()
        for seg in (*segments[keep:], *read.segments):
            joined.merge(seg)
        segments = [*segments[:keep], joined, *([ImportAudit()] if sessions else [])]
    return UnitRead(tuple(segments), tuple(sessions), counted)
