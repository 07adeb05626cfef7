"""The per-record cap: a record longer than `RECORD_CAP_CHARS` is excerpted for the stages after the tally.

One tool output can be tens of megabytes on a single line (a base64 blob, a
minified bundle, a log). Every stage after the tally reads a record's text
many times over — the follow-up attribution and the exam's probes run
regexes and per-value context searches over it, the strategies and the cost
model hold its token ids and simulate the prefix cache token by token, the
open book indexes it — so their time and memory grow with the largest
record, some of them faster than linearly (a 50 MB record took notebook 04
past nine minutes and 4 GB). Those stages therefore see such a record as an
**excerpt**: its first and last characters around one marker line that
states how many characters were left out; for a 50,000,000-character blob::

    <its first 99,915 characters>
    [… 49,800,170 of 50,000,000 characters left out here: this record is excerpted to its first 99,915 and last 99,915 (per-record cap 200,000; compaction_lab.core.excerpt) …]
    <its last 99,915 characters>

The excerpt is deterministic (the same record gives the same bytes) and
never longer than the cap, marker included (so excerpting twice changes
nothing), and the stage that made it says so, with a count, in one note on
stderr (`for_stage`, `Excerpts.note`): a notebook shows it under the cell
that read the sessions. The stages that apply it: every notebook after the
first through `sources.load_saved` (projections, both exams, the cost
model, the open book's archive), the exam built straight from imported
sessions (`exam.cases.build`, ``compaction-lab exam``) and the follow-up
attribution (`composition.followups_table`).

What is **not** capped: the tally (notebook 01's composition table,
``compaction-lab tally``) counts every record's true characters and tokens
(`tokens.TokenCounter` counts a long text in pieces, so that too is bounded),
and the session files of the run folder (``sessions/*.jsonl``) keep the full
text — nothing is lost, and a later run can read it whole.

The cap, 200,000 characters, was chosen by measurement. Mining probes from
one base64 record takes 0.2-0.4 s at 200,000 characters, 1 s at 500,000, 4 s
at 1,000,000, 14 s at 2,000,000 and a minute at 5,000,000 (it grows with the
square of the length, and a session may hold several such records); the
cost notebook's simulations take about 10 s and 120 MB more per million
tokens. 200,000 characters is 50k (prose) to 140k (base64) tokens, already
most of a 200k-token window, while any file read or command output of
ordinary size stays whole: sessions with no record over the cap (the
synthetic chains, the shared fixtures) give byte-identical results. With it,
the my_sessions chain on a 50 MB single-line record runs in about 20 s and
1.3 GB over the runner and its two kernels (``make bench BENCH=large_record``):
`sources.load_saved` reads a session a line at a time and excerpts each record
as it is read (`Capper`), so a stage holds the long record whole only for a
moment, once.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace

from compaction_lab.core.session import Record, Session

#: Largest record text, in characters, the stages after the tally read whole.
RECORD_CAP_CHARS = 200_000
#: Smallest cap accepted: below it an excerpt would be mostly marker.
MIN_CAP_CHARS = 1_000

_MARKER = (
    "\n[… {omitted:,} of {total:,} characters left out here: this record is excerpted to its first {head:,} "
    "and last {tail:,} (per-record cap {cap:,}; compaction_lab.core.excerpt) …]\n"
)
#: The marker line as it appears in an excerpt (for stages that must not read it as content).
MARKER_PATTERN = re.compile(
    r"\n\[… [\d,]+ of [\d,]+ characters left out here: this record is excerpted to its first [\d,]+ "
    r"and last [\d,]+ \(per-record cap [\d,]+; compaction_lab\.core\.excerpt\) …\]\n"
)
# How far back from a cut point an excerpt looks for whitespace, so that a word or an
# ID is not cut in half (a half ID read as a value would be a question with no answer).
_SNAP_CHARS = 200


def check_cap(cap: int) -> int:
    """`cap` as an int, or a ValueError saying why it cannot be a per-record cap."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < MIN_CAP_CHARS:
        raise ValueError(f"per-record cap must be an integer of at least {MIN_CAP_CHARS:,} characters, got {cap!r}")
    return cap


def excerpt_text(text: str, cap: int = RECORD_CAP_CHARS) -> str:
    """`text` itself when it has at most `cap` characters; else its head and tail around a marker line.

    Parameters
    ----------
    text : str
    cap : int
        The excerpt, marker included, has at most this many characters, so
        excerpting an excerpt changes nothing. About half the kept characters
        come from the start, half from the end, each cut moved to the nearest
        whitespace within 200 characters so that a word or an ID is not cut
        in half (`cut_points`).

    Returns
    -------
    str
        Deterministic: the same text and cap always give the same excerpt.
    """
    check_cap(cap)
    total = len(text)
    if total <= cap:
        return text
    return _around(text, cap, *cut_points(text, cap))


def _around(text: str, cap: int, head_end: int, tail_start: int) -> str:
    """Join the head and tail of `text`, cut at its `cut_points`, around the marker line."""
    marker = _MARKER.format(
        omitted=tail_start - head_end, total=len(text), head=head_end, tail=len(text) - tail_start, cap=cap
    )
    return text[:head_end] + marker + text[tail_start:]


def cut_points(text: str, cap: int) -> tuple[int, int]:
    """(end of the head, start of the tail) of the excerpt of a text longer than `cap`.

    The characters kept are `cap` less room for the marker line. The head
    ends after the last whitespace among the 200 characters before half of
    them, the tail starts after the first whitespace among the 200 from
    where the other half begins; where there is none (a base64 blob) the
    cut is exactly there.
    """
    total = len(text)
    # The longest the marker can be for this text (every number at its largest).
    room = len(_MARKER.format(omitted=total, total=total, head=cap, tail=cap, cap=cap))
    keep = cap - room
    head_end = (keep + 1) // 2
    for i in range(head_end - 1, max(head_end - _SNAP_CHARS, 0) - 1, -1):
        if text[i].isspace():
            head_end = i + 1
            break
    tail_start = total - keep // 2
    for i in range(tail_start, min(tail_start + _SNAP_CHARS, total)):
        if text[i].isspace():
            tail_start = i + 1
            break
    return head_end, tail_start


def excerpt_record(record: Record, cap: int = RECORD_CAP_CHARS) -> Record:
    """`record` itself when its text fits the cap, else a copy whose text is `excerpt_text`."""
    if len(record.text) <= cap:
        return record
    return replace(record, text=excerpt_text(record.text, cap))


@dataclass(frozen=True)
class Excerpts:
    """Sessions as a stage reads them, and what the cap left out.

    Attributes
    ----------
    sessions : tuple of Session
        The sessions, each record over the cap replaced by its excerpt. A
        session with no such record is the very same object.
    records : int
        Records excerpted.
    chars_left_out : int
        Characters of the originals the stage does not see.
    largest : int
        Length in characters of the longest excerpted record (0 if none).
    cap : int
        The per-record cap applied.
    """

    sessions: tuple[Session, ...]
    records: int = 0
    chars_left_out: int = 0
    largest: int = 0
    cap: int = RECORD_CAP_CHARS

    def note(self, stage: str) -> str:
        """One line saying what `stage` reads excerpted; empty when nothing was.

        Example: ``1 record excerpted to at most 200,000 characters for the exam (per-record cap
        200,000; 49,800,000 characters left out, the longest record had 50,000,000); the
        tally and sessions/*.jsonl keep the full text``.
        """
        if not self.records:
            return ""
        noun = "record" if self.records == 1 else "records"
        return (
            f"{self.records} {noun} excerpted to at most {self.cap:,} characters for {stage} "
            f"(per-record cap {self.cap:,}; {self.chars_left_out:,} characters left out, the longest record "
            f"had {self.largest:,}); the tally and sessions/*.jsonl keep the full text"
        )

    def told(self, stage: str) -> tuple[Session, ...]:
        """Print `note` on stderr when anything was excerpted, and return the sessions (`for_stage`)."""
        if self.records:
            print(f"note: {self.note(stage)}", file=sys.stderr, flush=True)
        return self.sessions


class Capper:
    """Excerpts records one at a time as a stage reads them, and counts what it left out.

    The streaming form of `cap_sessions`: `sources.load_saved` passes it to `Session.read_jsonl`, so a
    record of tens of megabytes is excerpted as soon as it is read and its full text dropped before the
    next line. `excerpts` then gives the same `Excerpts` as `cap_sessions` on the whole sessions.

    Parameters
    ----------
    cap : int
        Per-record cap in characters (checked here, before anything is read).
    """

    def __init__(self, cap: int = RECORD_CAP_CHARS) -> None:
        self.cap = check_cap(cap)
        self.records = self.chars_left_out = self.largest = 0

    def __call__(self, record: Record) -> Record:
        """`record` itself when it fits the cap, else its excerpt (counted)."""
        if len(record.text) <= self.cap:
            return record
        head_end, tail_start = cut_points(record.text, self.cap)
        self.records += 1
        self.chars_left_out += tail_start - head_end
        self.largest = max(self.largest, len(record.text))
        return replace(record, text=_around(record.text, self.cap, head_end, tail_start))

    def excerpts(self, sessions: Iterable[Session]) -> Excerpts:
        """`sessions` (already read through this capper) with the counts so far."""
        return Excerpts(tuple(sessions), self.records, self.chars_left_out, self.largest, self.cap)


def cap_sessions(sessions: Iterable[Session], cap: int = RECORD_CAP_CHARS) -> Excerpts:
    """Every record over `cap` characters replaced by its excerpt, with counts (pure; see `for_stage`).

    Parameters
    ----------
    sessions : iterable of Session
    cap : int
        Per-record cap in characters (`RECORD_CAP_CHARS`; at least `MIN_CAP_CHARS`).
    """
    capper = Capper(cap)
    out: list[Session] = []
    for s in sessions:
        # A session with no record over the cap is the very same object.
        out.append(
            replace(s, records=tuple(map(capper, s.records))) if any(len(r.text) > cap for r in s.records) else s
        )
    return capper.excerpts(out)


def for_stage(sessions: Iterable[Session], stage: str, cap: int = RECORD_CAP_CHARS) -> tuple[Session, ...]:
    """Cap the sessions as `stage` reads them, saying so on stderr when anything was excerpted.

    The note (``note: 1 record excerpted …``, `Excerpts.note`) goes to
    stderr, so a notebook shows it under the cell that read the sessions and
    a command's JSON output on stdout stays clean; nothing is printed for
    sessions the cap leaves alone.

    Parameters
    ----------
    sessions : iterable of Session
    stage : str
        Names the stage in the note ("the exam", "the follow-up attribution").
    cap : int
        Per-record cap in characters.
    """
    return cap_sessions(sessions, cap).told(stage)


__all__ = [
    "Capper",
    "Excerpts",
    "MARKER_PATTERN",
    "MIN_CAP_CHARS",
    "RECORD_CAP_CHARS",
    "cap_sessions",
    "check_cap",
    "cut_points",
    "excerpt_record",
    "excerpt_text",
    "for_stage",
]
