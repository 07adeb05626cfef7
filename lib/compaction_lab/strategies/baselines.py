"""Baselines none of the seed systems tested: ``full``, ``truncate-oldest``,
``observation-masking`` and ``claude-code-style``.

All four return the same `Projection` as the seed strategies, so every chart
and exam treats them alike. All four decide sizes with the report tokenizer
(estimator ``tiktoken``) and report ``capacity = W - O`` (window minus the
model's output ceiling): the room the whole projection — system prompt and
tool definitions included — must fit in.

Conventions shared by the four (decisions where the spec is silent)
-------------------------------------------------------------------
* The projection starts with the call shape: a ``system`` segment (the shape's
  system prompt) and a ``tools`` segment (its tool definitions as JSON). A
  ``system`` record of the session whose text *is* that system prompt (the one
  `CallShape.for_session` took) is not repeated; any other record is.
* Segment kinds: ``tail`` is a contiguous run of verbatim records ending at
  the cut (for ``full`` and ``truncate-oldest`` everything kept is such a run).
  Verbatim records *before* a tail are ``user_original`` (user-role records,
  and system records) or ``assistant_original`` (assistant, reasoning and tool
  calls); ``record_kind`` always names the record's own kind. Markers,
  headers and summaries are authored kinds (`AUTHORED_KINDS`).
* A tool output is never kept without its call: when a call is dropped, its
  outputs are dropped too (call ids link them).
* Markers, headers and prompts are written in our own words. An omitted
  marker carries the entry id of the record it replaces; a header carries
  none (it describes, it does not stand for a record); a summary carries the
  entry ids it summarises. Originals stay in the session archive.
* Headers and summaries use the user role; an omitted tool output's marker
  keeps the tool role.

``full`` (``full-1``)
    No compaction: every history record verbatim. Only meaningful while the
    session fits: when ``system + tools + records > W - O`` it is still
    returned (the exam treats it as the recall ceiling) with
    ``notes["fits"] = False``. Never fires.

``truncate-oldest`` (``truncate-oldest-1``)
    What a naive agent does: drop the oldest whole records until the rest
    (plus a one-line header saying how many were dropped) fits
    ``W - O - system - tools``; then drop any tool output whose call was
    dropped. Fires when the input reaches ``W - O``.

``observation-masking`` (``observation-masking-1``)
    After JetBrains, "The Complexity Trap" (2025): every user, assistant,
    reasoning and tool-call record is kept verbatim; tool outputs older than
    the last ``mask_after_turns`` turns (default 10; a turn is a non-injected
    user message and everything after it, records before the first user
    message belong to the first turn) are replaced by a placeholder naming
    the entry and its size. When the masked projection still does not fit,
    the fallback, in this order: (1) drop whole turns, oldest first, among the
    masked turns; (2) mask the outputs of the kept turns too, oldest first;
    (3) drop the oldest remaining records. A header says what was dropped.
    Upstream masks on every step; here the same rule is applied when the
    compaction is forced, and `fires` reports when the unmasked input reaches
    ``W - O``. The paper counts agent steps as turns; the parameter
    ``turn_unit="step"`` does that (a step starts at a user message or at an
    assistant message — consecutive reasoning / prose blocks are one step),
    ``"user"`` (default) counts user messages as the brief defines a turn. On
    sessions with one user message (SWE-agent) the default masks nothing
    until the fallback runs.

``claude-code-style`` (``claude-code-style-1``)
    Modelled on Claude Code's compaction: old tool results are cleared first
    (every tool output before the recent tail becomes
    "[Old tool result content cleared]" in what the summariser sees), then the
    head is summarised into nine sections (template ``claude-code-9``) by a
    *dedicated* request — our own system prompt, no tools, one user message
    with the flattened head transcript (``[User]: …``, ``[Assistant]: …``,
    ``[Assistant reasoning]: …``, ``[Assistant tool call]: …``, ``[Tool
    result]: …`` / ``[Tool error]: …``, ``[Injected context]: …`` for
    harness-injected user text, ``[Previous summary]: …``) inside
    ``<conversation>`` tags, then the nine-section instruction — and
    the recent tail (``tail_tokens``, default 8,192; whole records, a call is
    never split from its output) follows verbatim. The projection is: system,
    tools, header (what was summarised and cleared, plus the continuation
    preface), summary, a continue line, tail. With provider ``none`` (or a
    failure) the summary is the empty nine-section template and the receipt
    says why (``fallback=True``). The summary cap is ``summary_tokens``
    (default 20,000, Claude Code's compaction output limit) bounded by the room
    left after the tail; the tail takes at most half the room. A model's
    ``<analysis>`` block is dropped and the ``<summary>`` block kept, as
    Claude Code does. If a provider overshoots its cap, the oldest tail
    records are given up (named in the notes and the header), then the summary
    is cut. Prompt texts are module constants; ``prompt_file`` /
    ``system_prompt_file`` point at exact upstream text instead, and the notes
    carry the sha256 of whichever is in use. Fires at ``W - min(O, 20,000) - 13,000`` (Claude
    Code's auto-compact threshold; parameters ``reserved_output_cap`` and
    ``autocompact_buffer``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Sequence

from ..projection import STAND_IN_LABEL, Projection, Segment, SummaryReceipt, SummaryRequest
from ..session import Record, Session
from ..summarize.extractive import empty_template
from ..tokens import counter
from .base import CompactionContext, call_summarizer, history, read_prompt, role_of

# --------------------------------------------------------------------------- shared helpers

ESTIMATOR = "tiktoken"


def _records(session: Session, cut: int, ctx: CompactionContext) -> list[Record]:
    """History before the cut, without the system record already sent as the system prompt."""
    sp = ctx.shape.system_prompt
    return [r for r in history(session, cut) if not (r.kind == "system" and r.text == sp)]


def _sizes(records: Sequence[Record], ctx: CompactionContext) -> list[int]:
    return counter(ctx.encoding).count_many([r.text for r in records])


def _count(text: str, ctx: CompactionContext) -> int:
    return counter(ctx.encoding).count(text)


def _frame(ctx: CompactionContext) -> tuple[list[Segment], int]:
    """The system and tools segments, and their size."""
    segs = [Segment("system", "system", ctx.shape.system_prompt),
            Segment("tools", "system", ctx.shape.tools_text())]
    return segs, sum(counter(ctx.encoding).count_many([s.text for s in segs]))


def _capacity(ctx: CompactionContext) -> int:
    return ctx.window - ctx.output_ceiling


def _verbatim(rec: Record, kind: str) -> Segment:
    return Segment(kind, role_of(rec), rec.text, (rec.entry_id,), record_kind=rec.kind)


def _head_kind(rec: Record) -> str:
    """Segment kind of a verbatim record kept before the tail."""
    return "assistant_original" if role_of(rec) in ("assistant", "tool") else "user_original"


def _call_of(records: Sequence[Record]) -> list[int | None]:
    """For each record: the index of the tool call a tool output answers (the latest earlier
    call with the same call id), else None."""
    last: dict[str, int] = {}
    out: list[int | None] = []
    for i, r in enumerate(records):
        out.append(last.get(r.call_id) if r.kind == "tool_output" and r.call_id else None)
        if r.kind == "tool_call" and r.call_id:
            last[r.call_id] = i
    return out


def _drop_orphans(records: Sequence[Record], dropped: list[bool]) -> int:
    """Mark as dropped every tool output whose call is dropped; returns how many were added."""
    n = 0
    for j, c in enumerate(_call_of(records)):
        if c is not None and dropped[c] and not dropped[j]:
            dropped[j] = True
            n += 1
    return n


def _fires_at_capacity(tokens: int, ctx: CompactionContext) -> bool:
    return tokens >= _capacity(ctx)


# --------------------------------------------------------------------------- full


@dataclass(frozen=True)
class Full:
    """No compaction: the whole history verbatim (the recall ceiling, valid while it fits)."""

    name: str = "full"
    algorithm_version: str = "full-1"
    estimator: str = ESTIMATOR

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        recs = _records(session, cut, ctx)
        frame, frame_tokens = _frame(ctx)
        total = frame_tokens + sum(_sizes(recs, ctx))
        cap = _capacity(ctx)
        return Projection(
            strategy=self.name, algorithm_version=self.algorithm_version, session_id=session.id, cut=cut,
            segments=tuple(frame + [_verbatim(r, "tail") for r in recs]),
            capacity=cap, estimator=self.estimator,
            notes={"fits": total <= cap, "tokens": total, "records": len(recs)},
        )

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Never: this baseline does not compact."""
        return False


# --------------------------------------------------------------------------- truncate-oldest

TRUNCATE_HEADER = ("[{version}: the {n} oldest records of this session ({tokens} tokens) were dropped to fit "
                   "the context window. They are not summarised; the originals stay in the session archive.]")


@dataclass(frozen=True)
class TruncateOldest:
    """Drop the oldest whole records until the rest fits (what a naive agent does)."""

    name: str = "truncate-oldest"
    algorithm_version: str = "truncate-oldest-1"
    estimator: str = ESTIMATOR

    def header(self, n: int, tokens: int) -> str:
        return TRUNCATE_HEADER.format(version=self.algorithm_version, n=n, tokens=tokens)

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        recs = _records(session, cut, ctx)
        sizes = _sizes(recs, ctx)
        frame, frame_tokens = _frame(ctx)
        cap = _capacity(ctx)
        budget = cap - frame_tokens
        n = len(recs)
        suffix = [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            suffix[i] = suffix[i + 1] + sizes[i]
        reserve = _count(self.header(n, suffix[0]), ctx)
        start = next((s for s in range(n + 1) if suffix[s] + (reserve if s else 0) <= budget), n)
        while True:
            dropped = [i < start for i in range(n)]
            orphans = _drop_orphans(recs, dropped)
            n_dropped = sum(dropped)
            kept_tokens = sum(sz for sz, d in zip(sizes, dropped) if not d)
            header = self.header(n_dropped, suffix[0] - kept_tokens) if n_dropped else ""
            used = kept_tokens + (_count(header, ctx) if header else 0)
            if used <= budget or start >= n:
                break
            start += 1
        segs = list(frame)
        if header:
            segs.append(Segment("header", "user", header))
        segs += [_verbatim(r, "tail") for r, d in zip(recs, dropped) if not d]
        return Projection(
            strategy=self.name, algorithm_version=self.algorithm_version, session_id=session.id, cut=cut,
            segments=tuple(segs), capacity=cap, estimator=self.estimator,
            notes={"fits": frame_tokens + used <= cap, "tokens": frame_tokens + used, "dropped": n_dropped,
                   "orphans_dropped": orphans, "dropped_tokens": suffix[0] - kept_tokens,
                   "record_budget": budget, "kept": n - n_dropped},
        )

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """When the input reaches ``W - O``."""
        return _fires_at_capacity(tokens, ctx)


# --------------------------------------------------------------------------- observation-masking

MASK_AFTER_TURNS = 10
MASK_MARKER = "[tool output omitted — entry {entry}, {tokens} tokens; retrievable from the session archive]"
MASK_HEADER = ("[{version}: {turns} oldest turns and {records} further records ({tokens} tokens) were dropped "
               "to fit the context window; {masked} older tool outputs are replaced by placeholders. Nothing "
               "here is summarised; the originals stay in the session archive.]")


def _turns(records: Sequence[Record], unit: str) -> list[int]:
    """Turn number of each record (0-based; records before the first turn start belong to turn 0)."""
    out, t, started = [], 0, False
    prev = None
    for r in records:
        user_start = r.kind == "user" and not r.injected
        if unit == "step":
            # a step: an assistant message (its reasoning and prose blocks together) with its calls
            # and their outputs; a user message also starts one
            starts = user_start or (r.kind in ("assistant", "reasoning")
                                    and (prev is None or prev.kind not in ("assistant", "reasoning")))
        else:
            starts = user_start
        prev = r
        if starts:
            if started:
                t += 1
            started = True
        out.append(t)
    return out


@dataclass(frozen=True)
class ObservationMasking:
    """Keep all prose and calls verbatim; replace tool outputs older than the last M turns with placeholders."""

    name: str = "observation-masking"
    algorithm_version: str = "observation-masking-1"
    estimator: str = ESTIMATOR

    def marker(self, rec: Record, tokens: int) -> str:
        return MASK_MARKER.format(entry=rec.entry_id, tokens=tokens)

    def header(self, turns: int, records: int, tokens: int, masked: int) -> str:
        return MASK_HEADER.format(version=self.algorithm_version, turns=turns, records=records, tokens=tokens,
                                  masked=masked)

    def _header(self, recs: Sequence[Record], turn: Sequence[int], n_turns: int, dropped: Sequence[bool],
                masked: Sequence[bool], sizes: Sequence[int]) -> tuple[str, int]:
        """The header for what was dropped ("" when nothing was), and how many whole turns were dropped."""
        n = len(recs)
        whole = [True] * n_turns  # turn t entirely dropped?
        for i in range(n):
            if not dropped[i]:
                whole[turn[i]] = False
        dropped_turns = sum(whole)
        if not any(dropped):
            return "", dropped_turns
        in_turns = sum(1 for i in range(n) if dropped[i] and whole[turn[i]])
        return self.header(dropped_turns, sum(dropped) - in_turns, sum(sizes[i] for i in range(n) if dropped[i]),
                           sum(1 for i in range(n) if masked[i] and not dropped[i])), dropped_turns

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        recs = _records(session, cut, ctx)
        n = len(recs)
        sizes = _sizes(recs, ctx)
        frame, frame_tokens = _frame(ctx)
        cap = _capacity(ctx)
        budget = cap - frame_tokens
        m = max(0, int(ctx.param("mask_after_turns", MASK_AFTER_TURNS)))
        unit = ctx.param("turn_unit", "user")
        turn = _turns(recs, unit)
        n_turns = turn[-1] + 1 if recs else 0
        protected = max(0, n_turns - m)  # first protected turn
        outputs = [i for i, r in enumerate(recs) if r.kind == "tool_output"]
        markers = {i: self.marker(recs[i], sizes[i]) for i in outputs}
        msize = dict(zip(outputs, counter(ctx.encoding).count_many([markers[i] for i in outputs])))
        masked = [recs[i].kind == "tool_output" and turn[i] < protected for i in range(n)]
        dropped = [False] * n

        def cost(i: int) -> int:
            return msize[i] if masked[i] else sizes[i]

        total = sum(cost(i) for i in range(n))
        reserve = _count(self.header(n_turns, n, sum(sizes), n), ctx)
        steps: list[str] = []
        if total > budget:
            need = budget - reserve
            # (1) drop whole masked turns, oldest first
            i = 0
            for t in range(protected):
                if total <= need:
                    break
                if not steps:
                    steps.append("drop-masked-turns")
                while i < n and turn[i] == t:
                    if not dropped[i]:
                        dropped[i] = True
                        total -= cost(i)
                    i += 1
            # (2) mask the outputs of kept turns, oldest first
            if total > need:
                steps.append("mask-recent-outputs")
                for j in outputs:
                    if total <= need:
                        break
                    if not dropped[j] and not masked[j]:
                        total -= sizes[j] - msize[j]
                        masked[j] = True
            # (3) drop the oldest remaining records
            if total > need:
                steps.append("drop-oldest-records")
                for j in range(n):
                    if total <= need:
                        break
                    if not dropped[j]:
                        dropped[j] = True
                        total -= cost(j)
        _drop_orphans(recs, dropped)
        while True:  # the header's real size may differ from its reserve by a token: keep dropping if so
            header, dropped_turns = self._header(recs, turn, n_turns, dropped, masked, sizes)
            used = sum(cost(i) for i in range(n) if not dropped[i]) + (_count(header, ctx) if header else 0)
            if used <= budget or all(dropped):
                break
            dropped[dropped.index(False)] = True
            _drop_orphans(recs, dropped)
        # the tail: the verbatim run at the end (records of protected turns not masked)
        tail_from = n
        while tail_from > 0 and turn[tail_from - 1] >= protected and not masked[tail_from - 1]:
            tail_from -= 1
        segs = list(frame)
        if header:
            segs.append(Segment("header", "user", header))
        for i, r in enumerate(recs):
            if dropped[i]:
                continue
            if masked[i]:
                segs.append(Segment("omitted_marker", role_of(r), markers[i], (r.entry_id,), record_kind=r.kind))
            else:
                segs.append(_verbatim(r, "tail" if i >= tail_from else _head_kind(r)))
        kept_tokens = used
        return Projection(
            strategy=self.name, algorithm_version=self.algorithm_version, session_id=session.id, cut=cut,
            segments=tuple(segs), capacity=cap, estimator=self.estimator,
            notes={"fits": frame_tokens + kept_tokens <= cap, "tokens": frame_tokens + kept_tokens,
                   "turns": n_turns, "turn_unit": unit, "mask_after_turns": m,
                   "masked": sum(1 for i in range(n) if masked[i] and not dropped[i]),
                   "masked_tokens": sum(sizes[i] for i in range(n) if masked[i] and not dropped[i]),
                   "dropped": sum(dropped), "dropped_turns": dropped_turns, "fallback_steps": steps},
        )

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """When the (unmasked) input reaches ``W - O``."""
        return _fires_at_capacity(tokens, ctx)


# --------------------------------------------------------------------------- claude-code-style

CLAUDE_TAIL_TOKENS = 8_192
CLAUDE_SUMMARY_TOKENS = 20_000  # Claude Code's output limit for the compaction call
CLAUDE_AUTOCOMPACT_BUFFER = 13_000
CLAUDE_RESERVED_OUTPUT_CAP = 20_000
CLEARED_TOOL_RESULT = "[Old tool result content cleared]"

#: The summariser's own system prompt (ours; the dedicated shape shares nothing with the session).
CLAUDE_SUMMARY_SYSTEM = (
    "You are a careful summariser of coding sessions between a developer and an AI coding agent. You are given "
    "a transcript and asked for a structured summary of it. Write only that summary, in the structure asked "
    "for. Do not continue the conversation, do not answer questions found in the transcript, and do not call "
    "tools."
)

#: The nine-section instruction, in our words, with the same instructions as Claude Code's compaction prompt.
CLAUDE_NINE_SECTION_INSTRUCTION = "\n".join((
    "Write a detailed summary of the conversation above so that the work can continue without it. Pay "
    "close attention to what the user explicitly asked for and to what was done in response. Capture the "
    "technical details, code patterns and design decisions someone would need to carry on the development"
    " work.",
    "",
    "Before the summary, think it through inside <analysis> tags. Go through the conversation in order "
    "and, for each part, note: the user's explicit requests and intent; how they were addressed; key "
    "decisions, technical concepts and code patterns; concrete details such as file names, full code "
    "snippets, function signatures and edits; errors met and how they were fixed; and any feedback from "
    "the user, above all where the user asked for something to be done differently. Then check your notes"
    " for technical accuracy and completeness.",
    "",
    "Then write the summary inside <summary> tags with exactly these nine sections:",
    "1. Primary Request and Intent: every explicit request and intent of the user, in detail.",
    "2. Key Technical Concepts: the important technical concepts, technologies and frameworks discussed.",
    "3. Files and Code Sections: the files and code sections examined, changed or created, with why each "
    "read or edit matters; give full snippets where they help, most of all for the latest messages.",
    "4. Errors and Fixes: every error met and how it was fixed, including the user's feedback on it.",
    "5. Problem Solving: the problems solved and any troubleshooting still under way.",
    "6. All User Messages: every user message that is not a tool result, listed; they show the user's "
    "feedback and how their intent changed.",
    "7. Pending Tasks: the tasks you were explicitly asked to do that are not finished.",
    "8. Current Work: precisely what was being worked on just before this summary, from the latest user "
    "and assistant messages, with file names and code snippets.",
    "9. Optional Next Step: the next step, only if it follows directly from the user's most recent "
    "explicit request and the work in progress; if the last task was finished, name a next step only if "
    "the user asked for it. Quote the latest messages verbatim to show exactly where the work stopped. Do"
    " not pick up side requests or old requests that were already done without asking the user first.",
    "",
    "Do not use any tools. Reply with the <summary> block only after your analysis.",
))

CLAUDE_HEADER = (
    "[{version}: the {n} earlier records of this session ({tokens} tokens) are summarised below{cleared}; "
    "the newest {tail} records follow verbatim. The originals stay in the session archive.]\n"
    "This session continues an earlier conversation that ran out of context. The summary below covers the "
    "earlier part of it."
)
CLAUDE_CONTINUE = ("Continue the conversation from where it stopped, without asking the user further questions: "
                   "carry on with the last task you were asked to do. The most recent messages follow verbatim.")

_LABEL = {"user": "User", "assistant": "Assistant", "reasoning": "Assistant reasoning",
          "tool_call": "Assistant tool call", "summary": "Previous summary", "system": "System"}


def flatten_head(records: Sequence[Record], clear: bool) -> tuple[str, int]:
    """The head as ``[Label]: text`` blocks; tool outputs cleared when `clear`. Returns (text, cleared)."""
    blocks, cleared = [], 0
    for r in records:
        if r.kind == "tool_output":
            label = "Tool error" if r.is_error else "Tool result"
            body = CLEARED_TOOL_RESULT if clear else r.text
            cleared += int(clear)
        elif r.kind == "user" and r.injected:
            label, body = "Injected context", r.text
        else:
            label, body = _LABEL.get(r.kind, "User"), r.text
        blocks.append(f"[{label}]: {body}")
    return "\n\n".join(blocks), cleared


_ANALYSIS_RE = re.compile(r"<analysis>.*?</analysis>", re.S)
_SUMMARY_RE = re.compile(r"<summary>(.*?)</summary>", re.S)


def strip_analysis(text: str) -> str:
    """Keep the ``<summary>`` block of a model's answer (drop ``<analysis>``), as Claude Code does."""
    m = _SUMMARY_RE.search(text)
    if m:
        return m.group(1).strip()
    return _ANALYSIS_RE.sub("", text).strip()


def _tail_start(records: Sequence[Record], sizes: Sequence[int], budget: int) -> int:
    """Smallest index i such that records[i:] fit `budget` and no tool output in them has its call before i."""
    pair = _call_of(records)
    best, total, need = len(records), 0, len(records)
    for i in range(len(records) - 1, -1, -1):
        total += sizes[i]
        if total > budget:
            break
        if pair[i] is not None:
            need = min(need, pair[i])
        if need >= i:
            best = i
    return best


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ClaudeCodeStyle:
    """Clear old tool results, summarise the head in nine sections, keep the recent tail verbatim."""

    name: str = "claude-code-style"
    algorithm_version: str = "claude-code-style-1"
    estimator: str = ESTIMATOR
    template: str = "claude-code-9"

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Claude Code's auto-compact threshold: ``W - min(O, 20,000) - 13,000``."""
        reserved = min(ctx.output_ceiling, int(ctx.param("reserved_output_cap", CLAUDE_RESERVED_OUTPUT_CAP)))
        return tokens >= ctx.window - reserved - int(ctx.param("autocompact_buffer", CLAUDE_AUTOCOMPACT_BUFFER))

    def header(self, n: int, tokens: int, cleared: int, tail: int, lost: int = 0) -> str:
        note = f", with {cleared} old tool results cleared first" if cleared else ""
        if lost:
            note += f" ({lost} later records were dropped unsummarised to make room)"
        return CLAUDE_HEADER.format(version=self.algorithm_version, n=n, tokens=tokens, cleared=note, tail=tail)

    def instruction(self, ctx: CompactionContext) -> str:
        """The nine-section instruction in use (``prompt_file`` overrides ours)."""
        return read_prompt(ctx.param("prompt_file", None), CLAUDE_NINE_SECTION_INSTRUCTION)

    def system_prompt(self, ctx: CompactionContext) -> str:
        """The summariser's system prompt in use (``system_prompt_file`` overrides ours)."""
        return read_prompt(ctx.param("system_prompt_file", None), CLAUDE_SUMMARY_SYSTEM)

    def request(self, head: Sequence[Record], ctx: CompactionContext, cap: int) -> tuple[SummaryRequest, int]:
        """The dedicated-shape summary request for `head`, and how many tool results it cleared."""
        clear = bool(ctx.param("clear_tool_results", True))
        transcript, cleared = flatten_head(head, clear)
        system, instruction = self.system_prompt(ctx), self.instruction(ctx)
        content = f"<conversation>\n{transcript}\n</conversation>\n\n{instruction}"
        req = SummaryRequest(
            strategy=self.name, shape="dedicated", system=system, tools=(),
            messages=({"role": "user", "content": content},), template=self.template,
            max_output_tokens=cap, source_entry_ids=tuple(dict.fromkeys(r.entry_id for r in head)),
        )
        return req, cleared

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        recs = _records(session, cut, ctx)
        n = len(recs)
        sizes = _sizes(recs, ctx)
        frame, frame_tokens = _frame(ctx)
        cap = _capacity(ctx)
        room = cap - frame_tokens
        tail_param = int(ctx.param("tail_tokens", CLAUDE_TAIL_TOKENS))
        summary_param = int(ctx.param("summary_tokens", CLAUDE_SUMMARY_TOKENS))
        # the tail never takes more than half the room, so a small window still leaves room for the summary
        start = _tail_start(recs, sizes, max(0, min(tail_param, room // 2)))
        head, tail, tail_sizes = recs[:start], recs[start:], sizes[start:]
        notes: dict[str, object] = {"tail_tokens_param": tail_param, "summary_tokens_param": summary_param,
                                    "summarised": len(head), "summarised_tokens": sum(sizes[:start]),
                                    "cleared_tool_results": 0, "unsummarised_dropped": []}
        segs = list(frame)
        req = receipt = None
        if head:
            reserve = _count(self.header(n, sum(sizes), n, n, n), ctx) + _count(CLAUDE_CONTINUE, ctx)
            summary_cap = max(0, min(summary_param, room - sum(tail_sizes) - reserve))
            req, cleared = self.request(head, ctx, summary_cap)
            text, receipt = self._summarise(req, ctx)
            s_tokens = _count(text, ctx)
            # a provider may overshoot its cap: give up the oldest tail records (whole, pairs kept), then
            # cut the summary; records given up are neither summarised nor kept, and the header says so
            lost: list[Record] = []
            while tail and s_tokens + sum(tail_sizes) + reserve > room:
                k = max(1, _tail_start(tail, tail_sizes, sum(tail_sizes) - 1))
                lost += tail[:k]
                tail, tail_sizes = tail[k:], tail_sizes[k:]
            if s_tokens + reserve > room and text:
                text = _truncate_tokens(text, room - reserve, ctx)
                notes["summary_truncated"] = True
            header = self.header(len(head), sum(sizes[:start]), cleared, len(tail), len(lost))
            stand_in = bool(getattr(ctx.summarizer, "stand_in", False)) and not receipt.fallback
            segs.append(Segment("header", "user", header))
            segs.append(Segment("summary", "user", text, tuple(dict.fromkeys(r.entry_id for r in head)),
                                label=STAND_IN_LABEL if stand_in else ""))
            segs.append(Segment("continue", "user", CLAUDE_CONTINUE))
            receipt = replace(receipt, text=text)
            notes.update({"cleared_tool_results": cleared, "summary_cap": summary_cap,
                          "unsummarised_dropped": [r.entry_id for r in lost],
                          "system_prompt_sha256": _sha(req.system),
                          "instruction_sha256": _sha(self.instruction(ctx))})
        segs += [_verbatim(r, "tail") for r in tail]
        used = frame_tokens + sum(counter(ctx.encoding).count_many([s.text for s in segs[2:]]))
        notes.update({"tail": len(tail), "tail_tokens_used": sum(tail_sizes), "tokens": used, "fits": used <= cap})
        return Projection(
            strategy=self.name, algorithm_version=self.algorithm_version, session_id=session.id, cut=cut,
            segments=tuple(segs), capacity=cap, estimator=self.estimator, summary_request=req, receipt=receipt,
            notes=notes,
        )

    def _summarise(self, req: SummaryRequest, ctx: CompactionContext) -> tuple[str, SummaryReceipt]:
        empty = empty_template(self.template)
        if req.max_output_tokens <= 0:
            prov = ctx.summarizer
            return "", SummaryReceipt(str(getattr(prov, "name", type(prov).__name__)),
                                      bool(getattr(prov, "stand_in", False)), "", req.fingerprint(),
                                      fallback=True, error="no room left for a summary")
        text, receipt = call_summarizer(ctx, req)
        if text is None:  # unavailable or failed: keep the empty template, the receipt says why
            return empty, replace(receipt, text=empty)
        text = strip_analysis(text)
        return text, replace(receipt, text=text)


def _truncate_tokens(text: str, n: int, ctx: CompactionContext) -> str:
    if n <= 0:
        return ""
    enc = counter(ctx.encoding).encoding
    ids = enc.encode_ordinary(text)
    if len(ids) <= n:
        return text
    return enc.decode(ids[: max(0, n - 1)], errors="replace").rstrip("\ufffd") + "…"


STRATEGIES = {
    s.name: s for s in (Full(), TruncateOldest(), ObservationMasking(), ClaudeCodeStyle())
}

__all__ = [
    "CLAUDE_NINE_SECTION_INSTRUCTION", "CLAUDE_SUMMARY_SYSTEM", "CLEARED_TOOL_RESULT", "ClaudeCodeStyle", "Full",
    "MASK_MARKER", "ObservationMasking", "STRATEGIES", "TruncateOldest", "flatten_head", "strip_analysis",
]
