"""The per-record cap: a record longer than `RECORD_CAP_CHARS` is excerpted for the stages after the tally.

Stages after the tally see a record over the cap (200,000 characters) as an
excerpt: its first and last characters around one marker line stating how many
were left out. The excerpt is deterministic and never longer than the cap; the
stage that made it notes it on stderr (`for_stage`, `Excerpts.note`), and
`Capper` excerpts records as a session is read line by line. The tally and the
run folder's session files keep the full text.

Design (which stages apply it, the marker, why 200,000):
docs/architecture.md#the-per-record-cap
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
    "excerpt_text",
    "for_stage",
]
