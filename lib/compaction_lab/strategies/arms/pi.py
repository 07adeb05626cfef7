"""``pi``: the pi coding agent's compaction (``packages/coding-agent``), strategy ``pi`` (``pi-2``).

Upstream: badlogic/pi-mono @ 83378aad7e74a0e2bb8f37c007a9685fb4609d8a (the repository has since
moved to earendil-works/pi). The importer of pi's logs is `compaction_lab.ingest.importers.pi`.

Key names: `PiStrategy` (`PiStrategy.fires`, `PiStrategy.summary_request`, `PiStrategy.compact`),
`RESERVE_TOKENS`, `KEEP_RECENT_TOKENS`, `estimate_entry`, `session_entries`, `find_cut_point`,
`find_turn_start`, `prepare`, `file_operations`, `compute_file_lists`, `format_file_operations`,
`serialize_conversation`, `live_history`.

Rules and our decisions: docs/strategies.md#pi; each rule's upstream file:line and the function
here: docs/strategies.md#pi-upstream-pins.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from compaction_lab.core import bounded_json
from compaction_lab.core.fingerprints import sha256_text
from compaction_lab.core.projection import Projection, Segment, SentRequest, SummaryReceipt, SummaryRequest
from compaction_lab.core.session import Record, Session
from compaction_lab.core.text import js_length, js_slice
from compaction_lab.core.tokens import counter, truncate_tokens
from compaction_lab.strategies.base import (
    COMPACTION_FAILED,
    STRATEGIES,
    CompactionContext,
    failure_mode,
    projection,
    read_prompt,
    role_of,
    summarize_or_template,
    summary_label,
)
from compaction_lab.summarize import extractive
from compaction_lab.summarize.extractive import Block, Section, Template, parse_blocks

ALGORITHM_VERSION = "pi-2"  # pi-2: on_failure="upstream" keeps the history on a failed summary
PIN = "83378aad7e74a0e2bb8f37c007a9685fb4609d8a"

RESERVE_TOKENS = 16_384  # DEFAULT_COMPACTION_SETTINGS.reserveTokens
KEEP_RECENT_TOKENS = 20_000  # DEFAULT_COMPACTION_SETTINGS.keepRecentTokens
SUMMARY_FRACTION = 0.8  # generateSummary: maxTokens = floor(0.8 * reserveTokens)
TURN_PREFIX_FRACTION = 0.5  # generateTurnPrefixSummary: floor(0.5 * reserveTokens)
TOOL_RESULT_MAX_CHARS = 2_000  # utils.ts TOOL_RESULT_MAX_CHARS

TEMPLATE = "pi-checkpoint"
TURN_PREFIX_TEMPLATE = "pi-turn-prefix"
REQUEST_SHAPE = "dedicated"
#: Registry estimator name; internally `estimate_entry` (ceil(chars/4) per message, as upstream).
ESTIMATOR = "chars/4"

# --- short fixed strings, exact (messages.ts:11-24, compaction.ts:743,747)
COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUMMARY_SUFFIX = "</summary>"
#: The wrappers as segments: `Projection.messages` joins the segments of one message with a blank line,
#: so the wrappers' own newline next to the summary is dropped (the next request differs from upstream's
#: by one newline on each side of the summary).
SUMMARY_OPEN = COMPACTION_SUMMARY_PREFIX.rstrip("\n")
SUMMARY_CLOSE = COMPACTION_SUMMARY_SUFFIX.lstrip("\n")
BRANCH_OPEN = BRANCH_SUMMARY_PREFIX.rstrip("\n")
SPLIT_TURN_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
NO_PRIOR_HISTORY = "No prior history."

# --- long prompts: our words, upstream's structure and headings (utils.ts:168-170, compaction.ts:444-514, 687-700)
SYSTEM_PROMPT = (
    "You summarise context. You will read a conversation between a user and an AI coding assistant and "
    "write a structured summary in exactly the format you are given.\n\n"
    "Do NOT carry on the conversation. Do NOT answer any question asked in it. Output ONLY the structured "
    "summary."
)

SUMMARIZATION_PROMPT = """The messages above are a conversation to summarise. Write a structured context checkpoint summary that another LLM will use to carry on the work.

Use this EXACT format:

## Goal
[What the user wants to achieve. Several items if the session covers several tasks.]

## Constraints & Preferences
- [Constraints, preferences or requirements the user stated]
- [Or "(none)" if the user stated none]

## Progress
### Done
- [x] [Tasks and changes completed]

### In Progress
- [ ] [Work under way]

### Blocked
- [Anything stopping progress, if any]

## Key Decisions
- **[Decision]**: [Short reason]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, examples or references needed to continue]
- [Or "(none)" if there are none]

Keep every section short. Keep exact file paths, function names and error messages."""

UPDATE_SUMMARIZATION_PROMPT = """The messages above are NEW conversation messages to fold into the existing summary given in <previous-summary> tags.

Update that structured summary with the new information. RULES:
- KEEP everything the previous summary holds
- ADD the new progress, decisions and context from the new messages
- UPDATE the Progress section: move finished items from "In Progress" to "Done"
- UPDATE "Next Steps" to what is left
- KEEP exact file paths, function names and error messages
- You may drop what is no longer relevant

Use this EXACT format:

## Goal
[Keep the existing goals; add new ones if the task grew]

## Constraints & Preferences
- [Keep the existing ones; add new ones found]

## Progress
### Done
- [x] [Earlier done items AND newly finished ones]

### In Progress
- [ ] [Work under way, as it stands now]

### Blocked
- [Current blockers; drop resolved ones]

## Key Decisions
- **[Decision]**: [Short reason] (keep all earlier ones, add new ones)

## Next Steps
1. [What is left, as it stands now]

## Critical Context
- [Keep what matters, add new context if needed]

Keep every section short. Keep exact file paths, function names and error messages."""

TURN_PREFIX_PROMPT = """This is the PREFIX of a turn too large to keep. Its SUFFIX (the recent work) is kept.

Summarise the prefix so that the kept suffix can be understood:

## Original Request
[What the user asked for in this turn]

## Early Progress
- [Key decisions and work done in the prefix]

## Context for Suffix
- [What is needed to understand the kept recent work]

Be brief. Keep to what the kept suffix needs."""

#: PiEntry kinds that are pi ``message`` entries (``compaction.ts:394, 420``).
MESSAGE_KINDS = frozenset({"user", "custom", "assistant", "toolResult", "bash"})
#: Valid cut points (``compaction.ts:292-327``).
CUT_KINDS = frozenset({"user", "custom", "assistant", "bash", "branch"})
#: Turn starts (``compaction.ts:334-349``).
TURN_START_KINDS = frozenset({"user", "bash", "branch"})
#: pi's file tools (``utils.ts:44-54``).
FILE_TOOLS = {"read": "read", "write": "written", "edit": "edited"}
_ASSISTANT_KINDS = frozenset({"assistant", "reasoning", "tool_call"})

register_template = extractive.register_template


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class PiEntry:
    """One pi session entry: the records of one ``entry_id``.

    ``kind`` is one of user, custom, assistant, toolResult, bash, branch,
    compaction, other; ``first_kept`` is a compaction's ``firstKeptEntryId``.
    """

    id: str
    kind: str
    records: tuple[Record, ...]
    first_kept: str | None = None

    @property
    def is_message(self) -> bool:
        """Tell whether the entry is a message (its kind is in `MESSAGE_KINDS`)."""
        return self.kind in MESSAGE_KINDS

    def context_records(self) -> list[Record]:
        """Return the entry's records that are sent (meta records are not)."""
        return [r for r in self.records if r.kind != "meta"]


def _compaction_marks(session: Session) -> dict[str, str | None]:
    """Map pi's own compactions: summary entry id → first kept entry id (None when unknown)."""
    if session.source_format != "pi":
        return {}
    out: dict[str, str | None] = {}
    for c in session.metadata.get("compactions") or ():
        if not isinstance(c, Mapping) or not c.get("entry_id"):
            continue
        kept = c.get("first_kept_entry_id")
        if kept is None and isinstance(c.get("first_kept_entry_index"), int):
            # v1 files: an index into the file's entries, header included (session-manager.ts:223-231);
            # the importer names entries without an id ``L{line}``, lines counted from 1.
            kept = f"L{c['first_kept_entry_index'] + 1}"
        out[str(c["entry_id"])] = str(kept) if kept is not None else None
    return out


def _classify(eid: str, recs: Sequence[Record], marks: Mapping[str, str | None], pi: bool) -> str:
    kinds = {r.kind for r in recs if r.kind != "meta"}
    if not kinds:
        return "other"
    if "summary" in kinds:
        return "compaction" if (not pi or eid in marks) else "branch"
    if "tool_output" in kinds and "tool_call" in kinds and any(r.call_id == eid for r in recs):
        return "bash"
    if "user" in kinds:
        return "custom" if all(r.injected for r in recs if r.kind == "user") else "user"
    if kinds & _ASSISTANT_KINDS:
        return "assistant"
    if "tool_output" in kinds:
        return "toolResult"
    return "custom"  # system text mid-session: sent as user-role text, like pi's custom messages


def session_entries(session: Session, cut: int, ctx: CompactionContext | None = None) -> list[PiEntry]:
    """Return the session's entries before `cut`, in file order (meta-only entries included: they matter to the cut).

    The system-prompt record (the call shape's system prompt) is not an entry: pi sends it as the system prompt.
    """
    sp = ctx.shape.system_prompt if ctx is not None else None
    marks = _compaction_marks(session)
    pi = session.source_format == "pi"
    groups: list[tuple[str, list[Record]]] = []
    for r in session.records:
        if r.source_order >= cut:
            break
        if r.kind == "system" and sp is not None and r.text == sp:
            continue
        if groups and groups[-1][0] == r.entry_id:
            groups[-1][1].append(r)
        else:
            groups.append((r.entry_id, [r]))
    out = []
    for eid, recs in groups:
        kind = _classify(eid, recs, marks, pi)
        out.append(PiEntry(eid, kind, tuple(recs), marks.get(eid) if kind == "compaction" else None))
    return out


# --------------------------------------------------------------------------- estimator


def _json(value: Any) -> str:
    """``JSON.stringify``: compact, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_call_parts(rec: Record) -> tuple[str, Any]:
    """(name, arguments) of a tool-call record whose text is ``name {json}`` (`core.text.tool_call_text`).

    Arguments that are not JSON, or nest deeper than `bounded_json.MAX_DEPTH`, are the recorded text.
    """
    text = rec.text
    name = rec.tool or (text.split(" ", 1)[0] if text else "")
    rest = text[len(name) + 1 :] if text.startswith(name + " ") else (text.split(" ", 1)[1] if " " in text else "")
    return name, bounded_json.parse_or_text(rest)  # not JSON, or nested too deep: the recorded text


def estimate_entry(entry: PiEntry) -> int:
    """Estimate the entry's message as pi's ``estimateTokens``: ``ceil(chars / 4)`` (0 for non-message entries)."""
    chars = 0
    for r in entry.context_records():
        if r.kind == "tool_call":
            if entry.kind == "bash":  # bashExecution: command + output
                _, args = tool_call_parts(r)
                chars += js_length(args.get("command", "") if isinstance(args, dict) else str(args))
            else:
                name, args = tool_call_parts(r)
                chars += js_length(name) + js_length(_json(args))
        else:
            chars += js_length(r.text)
    return math.ceil(chars / 4)


# --------------------------------------------------------------------------- cut point


@dataclass(frozen=True)
class CutPoint:
    first_kept: int
    turn_start: int
    is_split_turn: bool


def find_turn_start(entries: Sequence[PiEntry], index: int, start: int) -> int:
    """``findTurnStartIndex``: the user / bash / branch entry starting the turn at `index`, else -1."""
    for i in range(index, start - 1, -1):
        if entries[i].kind in TURN_START_KINDS:
            return i
    return -1


def find_cut_point(entries: Sequence[PiEntry], start: int, end: int, keep_recent: int) -> CutPoint:
    """``findCutPoint`` (compaction.ts:376-438): keep about `keep_recent` estimated tokens."""
    cut_points = [i for i in range(start, end) if entries[i].kind in CUT_KINDS]
    if not cut_points:
        return CutPoint(start, -1, False)
    acc, cut = 0, cut_points[0]
    for i in range(end - 1, start - 1, -1):
        if not entries[i].is_message:
            continue
        acc += estimate_entry(entries[i])
        if acc >= keep_recent:
            cut = next((c for c in cut_points if c >= i), cut)
            break
    while cut > start:
        prev = entries[cut - 1]
        if prev.kind == "compaction" or prev.is_message:
            break
        cut -= 1
    is_user = entries[cut].kind == "user"
    turn_start = -1 if is_user else find_turn_start(entries, cut, start)
    return CutPoint(cut, turn_start, not is_user and turn_start != -1)


# --------------------------------------------------------------------------- file operations


_FILE_TAG_RE = {
    key: re.compile(rf"<{tag}>\n(.*?)\n</{tag}>", re.S)
    for key, tag in (("read", "read-files"), ("edited", "modified-files"))
}


def file_operations(entries: Sequence[PiEntry], previous_summary: str | None = None) -> dict[str, set[str]]:
    """``extractFileOperations``: read / written / edited paths of pi's file tools (+ the previous lists)."""
    ops: dict[str, set[str]] = {"read": set(), "written": set(), "edited": set()}
    if previous_summary:
        for key, rx in _FILE_TAG_RE.items():
            for m in rx.finditer(previous_summary):
                ops[key].update(p for p in m.group(1).split("\n") if p)
    for e in entries:
        if e.kind != "assistant":
            continue
        for r in e.records:
            if r.kind != "tool_call":
                continue
            name, args = tool_call_parts(r)
            path = args.get("path") if isinstance(args, dict) else None
            if isinstance(path, str) and path and name in FILE_TOOLS:
                ops[FILE_TOOLS[name]].add(path)
    return ops


def compute_file_lists(ops: Mapping[str, set[str]]) -> tuple[list[str], list[str]]:
    """``computeFileLists``: (read-only files, modified files), each sorted."""
    modified = set(ops.get("edited", ())) | set(ops.get("written", ()))
    return sorted(p for p in ops.get("read", ()) if p not in modified), sorted(modified)


def format_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    """``formatFileOperations``: the XML blocks appended to the summary."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""


def appended_file_lists(summary: str) -> str:
    """Return the file lists pi's code appended to a summary (`format_file_operations`'s text), or "".

    Read back exactly: the summary must end with the lists `format_file_operations` makes of its own
    ``<read-files>`` / ``<modified-files>`` blocks; anything else (a summary without them, lists a model
    wrote mid-text) gives "".
    """
    found = {
        key: [p for m in rx.finditer(summary) for p in m.group(1).split("\n") if p] for key, rx in _FILE_TAG_RE.items()
    }
    lists = format_file_operations(found["read"], found["edited"])
    return lists if lists and summary.endswith(lists) else ""


# --------------------------------------------------------------------------- serialization


def _truncate_for_summary(text: str, max_chars: int = TOOL_RESULT_MAX_CHARS) -> str:
    n = js_length(text)
    if n <= max_chars:
        return text
    return f"{js_slice(text, max_chars)}\n\n[... {n - max_chars} more characters truncated]"


def _bash_text(entry: PiEntry) -> str:
    """``bashExecutionToText`` (exit code unknown to the importer)."""
    call = next((r for r in entry.records if r.kind == "tool_call"), None)
    out = next((r for r in entry.records if r.kind == "tool_output"), None)
    cmd = (call.target or "") if call is not None else ""
    text = f"Ran `{cmd}`\n"
    text += f"```\n{out.text}\n```" if out is not None and out.text else "(no output)"
    return text


def serialize_entry(entry: PiEntry) -> list[str]:
    """Serialise one entry as ``[Label]: text`` parts (``convertToLlm`` then ``serializeConversation``)."""
    recs = entry.context_records()
    if entry.kind in ("user", "custom"):
        text = "".join(r.text for r in recs if r.kind in ("user", "system"))
        return [f"[User]: {text}"] if text else []
    if entry.kind == "bash":
        return [f"[User]: {_bash_text(entry)}"]
    if entry.kind in ("branch", "compaction"):
        text = "".join(r.text for r in recs if r.kind == "summary")
        return [f"[User]: {BRANCH_SUMMARY_PREFIX}{text}{BRANCH_SUMMARY_SUFFIX}"] if text else []
    parts: list[str] = []
    thinking = [r.text for r in recs if r.kind == "reasoning"]
    texts = [r.text for r in recs if r.kind == "assistant"]
    calls = []
    for r in recs:
        if r.kind == "tool_call":
            name, args = tool_call_parts(r)
            if isinstance(args, dict):
                calls.append(f"{name}({', '.join(f'{k}={_json(v)}' for k, v in args.items())})")
            else:
                calls.append(f"{name}({args if isinstance(args, str) else _json(args)})")
    if thinking:
        parts.append("[Assistant thinking]: " + "\n".join(thinking))
    if texts:
        parts.append("[Assistant]: " + "\n".join(texts))
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    for r in recs:
        if r.kind == "tool_output" and r.text:
            parts.append(f"[Tool result]: {_truncate_for_summary(r.text)}")
    return parts


def serialize_conversation(entries: Sequence[PiEntry]) -> str:
    """``serializeConversation``: every message's parts, joined by a blank line."""
    return "\n\n".join(p for e in entries for p in serialize_entry(e))


# --------------------------------------------------------------------------- the stand-in's reading


def read_request(request: SummaryRequest) -> list[Block]:
    """Read a pi summary request's conversation: the previous summary (oldest), then the ``<conversation>`` blocks."""
    text = "".join(str(m.get("content") or "") for m in request.messages if m.get("role") == "user")
    head, tail = "<conversation>\n", "\n</conversation>"
    start, end = text.find(head), text.rfind(tail)
    conv = text[start + len(head) : end] if start >= 0 and end >= start + len(head) else ""
    blocks: list[Block] = []
    m = re.search(r"<previous-summary>\n(.*?)\n</previous-summary>", text[max(end, 0) :], re.S)
    if m and m.group(1).strip():
        blocks.append(Block("summary", m.group(1).strip(), 0))
    blocks += parse_blocks(conv, len(blocks))
    return blocks


register_template(
    Template(
        TEMPLATE,
        (
            Section("## Goal", "primary", 10, 120, 2),
            Section("## Constraints & Preferences", "user", 15, 100, 30),
            Section("## Progress", None),
            Section("### Done", "completed", 50, 60, 12),
            Section("### In Progress", "state", 20, 100, 2),
            Section("### Blocked", "errors", 40, 70, 8),
            Section("## Key Decisions", "decisions", 30, 70, 15),
            Section("## Next Steps", "next", 25, 80, 6),
            Section("## Critical Context", "identifiers", 35, 30, 40),
        ),
    ),
    reader=read_request,
)

register_template(
    Template(
        TURN_PREFIX_TEMPLATE,
        (
            Section("## Original Request", "primary", 10, 120, 2),
            Section("## Early Progress", "completed", 30, 60, 10),
            Section("## Context for Suffix", "state", 20, 100, 3),
        ),
    ),
    reader=read_request,
)


# --------------------------------------------------------------------------- live history


def _kept_before(entries: Sequence[PiEntry], idx: int) -> list[PiEntry]:
    """Entries ``buildSessionContext`` keeps before the compaction at `idx` (from its first kept id)."""
    first = entries[idx].first_kept
    for i in range(idx):
        if entries[i].id == first:
            return list(entries[i:idx])
    return []


def live_entries(entries: Sequence[PiEntry]) -> tuple[PiEntry | None, list[PiEntry]]:
    """``buildSessionContext`` over file order: (the latest compaction or None, the entries sent after it)."""
    last = max((i for i, e in enumerate(entries) if e.kind == "compaction"), default=None)
    if last is None:
        return None, [e for e in entries if e.kind != "other"]
    kept = _kept_before(entries, last) + list(entries[last + 1 :])
    return entries[last], [e for e in kept if e.kind not in ("other", "compaction")]


def live_history(session: Session, cut: int, ctx: CompactionContext) -> list[Record]:
    """Return the records pi's next request carries at `cut` (``session-manager.ts`` ``buildSessionContext``).

    Only the latest compaction counts: its summary first, then the entries
    from its ``firstKeptEntryId`` up to it, then every entry after it; older
    compaction entries are not sent. A foreign agent's recorded summary is a
    compaction that kept nothing before it. Meta records are not sent.
    """
    comp, rest = live_entries(session_entries(session, cut, ctx))
    head = [r for r in comp.records if r.kind == "summary"] if comp is not None else []
    return head + [r for e in rest for r in e.context_records()]


# --------------------------------------------------------------------------- preparation


@dataclass(frozen=True)
class Preparation:
    """``CompactionPreparation``: what is summarised, what is kept."""

    first_kept: int
    to_summarize: tuple[PiEntry, ...]
    turn_prefix: tuple[PiEntry, ...]
    kept: tuple[PiEntry, ...]
    is_split_turn: bool
    previous_summary: str | None
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]
    tokens_before: int


def prepare(
    entries: Sequence[PiEntry], keep_recent: int | None, keep_previous_kept: bool = False
) -> Preparation | None:
    """``prepareCompaction``; None when upstream would not compact (last entry a compaction, nothing to cut).

    ``keep_recent=None`` keeps nothing (our last-resort room rule): every entry after the previous
    compaction is summarised. ``keep_previous_kept`` is upstream's later fix (earendil-works/pi#2608,
    compaction.ts @00e68365): the search starts at the previous compaction's first kept entry, so what it
    kept is summarised or kept again; compaction entries in that range yield no message.
    """
    if not entries or entries[-1].kind == "compaction":
        return None
    prev = max((i for i, e in enumerate(entries) if e.kind == "compaction"), default=-1)
    start, end = prev + 1, len(entries)
    if keep_previous_kept and prev >= 0:
        first = entries[prev].first_kept
        start = next((i for i, e in enumerate(entries) if first is not None and e.id == first), prev + 1)
    if keep_recent is None:
        cp = CutPoint(end, -1, False)
    else:
        cp = find_cut_point(entries, start, end, keep_recent)
    history_end = cp.turn_start if cp.is_split_turn else cp.first_kept
    to_sum = tuple(e for e in entries[start:history_end] if e.kind != "compaction")
    prefix = (
        tuple(e for e in entries[cp.turn_start : cp.first_kept] if e.kind != "compaction") if cp.is_split_turn else ()
    )
    previous = "".join(r.text for r in entries[prev].context_records()) if prev >= 0 else None
    ops = file_operations(to_sum + prefix, previous)
    read_files, modified = compute_file_lists(ops)
    before = sum(estimate_entry(e) for e in entries[max(prev, 0) : end])
    kept = tuple(e for e in entries[cp.first_kept : end] if e.kind != "compaction")
    return Preparation(
        cp.first_kept, to_sum, prefix, kept, cp.is_split_turn, previous, tuple(read_files), tuple(modified), before
    )


# --------------------------------------------------------------------------- the strategy


def _entry_segments(entry: PiEntry) -> list[Segment]:
    """Send a kept entry verbatim (a branch summary wrapped as ``convertToLlm`` does)."""
    recs = entry.context_records()
    if entry.kind == "branch":
        key = f"entry:{entry.id}"
        out = [Segment("header", "user", BRANCH_OPEN, message=key)]
        out += [Segment("tail", "user", r.text, (r.entry_id,), record_kind=r.kind, message=key) for r in recs]
        return out + [Segment("header", "user", BRANCH_SUMMARY_SUFFIX, message=key)]
    return [Segment("tail", role_of(r), r.text, (r.entry_id,), record_kind=r.kind) for r in recs]


@dataclass(frozen=True)
class PiStrategy:
    """pi's compaction: a dedicated structured summary, ~20k estimated tokens of recent entries kept verbatim."""

    name: str = "pi"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = ESTIMATOR
    template: str = TEMPLATE

    # ---- settings
    @staticmethod
    def reserve(ctx: CompactionContext) -> int:
        """Return ``reserveTokens``: param ``reserve_tokens``, default `RESERVE_TOKENS`."""
        return int(ctx.param("reserve_tokens", RESERVE_TOKENS))

    @staticmethod
    def keep_recent(ctx: CompactionContext) -> int:
        """Return ``keepRecentTokens``: param ``keep_recent_tokens``, default `KEEP_RECENT_TOKENS`."""
        return int(ctx.param("keep_recent_tokens", KEEP_RECENT_TOKENS))

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """``shouldCompact``: ``contextTokens > contextWindow - reserveTokens`` (the API's usage: calibrated)."""
        if not bool(ctx.param("enabled", True)):
            return False
        return ctx.model_tokens(tokens) > ctx.window - self.reserve(ctx)

    def prompts(self, ctx: CompactionContext) -> dict[str, str]:
        """Return the prompt texts in use (paraphrases, or the exact upstream files the params name)."""
        return {
            "system": read_prompt(ctx.param("system_prompt_file", None), SYSTEM_PROMPT),
            "instruction": read_prompt(ctx.param("prompt_file", None), SUMMARIZATION_PROMPT),
            "update": read_prompt(ctx.param("update_prompt_file", None), UPDATE_SUMMARIZATION_PROMPT),
            "turn_prefix": read_prompt(ctx.param("turn_prefix_prompt_file", None), TURN_PREFIX_PROMPT),
            "summary_prefix": COMPACTION_SUMMARY_PREFIX,
            "summary_suffix": COMPACTION_SUMMARY_SUFFIX,
            "split_turn": SPLIT_TURN_SEPARATOR,
        }

    # ---- requests
    def summary_request(
        self, entries: Sequence[PiEntry], previous_summary: str | None, ctx: CompactionContext, cap: int
    ) -> SummaryRequest:
        """``generateSummary``'s request: system prompt, one user message (conversation, previous summary, prompt)."""
        p = self.prompts(ctx)
        base = p["update"] if previous_summary else p["instruction"]
        custom = ctx.param("custom_instructions", None)
        if custom:
            base = f"{base}\n\nAdditional focus: {custom}"
        text = f"<conversation>\n{serialize_conversation(entries)}\n</conversation>\n\n"
        if previous_summary:
            text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
        text += base
        return SummaryRequest(
            strategy=self.name,
            shape=REQUEST_SHAPE,
            system=p["system"],
            tools=(),
            messages=({"role": "user", "content": text},),
            template=self.template,
            max_output_tokens=cap,
            source_entry_ids=tuple(e.id for e in entries if e.kind != "other"),
        )

    def turn_prefix_request(self, entries: Sequence[PiEntry], ctx: CompactionContext, cap: int) -> SummaryRequest:
        """``generateTurnPrefixSummary``'s request."""
        p = self.prompts(ctx)
        text = f"<conversation>\n{serialize_conversation(entries)}\n</conversation>\n\n{p['turn_prefix']}"
        return SummaryRequest(
            strategy=self.name,
            shape=REQUEST_SHAPE,
            system=p["system"],
            tools=(),
            messages=({"role": "user", "content": text},),
            template=TURN_PREFIX_TEMPLATE,
            max_output_tokens=cap,
            source_entry_ids=tuple(e.id for e in entries if e.kind != "other"),
        )

    # ---- room
    def _plan(
        self, entries: Sequence[PiEntry], ctx: CompactionContext, room: int
    ) -> tuple[Preparation | None, int | None]:
        """Prepare at upstream's ``keepRecentTokens``, or at a smaller keep when the summary has too little room.

        The keep is halved down to 0 while the kept entries leave the summary too little room, then nothing is
        kept.
        """
        cnt = counter(ctx.encoding)
        reserve = self.reserve(ctx)
        keep: int | None = self.keep_recent(ctx)
        while True:
            prep = prepare(entries, keep, bool(ctx.param("keep_previous_kept", False)))
            if prep is None:
                return None, keep
            caps = math.floor(SUMMARY_FRACTION * reserve) + (
                math.floor(TURN_PREFIX_FRACTION * reserve) if prep.is_split_turn else 0
            )
            need = min(caps, max(0, room // 2))
            kept = sum(cnt.count_many([r.text for e in prep.kept for r in e.context_records()]))
            lists = cnt.count(format_file_operations(prep.read_files, prep.modified_files))
            if kept + lists + need <= room or keep is None:
                return prep, keep
            keep = keep // 2 if keep > 0 else None

    # ---- compaction
    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the next request after pi compacts the session at `cut`.

        A summary call that fails (the summarizer unavailable or raising, or a request left no room
        for an answer) makes upstream's ``compact`` throw; under ``on_failure="upstream"`` the
        projection is then the live history unchanged (`_unchanged`, ``notes["compaction_failed"]``).
        """
        on_failure = failure_mode(ctx, self.name)
        cnt = counter(ctx.encoding)
        entries = session_entries(session, cut, ctx)
        segs = [
            Segment("system", "system", ctx.shape.system_prompt),
            Segment("tools", "system", ctx.shape.tools_text()),
        ]
        frame = sum(cnt.count_many([s.text for s in segs]))
        cap = ctx.window - ctx.output_ceiling
        wrappers = cnt.count(SUMMARY_OPEN) + cnt.count(SUMMARY_CLOSE)
        room = cap - frame - wrappers
        notes: dict[str, Any] = {
            "pin": PIN,
            "reserve_tokens": self.reserve(ctx),
            "keep_recent_tokens": self.keep_recent(ctx),
            "on_failure": on_failure,
        }
        prep, keep_used = self._plan(entries, ctx, room)
        if prep is None:
            return self._unchanged(session, cut, ctx, entries, segs, cap, notes)
        split = prep.is_split_turn and bool(prep.turn_prefix)
        lists_text = format_file_operations(prep.read_files, prep.modified_files)
        kept_recs = [r for e in prep.kept for r in e.context_records()]
        kept_tokens = sum(cnt.count_many([r.text for r in kept_recs]))
        summary_room = max(
            0, room - kept_tokens - cnt.count(lists_text) - (cnt.count(SPLIT_TURN_SEPARATOR) if split else 0)
        )
        reserve = self.reserve(ctx)
        h_cap = math.floor(SUMMARY_FRACTION * reserve)
        p_cap = math.floor(TURN_PREFIX_FRACTION * reserve) if split else 0
        if h_cap + p_cap > summary_room:  # our room rule: both caps scaled into the room left
            h_cap, p_cap = (
                (summary_room * h_cap // (h_cap + p_cap), summary_room * p_cap // (h_cap + p_cap))
                if h_cap + p_cap
                else (0, 0)
            )
        hist_req = (
            self.summary_request(prep.to_summarize, prep.previous_summary, ctx, h_cap)
            if (any(e.kind != "other" for e in prep.to_summarize) or not split)
            else None
        )
        pre_req = self.turn_prefix_request(prep.turn_prefix, ctx, p_cap) if split else None
        body, receipt, answers = self._summarise(hist_req, pre_req, ctx)
        if receipt.fallback and on_failure == "upstream":
            # compact() throws (compaction.ts:567-568, 805-806, Promise.all 732-745); _runAutoCompaction
            # catches it before appendCompaction / replaceMessages (agent-session.ts:1886-1907, 1947-1959):
            # the messages are kept and the next request carries them unchanged. A request left no room for an
            # answer (max_output_tokens 0: reserve_tokens <= 1 upstream, or our room rule) is one the provider
            # refuses: the same outcome.
            notes.update(
                {
                    "is_split_turn": prep.is_split_turn,
                    "summary_cap": h_cap,
                    "turn_prefix_cap": p_cap,
                    "turn_prefix_request": (
                        pre_req.fingerprint() if pre_req is not None and hist_req is not None else None
                    ),
                }
            )
            asked = tuple(SentRequest(r, cnt.count(t) if t is not None else 0) for r, t in answers)
            return self._unchanged(
                session, cut, ctx, entries, segs, cap, notes, failed=(replace(receipt, text=""), asked)
            )
        if cnt.count(body) > summary_room:  # a summarizer overshot its cap
            body = truncate_tokens(body, summary_room, ctx.encoding)
            notes["summary_truncated"] = True
        receipt = replace(receipt, text=body)
        summary = body + lists_text
        req = hist_req or pre_req
        assert req is not None  # hist_req is None only on a split turn, which always builds pre_req
        key = "compaction-summary"
        segs.append(Segment("header", "user", SUMMARY_OPEN, message=key, label="pi summary prefix"))
        segs.append(
            Segment(
                "summary",
                "user",
                summary,
                req.source_entry_ids + (pre_req.source_entry_ids if pre_req is not None and req is not pre_req else ()),
                message=key,
                label=summary_label(receipt, "empty template (no summary)"),
            )
        )
        segs.append(Segment("header", "user", SUMMARY_CLOSE, message=key, label="pi summary suffix"))
        for e in prep.kept:
            segs += _entry_segments(e)
        tokens = frame + sum(cnt.count_many([s.text for s in segs[2:]]))
        first_kept = prep.kept[0].id if prep.kept else None
        notes.update(
            {
                "first_kept_entry_id": first_kept,
                "is_split_turn": prep.is_split_turn,
                "summarised_entries": len(prep.to_summarize),
                "turn_prefix_entries": len(prep.turn_prefix),
                "kept_entries": len(prep.kept),
                "kept_records": len(kept_recs),
                "kept_tokens": kept_tokens,
                "previous_summary": prep.previous_summary is not None,
                "read_files": list(prep.read_files),
                "modified_files": list(prep.modified_files),
                "tokens_before_estimate": prep.tokens_before,
                "keep_recent_used": keep_used,
                "keep_nothing": keep_used is None,
                "summary_cap": h_cap,
                "turn_prefix_cap": p_cap,
                "turn_prefix_request": pre_req.fingerprint() if pre_req is not None and req is not pre_req else None,
                "instruction_sha256": sha256_text(
                    self.prompts(ctx)["update" if prep.previous_summary else "instruction"]
                ),
                "tokens": tokens,
                "fits": tokens <= cap,
            }
        )
        sent: tuple[SentRequest, ...] = ()
        if pre_req is not None and req is not pre_req:  # a split turn: two requests, each billed
            hist_text, _, prefix_text = body.partition(SPLIT_TURN_SEPARATOR)
            sent = (SentRequest(req, cnt.count(hist_text)), SentRequest(pre_req, cnt.count(prefix_text)))
        return projection(
            self, session, cut, segs, cap, summary_request=req, receipt=receipt, notes=notes, sent_requests=sent
        )

    def _unchanged(
        self,
        session: Session,
        cut: int,
        ctx: CompactionContext,
        entries: Sequence[PiEntry],
        segs: list[Segment],
        cap: int,
        notes: dict[str, Any],
        failed: tuple[SummaryReceipt, tuple[SentRequest, ...]] | None = None,
    ) -> Projection:
        """Project the live context as is: upstream did not compact.

        Either there was nothing to do (the last entry is a compaction, or there is nothing), or
        (`failed`: the receipt, ``fallback=True``, and every summary request sent, in order) the summary
        call failed and the agent session kept its messages (``notes["compaction_failed"]``).
        """
        comp, rest = live_entries(entries)
        if comp is not None:
            key = "compaction-summary"
            text = "".join(r.text for r in comp.context_records())
            segs.append(Segment("header", "user", SUMMARY_OPEN, message=key, label="pi summary prefix"))
            segs.append(Segment("summary", "user", text, (comp.id,), message=key, label="recorded summary"))
            segs.append(Segment("header", "user", SUMMARY_CLOSE, message=key, label="pi summary suffix"))
        for e in rest:
            segs += _entry_segments(e)
        cnt = counter(ctx.encoding)
        tokens = sum(cnt.count_many([s.text for s in segs]))
        notes.update({"tokens": tokens, "fits": tokens <= cap})
        receipt: SummaryReceipt | None = None
        sent: tuple[SentRequest, ...] = ()
        if failed is None:
            notes["skipped"] = "nothing to compact" if not entries else "the last entry is a compaction"
        else:
            receipt, sent = failed
            notes["compaction_failed"] = receipt.error or COMPACTION_FAILED
        return projection(
            self,
            session,
            cut,
            segs,
            cap,
            summary_request=sent[0].request if sent else None,
            receipt=receipt,
            notes=notes,
            sent_requests=sent,
        )

    def _summarise(
        self, hist: SummaryRequest | None, prefix: SummaryRequest | None, ctx: CompactionContext
    ) -> tuple[str, SummaryReceipt, tuple[tuple[SummaryRequest, str | None], ...]]:
        """Return the summary body (history, the split turn's prefix merged after it), one receipt for both calls.

        The receipt is the main request's, its text the merged body and its token counts the sum of both
        calls. A checkpoint replay (`strategies._Replay`) answers the main request with that merged body,
        so the prefix request is not asked again. Both requests are asked even when the first fails:
        upstream sends them together (``Promise.all``, compaction.ts:732-745). The third value lists each
        request asked and its answer (None: the call failed or had no room).
        """
        main = hist or prefix
        assert main is not None
        replay = type(ctx.summarizer).__name__ == "_Replay"
        text, receipt = self._ask(main, ctx)
        answers: tuple[tuple[SummaryRequest, str | None], ...] = ((main, None if receipt.fallback else text),)
        if replay or prefix is None or main is prefix:
            if main is prefix and not replay:
                text = NO_PRIOR_HISTORY + SPLIT_TURN_SEPARATOR + text
            return text, replace(receipt, text=text), answers
        p_text, p_receipt = self._ask(prefix, ctx)
        answers += ((prefix, None if p_receipt.fallback else p_text),)
        merged = text + SPLIT_TURN_SEPARATOR + p_text
        errors = [e for e in (receipt.error, p_receipt.error) if e]
        return (
            merged,
            replace(
                receipt,
                text=merged,
                input_tokens=receipt.input_tokens + p_receipt.input_tokens,
                cached_tokens=receipt.cached_tokens + p_receipt.cached_tokens,
                output_tokens=receipt.output_tokens + p_receipt.output_tokens,
                fallback=receipt.fallback or p_receipt.fallback,
                error="; ".join(errors) or None,
            ),
            answers,
        )

    @staticmethod
    def _ask(req: SummaryRequest, ctx: CompactionContext) -> tuple[str, SummaryReceipt]:
        return summarize_or_template(ctx, req)


# request_shape: as docs/strategies.md documents it, written out (not REQUEST_SHAPE) so verify checks the code.
STRATEGY = PiStrategy()
STRATEGIES.add("pi", STRATEGY, rank=60, request_shape="dedicated", trigger_rule="W - reserveTokens (16,384)")

__all__ = [
    "ALGORITHM_VERSION",
    "BRANCH_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "PiEntry",
    "KEEP_RECENT_TOKENS",
    "PIN",
    "PiStrategy",
    "RESERVE_TOKENS",
    "STRATEGY",
    "compute_file_lists",
    "estimate_entry",
    "file_operations",
    "find_cut_point",
    "find_turn_start",
    "format_file_operations",
    "live_history",
    "prepare",
    "serialize_conversation",
    "session_entries",
]
