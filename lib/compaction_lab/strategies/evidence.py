"""FutureOS tool-evidence index: deterministic, no model call.

A FutureOS projection replaces the tool calls and outputs before the recent tail with a bounded
index of JSON rows, one per selected tool record (a ``tool_call`` and its ``tool_output``, paired by
``call_id``). Each selection rule is a small pure function here (`error_records`, `group_records`,
`is_priority_target`, `ordered_groups`, `group_representatives`, `by_recency`), chained by
`priority_order`; `evidence_rows` keeps the rows that fit the budget (`EVIDENCE_TOKENS` by default,
the whole segment counted) and `evidence_text` renders them.
Pinned by ``tests/strategies/test_evidence.py``.

Rules: docs/strategies.md, rule F8 of "8. FutureOS".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compaction_lab.core.session import Record
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.strategies.trigger import EVIDENCE_TOKENS

#: Targets (paths or commands) that look like config / schema / validation / test.
PRIORITY_TARGET_RE = re.compile(
    r"config|settings|\.toml|\.ya?ml|\.json|schema|migration|valid|test|spec|pytest", re.IGNORECASE
)

#: Characters of the result text kept at the head and at the tail of a row.
HEAD_CHARS = 160
TAIL_CHARS = 160
#: Longest target kept in a row (a long command is cut with an ellipsis).
TARGET_CHARS = 200

#: First line of the index segment: says what the rows are (our own words).
INDEX_HEADER = (
    "[Tool evidence index — deterministic, no model call. One JSON row per selected tool result "
    "from before the recent tail, in priority order (errors, config/schema/validation/test targets, "
    "first and latest per tool+target, then most recent), not in time order: sourceOrder gives the "
    "chronology. head/tail are excerpts; the full output is retrievable with history get <entryId>.]"
)

#: Why a row was selected (the rule that placed it), in priority order.
REASONS: tuple[str, ...] = ("error", "group-latest", "group-first", "recency")

_COUNT_CHUNK = 128


# --------------------------------------------------------------------------- tool records


@dataclass(frozen=True)
class ToolRecord:
    """A tool call and its output (either may be missing).

    The *result* is the output when there is one, else the call; a row's
    entryId / blockIndex / sourceOrder / excerpts come from the result.
    """

    call: Record | None
    output: Record | None

    def __post_init__(self) -> None:
        """Refuse a tool record with neither call nor output."""
        if self.call is None and self.output is None:
            raise ValueError("a tool record needs a call or an output")

    @property
    def result(self) -> Record:
        """The output when there is one, else the call."""
        if self.output is not None:
            return self.output
        assert self.call is not None  # __post_init__ rejects a tool record with neither call nor output
        return self.call

    @property
    def tool(self) -> str:
        """The tool name, from the call else the output ("" when neither names one)."""
        for r in (self.call, self.output):
            if r is not None and r.tool:
                return r.tool
        return ""

    @property
    def target(self) -> str:
        """The target (path or command), from the call else the output ("" when neither names one)."""
        for r in (self.call, self.output):
            if r is not None and r.target:
                return r.target
        return ""

    @property
    def is_error(self) -> bool:
        """Whether the output is an error."""
        return self.output is not None and self.output.is_error

    @property
    def source_order(self) -> int:
        """The result's source order."""
        return self.result.source_order

    @property
    def entry_ids(self) -> tuple[str, ...]:
        """Entries the record came from (call first), without repeats."""
        out: list[str] = []
        for r in (self.call, self.output):
            if r is not None and r.entry_id not in out:
                out.append(r.entry_id)
        return tuple(out)

    @property
    def records(self) -> tuple[Record, ...]:
        """The call and the output, those present."""
        return tuple(r for r in (self.call, self.output) if r is not None)


def tool_records(records: Iterable[Record]) -> list[ToolRecord]:
    """Pair tool calls with their outputs by ``call_id``, in the result's source order.

    An output pairs with the latest earlier call carrying its ``call_id`` (so a
    reused id pairs locally); several outputs of one call each become a record
    sharing that call. Calls with no output and outputs with no call stand alone.
    Records of other kinds are ignored.
    """
    out: list[ToolRecord] = []
    open_calls: dict[str, Record] = {}
    answered: set[int] = set()  # id() of calls that got an output
    calls: list[Record] = []
    for r in records:
        if r.kind == "tool_call":
            calls.append(r)
            if r.call_id:
                open_calls[r.call_id] = r
        elif r.kind == "tool_output":
            call = open_calls.get(r.call_id) if r.call_id else None
            if call is not None:
                answered.add(id(call))
            out.append(ToolRecord(call, r))
    out.extend(ToolRecord(c, None) for c in calls if id(c) not in answered)
    out.sort(key=lambda t: t.source_order)
    return out


def _as_tool_records(records: Sequence[Record] | Sequence[ToolRecord]) -> list[ToolRecord]:
    items = list(records)
    tools = [x for x in items if isinstance(x, ToolRecord)]
    if items and len(tools) == len(items):
        return sorted(tools, key=lambda t: t.source_order)
    return tool_records(x for x in items if isinstance(x, Record))


# --------------------------------------------------------------------------- priority rules


def is_priority_target(target: str | None) -> bool:
    """Apply rule 2: tell whether a target (path or command) looks like config / schema / validation / test."""
    return bool(target and PRIORITY_TARGET_RE.search(target))


def error_records(records: Sequence[ToolRecord]) -> list[ToolRecord]:
    """Rule 1: the error results, newest first."""
    return sorted((r for r in records if r.is_error), key=lambda r: -r.source_order)


def group_key(record: ToolRecord) -> tuple[str, str]:
    """Return the (tool, target) a record is grouped by."""
    return (record.tool, record.target)


def group_records(records: Sequence[ToolRecord]) -> dict[tuple[str, str], list[ToolRecord]]:
    """Rule 2: records by (tool, target), each group in chronological order."""
    groups: dict[tuple[str, str], list[ToolRecord]] = {}
    for r in sorted(records, key=lambda r: r.source_order):
        groups.setdefault(group_key(r), []).append(r)
    return groups


def ordered_groups(groups: dict[tuple[str, str], list[ToolRecord]]) -> list[list[ToolRecord]]:
    """Rule 2: priority-target groups ahead of the others; within each class, newest group first."""

    def key(item: tuple[tuple[str, str], list[ToolRecord]]) -> tuple[int, int]:
        (_, target), recs = item
        return (0 if is_priority_target(target) else 1, -recs[-1].source_order)

    return [recs for _, recs in sorted(groups.items(), key=key)]


def group_representatives(group: Sequence[ToolRecord]) -> list[ToolRecord]:
    """Rule 3: the latest record of a chronological group, then its first (once if the same)."""
    if not group:
        return []
    latest, first = group[-1], group[0]
    return [latest] if latest is first else [latest, first]


def by_recency(records: Sequence[ToolRecord]) -> list[ToolRecord]:
    """Rule 4: every record, newest first."""
    return sorted(records, key=lambda r: -r.source_order)


def prioritized(records: Sequence[ToolRecord]) -> list[tuple[ToolRecord, str]]:
    """All records once each, in selection priority, with the rule that placed them."""
    out: list[tuple[ToolRecord, str]] = []
    seen: set[int] = set()

    def add(rec: ToolRecord, reason: str) -> None:
        if id(rec) not in seen:
            seen.add(id(rec))
            out.append((rec, reason))

    for r in error_records(records):
        add(r, "error")
    for group in ordered_groups(group_records(records)):
        reps = group_representatives(group)
        add(reps[0], "group-latest")
        if len(reps) > 1:
            add(reps[1], "group-first")
    for r in by_recency(records):
        add(r, "recency")
    return out


def priority_order(records: Sequence[ToolRecord]) -> list[ToolRecord]:
    """Rules 1-4 chained: every record once, in the order rows are offered to the budget."""
    return [r for r, _ in prioritized(records)]


# --------------------------------------------------------------------------- rows


def excerpts(text: str, head_chars: int = HEAD_CHARS, tail_chars: int = TAIL_CHARS) -> tuple[str, str]:
    """Head and tail excerpts of fixed size; the tail is empty when the text fits in the head.

    When the text is longer than the head but not longer than head + tail, the
    tail is the rest of the text (nothing is skipped); otherwise it is the last
    `tail_chars` characters.
    """
    head_chars, tail_chars = max(0, head_chars), max(0, tail_chars)
    if len(text) <= head_chars:
        return text, ""
    head = text[:head_chars]
    if len(text) <= head_chars + tail_chars:
        return head, text[head_chars:]
    return head, (text[-tail_chars:] if tail_chars else "")


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def row_json(
    record: ToolRecord, head_chars: int = HEAD_CHARS, tail_chars: int = TAIL_CHARS, target_chars: int = TARGET_CHARS
) -> str:
    """One bounded JSON row for a tool record (one line, keys in the documented order)."""
    res = record.result
    head, tail = excerpts(res.text, head_chars, tail_chars)
    row = {
        "entryId": res.entry_id,
        "blockIndex": res.block_index,
        "sourceOrder": res.source_order,
        "tool": record.tool,
        "target": _bounded(record.target, target_chars),
        "error": record.is_error,
        "head": head,
        "tail": tail,
    }
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class EvidenceRow:
    """One selected row: its JSON text, the tool record it came from, its size and why it was chosen."""

    json: str
    record: ToolRecord
    tokens: int
    reason: str

    @property
    def entry_ids(self) -> tuple[str, ...]:
        """The entries of the row's tool record (call first), without repeats."""
        return self.record.entry_ids


def evidence_text(rows: Sequence[EvidenceRow]) -> str:
    """Write the index segment: a one-line header, then one JSON row per line ("" for no rows)."""
    if not rows:
        return ""
    return "\n".join([INDEX_HEADER, *(r.json for r in rows)])


def evidence_rows(
    records: Sequence[Record] | Sequence[ToolRecord],
    budget_tokens: int = EVIDENCE_TOKENS,
    *,
    head_chars: int = HEAD_CHARS,
    tail_chars: int = TAIL_CHARS,
    target_chars: int = TARGET_CHARS,
    encoding: str = DEFAULT_ENCODING,
) -> list[EvidenceRow]:
    """Select the rows of the evidence index within `budget_tokens`.

    Parameters
    ----------
    records : sequence of Record or ToolRecord
        The history's records (non-tool kinds are ignored; calls and outputs
        are paired by ``call_id``), or already-paired tool records.
    budget_tokens : int
        Bound on the whole index segment (`evidence_text`), header included,
        in report tokens.
    head_chars, tail_chars, target_chars : int
        Row bounds (see `row_json`).
    encoding : str
        Tokenizer (FutureOS's estimator is the report tokenizer).

    Returns
    -------
    list of EvidenceRow
        In priority order. A row that does not fit is left out whole and the
        following rows are still tried; selection stops early once the space
        left is smaller than the smallest row possible.
    """
    recs = _as_tool_records(records)
    if not recs or budget_tokens <= 0:
        return []
    cnt = counter(encoding)
    header_tokens, newline, floor = cnt.count_many(
        [INDEX_HEADER, "\n", row_json(ToolRecord(None, Record("", "", 0, 0, "tool_output", "")), 0, 0, 0)]
    )
    remaining = budget_tokens - header_tokens
    if remaining < floor + newline:
        return []
    chosen: list[EvidenceRow] = []
    order = prioritized(recs)
    for start in range(0, len(order), _COUNT_CHUNK):
        chunk = order[start : start + _COUNT_CHUNK]
        texts = [row_json(r, head_chars, tail_chars, target_chars) for r, _ in chunk]
        for (rec, reason), text, n in zip(chunk, texts, cnt.count_many(texts), strict=False):
            cost = n + newline
            if cost <= remaining:
                chosen.append(EvidenceRow(text, rec, n, reason))
                remaining -= cost
        if remaining < floor + newline:
            break
    # Joining can only merge tokens at the seams, but check the segment as sent.
    while chosen and cnt.count(evidence_text(chosen)) > budget_tokens:  # pragma: no cover - defensive
        chosen.pop()
    return chosen


__all__ = [
    "EvidenceRow",
    "HEAD_CHARS",
    "INDEX_HEADER",
    "PRIORITY_TARGET_RE",
    "REASONS",
    "TAIL_CHARS",
    "TARGET_CHARS",
    "ToolRecord",
    "by_recency",
    "error_records",
    "evidence_rows",
    "evidence_text",
    "excerpts",
    "group_key",
    "group_records",
    "group_representatives",
    "is_priority_target",
    "ordered_groups",
    "prioritized",
    "priority_order",
    "row_json",
    "tool_records",
]
