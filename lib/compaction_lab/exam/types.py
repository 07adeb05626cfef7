"""The exam's types: a `Case` (a session, a compaction point, its questions) and a `Question`.

A question asks for an exact value (an ID a tool returned, a constraint the
user laid down, a number the assistant reported). Real questions point only
into the part of the session the compaction covers — before the recent tail
— so they can only be answered from what a projection kept. Decoys ask for a
value that never appeared anywhere: the right answer is ``NOT_FOUND``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compaction_lab.core import bounded_json
from compaction_lab.core.fingerprints import canonical_json

#: What a reader answers when the value is not in what it can see.
NOT_FOUND = "NOT_FOUND"

POINTERS: tuple[str, ...] = ("assistant", "user", "tool")


@dataclass(frozen=True)
class Question:
    """One exact-value question.

    Parameters
    ----------
    id : str
        Unique within the bank.
    case_id : str
    pointer : str
        ``user``, ``assistant`` or ``tool``: the kind of record the answer is in.
    category : str
        user_constraint, assistant_decision, assistant_value, tool_output_line,
        tool_returned_id, error_string, ... (probes add path, number, identifier, quoted).
    prompt : str
        The question as the reader sees it; never contains the answer.
    answer : str
        The exact value (for a decoy: the value that appears nowhere).
    aliases : tuple of str
        Other accepted spellings.
    source_entry_id : str
        Entry the answer was planted in or mined from ("" for decoys).
    source_order : int
        Its record's source_order (-1 for decoys).
    decoy : bool
    """

    id: str
    case_id: str
    pointer: str
    category: str
    prompt: str
    answer: str
    aliases: tuple[str, ...] = ()
    source_entry_id: str = ""
    source_order: int = -1
    decoy: bool = False

    def __post_init__(self) -> None:
        """Refuse a pointer that is not one of `POINTERS`; store the aliases as a tuple."""
        if self.pointer not in POINTERS:
            raise ValueError(f"question {self.id}: pointer {self.pointer!r} not in {POINTERS}")
        object.__setattr__(self, "aliases", tuple(self.aliases))


@dataclass(frozen=True)
class Case:
    """A forced compaction of one session at `cut`, with the questions asked after it.

    Parameters
    ----------
    id : str
    session_id : str
    cut : int
        Records with ``source_order < cut`` are compacted.
    tail_start : int
        First source_order of the recent tail (real questions point before it).
    questions : tuple of Question
    """

    id: str
    session_id: str
    cut: int
    tail_start: int
    questions: tuple[Question, ...] = field(default_factory=tuple)

    @property
    def real(self) -> tuple[Question, ...]:
        """The real questions (not decoys), in bank order."""
        return tuple(q for q in self.questions if not q.decoy)

    @property
    def decoys(self) -> tuple[Question, ...]:
        """The decoy questions, in bank order."""
        return tuple(q for q in self.questions if q.decoy)


def bank_to_jsonl(cases: Sequence[Case]) -> bytes:
    """Canonical bytes of a bank: one JSON line per case (sorted keys), what determinism tests hash."""
    lines = [canonical_json(asdict(c)) for c in cases]
    return ("\n".join(lines) + "\n").encode("utf-8")


def bank_from_jsonl(data: bytes | str) -> list[Case]:
    """Inverse of `bank_to_jsonl`; a line nested deeper than `bounded_json.MAX_DEPTH` raises `bounded_json.TooDeep`."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    cases = []
    for line in text.split("\n"):  # not splitlines: a question may hold U+2028 or NEL
        if not line.strip():
            continue
        d = bounded_json.loads(line)  # a bank may be sent with a run folder: nesting bounded
        qs = tuple(Question(**{**q, "aliases": tuple(q.get("aliases", ()))}) for q in d.pop("questions"))
        cases.append(Case(**d, questions=qs))
    return cases


def bank_digest(cases: Sequence[Case]) -> str:
    """sha256 of the canonical bank bytes."""
    return hashlib.sha256(bank_to_jsonl(cases)).hexdigest()


def write_bank(cases: Sequence[Case], path: str | Path) -> Path:
    """Write the bank's canonical bytes (`bank_to_jsonl`) to `path`, creating its folder; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bank_to_jsonl(cases))
    return path
