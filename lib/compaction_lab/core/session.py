"""Core types: a `Record` is one block of an agent session; a `Session` is their sequence.

Every importer (synthetic, Codex, Claude Code, OpenCode, pi, SWE-agent, chat
JSONL) produces `Session` objects, and every later stage (composition,
strategies, exams, cost) reads only these types, never a source format.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import msgspec

from compaction_lab.core import bounded_json
from compaction_lab.core.fingerprints import canonical_json

#: Every record kind, in the order tables and charts list them.
KINDS: tuple[str, ...] = (
    "system",
    "user",
    "assistant",
    "reasoning",
    "tool_call",
    "tool_output",
    "summary",
    "meta",
)

#: Kinds that occupy the context window. `meta` lines (bookkeeping such as
#: model changes or queue operations) are kept for provenance but never counted.
CONTEXT_KINDS: tuple[str, ...] = tuple(k for k in KINDS if k != "meta")

_msgspec_decode = msgspec.json.Decoder().decode


@dataclass(frozen=True)
class Record:
    """One block of an agent session, in source order.

    Parameters
    ----------
    session_id : str
        Id of the session the record belongs to.
    entry_id : str
        Id of the source entry (log line, message, part). Stable across
        re-imports of the same file.
    block_index : int
        Index of this block within its entry (an assistant message may hold
        prose, reasoning and several tool calls).
    source_order : int
        Position of the record in the session, 0-based and strictly increasing.
    kind : str
        One of `KINDS`.
    text : str
        The text the model sees (for a tool call: name and arguments).
    tool : str, optional
        Tool name, for ``tool_call`` and ``tool_output`` records.
    target : str, optional
        What the tool acted on: a file path, a command, a URL.
    call_id : str, optional
        Links a tool output to its call.
    is_error : bool
        True when a tool output reports a failure.
    injected : bool
        True for user-role text the harness injected (AGENTS.md, environment
        context), as opposed to what the person typed.
    timestamp : str, optional
        ISO-8601 timestamp, when the source records one.
    """

    session_id: str
    entry_id: str
    block_index: int
    source_order: int
    kind: str
    text: str
    tool: str | None = None
    target: str | None = None
    call_id: str | None = None
    is_error: bool = False
    injected: bool = False
    timestamp: str | None = None

    def __post_init__(self) -> None:
        """Refuse a kind that is not one of `KINDS`."""
        if self.kind not in KINDS:
            raise ValueError(f"unknown record kind {self.kind!r}; expected one of {KINDS}")

    @property
    def chars(self) -> int:
        """Length of the record's text in characters."""
        return len(self.text)

    @property
    def pointer(self) -> str | None:
        """Coarse class a question or follow-up can point at: user, assistant or tool."""
        return POINTER_OF_KIND.get(self.kind)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form, field order fixed (used for canonical serialisation)."""
        return asdict(self)


#: Coarse pointer classes used by the follow-up table and the exams.
POINTER_OF_KIND: Mapping[str, str] = {
    "user": "user",
    "assistant": "assistant",
    "reasoning": "assistant",
    "tool_call": "tool",
    "tool_output": "tool",
}


@dataclass(frozen=True)
class Session:
    """An agent session: metadata plus records in source order.

    Parameters
    ----------
    id : str
        Session id, unique within an import.
    source_format : str
        ``synthetic``, ``codex``, ``claude_code``, ``opencode``, ``pi``,
        ``swe_agent`` or ``chat_jsonl``.
    source_path : str, optional
        Where the session was read from (None for generated sessions).
    metadata : Mapping
        Model, context window if known, recorded usage, the session's own
        system prompt, generator parameters, ...
    records : tuple of Record
        The records in source order.
    """

    id: str
    source_format: str
    records: tuple[Record, ...]
    source_path: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Store the records as a tuple; refuse another session's record or a source_order out of order."""
        # Accept any iterable but store an immutable tuple.
        object.__setattr__(self, "records", tuple(self.records))
        last = -1
        for rec in self.records:
            if rec.session_id != self.id:
                raise ValueError(f"record {rec.entry_id!r} belongs to session {rec.session_id!r}, not {self.id!r}")
            if rec.source_order <= last:
                raise ValueError(
                    f"records of session {self.id!r} are not in strictly increasing source_order "
                    f"(entry {rec.entry_id!r} has {rec.source_order} after {last})"
                )
            last = rec.source_order

    def __len__(self) -> int:
        """Return the number of records."""
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        """Iterate over the records in source order."""
        return iter(self.records)

    @property
    def end(self) -> int:
        """One past the last record's source_order: the cut after the whole session (0 when empty)."""
        return self.records[-1].source_order + 1 if self.records else 0

    @property
    def cwd(self) -> str | None:
        """The working directory the log recorded (``metadata["cwd"]``), or None where it names none."""
        cwd = self.metadata.get("cwd")
        return cwd if isinstance(cwd, str) and cwd else None

    @property
    def chars(self) -> int:
        """Total characters of the records that occupy the context window."""
        return sum(r.chars for r in self.records if r.kind in CONTEXT_KINDS)

    def of_kind(self, *kinds: str) -> list[Record]:
        """Return the records whose kind is one of `kinds`, in source order."""
        return [r for r in self.records if r.kind in kinds]

    def to_jsonl(self) -> bytes:
        """Canonical JSONL bytes: a header line, then one line per record.

        Keys are sorted and separators fixed, so equal sessions give equal
        bytes; this is what the synthetic manifest hashes.
        """
        return b"".join(self.jsonl_lines())

    def jsonl_lines(self) -> Iterator[bytes]:
        """Yield the lines of `to_jsonl`, each ending in a newline, made one at a time (`write_jsonl`)."""
        header = {
            "session": {
                "id": self.id,
                "source_format": self.source_format,
                "source_path": self.source_path,
                "metadata": dict(self.metadata),
            }
        }
        yield (canonical_json(header) + "\n").encode("utf-8")
        for r in self.records:
            yield (canonical_json(r.to_dict()) + "\n").encode("utf-8")

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Write `to_jsonl`'s bytes to `path` a line at a time, so only one record's line is held at once."""
        with open(path, "wb") as f:
            f.writelines(self.jsonl_lines())

    @classmethod
    def from_jsonl(cls, data: bytes | str) -> Session:
        """Inverse of `to_jsonl`."""
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return cls.from_lines(text.split("\n"))  # not splitlines: U+2028, NEL stay inside a line

    @classmethod
    def read_jsonl(cls, path: str | os.PathLike[str], record: Callable[[Record], Record] | None = None) -> Session:
        """Read a file `to_jsonl` wrote, one line at a time: `from_lines` over its lines.

        Only one line is held at a time, so a session with a record of tens of megabytes costs that record
        (or what `record` makes of it), not the file twice over.
        """
        with open(path, "rb") as f:
            return cls.from_lines(f, record)

    @classmethod
    def from_lines(cls, lines: Iterable[bytes | str], record: Callable[[Record], Record] | None = None) -> Session:
        """Build a session from the lines of `to_jsonl` (blank ones skipped), each record passed through `record`.

        Parameters
        ----------
        lines : iterable of bytes or str
            The header line, then one line per record.
        record : callable, optional
            Applied to each record as it is read, before the next line is decoded (a stage's per-record cap,
            `excerpt.Capper`), so a long record's full text is dropped as soon as it has been read.
        """
        it = (ln for ln in lines if ln and not ln.isspace())  # not `strip`: it would copy a long line
        first = next(it, None)
        if first is None:
            raise ValueError("empty session JSONL")
        head = _decode_line(first)["session"]
        records = []
        for ln in it:
            rec = Record(**_decode_line(ln))
            records.append(rec if record is None else record(rec))
        return cls(
            id=head["id"],
            source_format=head["source_format"],
            source_path=head.get("source_path"),
            metadata=head.get("metadata") or {},
            records=tuple(records),
        )


def _decode_line(line: bytes | str) -> Any:
    # msgspec decodes UTF-8 bytes without the intermediate str json.loads makes of them (a 50 MB line
    # would cost 50 MB more); `to_jsonl` writes plain UTF-8 JSON, so the value is json.loads's.
    try:
        return _msgspec_decode(line)
    except (msgspec.DecodeError, RecursionError):  # refused, or nested too deep: the bounded reader decides
        return bounded_json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
