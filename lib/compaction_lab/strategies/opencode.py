"""OpenCode (sst/opencode 1.18.x): summarise the head, keep a verbatim tail of whole user turns.

The rules, as STRATEGIES.md states them:

Trigger
    `opencode_trigger`: ``usable = limit.input - reserved`` when the model
    declares an input limit (``reserved = min(20,000, maxOutput)``), else
    ``context - maxOutput`` with ``maxOutput = min(limit.output, 32,000)``;
    compact when usage >= usable.

Estimator (``chars/4``)
    ``round(chars / 4)`` of a record's text (`base.est_chars4`).

Live context
    Records after the latest ``summary`` record before the cut (an earlier
    compaction's summary) are the live conversation; records before it were
    already compacted and are neither re-summarised nor kept (upstream stops
    at the previous summary message the same way). That summary is the
    *previous summary* merged into the new one.

Prune (param ``prune``, default False as upstream)
    Walking the live records newest first, skipping everything in the last 2
    user turns, sum the estimates of completed tool outputs (not errors, not
    the protected ``skill`` tool); once the sum passes 40,000 (``prune_protect``)
    every further output is a candidate. If the candidates total more than
    20,000 (``prune_minimum``) they are pruned: their text renders as
    ``[Old tool result content cleared]`` both in the transcript the
    summariser sees and in the tail (there as an ``omitted_marker`` segment
    with the output's entry id, since the text is no longer verbatim).

Projection (next request)
    1. ``system`` and ``tools`` segments (the session's own shape is re-sent).
    2. ``header``: a user message "what did we do so far?".
    3. ``summary``: the summary as assistant text. With provider ``none`` (or a
       failed call) it is the empty template, every section "(none)"
       (`EMPTY_SUMMARY`); the receipt says fallback and why.
    4. ``tail``: the newest whole user turns (a user record and everything
       after it) whose estimates fit ``opencode_tail_budget(usable)`` =
       ``min(15,000, max(2,000, floor(usable / 4)))`` (param ``tail_tokens``
       overrides). The first turn that does not fit may be split at a later
       message whose suffix fits: the largest such suffix is kept. A split
       point is a message boundary (a record whose entry id differs from the
       previous record's), never a tool output and never between a tool call
       and its output. No tail if nothing fits. Records before the first user
       record of the live context are never tail.
    5. ``continue`` (auto compaction, param ``auto`` default True): a synthetic
       user message asking to continue or to ask for clarification.

Summary request (shape ``dedicated``)
    A dedicated summarisation system prompt (`SYSTEM_PROMPT`), no tools, one
    user message: the head flattened to text blocks in a ``<conversation>``
    tag -- opened by a ``[Previous summary]: ...`` block when there is one --
    then `MERGE_INSTRUCTIONS` (only with a previous summary), `INSTRUCTIONS`
    and the Markdown `TEMPLATE`. Blocks: ``[User]: ...``, ``[Assistant]: ...``, ``[Assistant reasoning]:
    ...``, ``[Assistant tool call]: tool(json)``, ``[Tool result]: ...`` (cut
    at 2,000 characters with a truncation note), ``[Tool error]: ...``;
    ``system`` records are not part of the conversation. Template
    ``opencode-template``. Upstream sets no separate cap on the summary;
    ``max_output_tokens`` is param ``summary_tokens`` (default 4,096), never
    above OpenCode's ``maxOutput``. The spec gives no rule for a request that
    overflows the model; none is invented: ``notes["request_tokens_est"]`` and
    ``notes["request_over_usable"]`` record its size.

Prompts are our own paraphrases; params ``system_prompt_file`` and
``prompt_file`` (instructions + template) point at files with exact upstream
text. `OpenCodeStrategy.prompts` returns the texts in use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..projection import Projection, Segment, SummaryRequest
from ..session import Record, Session
from .base import CompactionContext, call_summarizer, est_chars4, history, read_prompt, role_of, summary_label
from .trigger import SUMMARY_TOKENS, opencode_tail_budget, opencode_trigger

ALGORITHM_VERSION = "opencode-1.18"

PRUNE_PROTECT = 40_000
PRUNE_MINIMUM = 20_000
PRUNE_PROTECTED_TOOLS = frozenset({"skill"})
PRUNED_TEXT = "[Old tool result content cleared]"

#: Tool results longer than this are cut in the flattened transcript.
TOOL_RESULT_CHARS = 2_000

#: The user message opening the compacted history (as the spec quotes it).
HEADER = "what did we do so far?"

#: Our paraphrase of OpenCode's synthetic continue message.
CONTINUE = ("Carry on with the next steps if there are any. If you are not sure how to proceed, "
            "stop and ask for clarification.")

#: Our paraphrase of OpenCode's dedicated compaction system prompt.
SYSTEM_PROMPT = (
    "You write summaries of coding-agent conversations so that another assistant can pick the "
    "work up. Your only job is to summarise: follow the requested structure exactly, keep every "
    "section of it, and do not answer, act on or continue the conversation yourself."
)

#: The Markdown template the summary must follow.
TEMPLATE = """## Objective
- <what the user is trying to achieve>

## Important Details
- <constraints, preferences, decisions and facts that must not be lost>

## Work State

### Completed
- <done>

### Active
- <in progress>

### Blocked
- <blocked, and on what>

## Next Move
- <the next concrete step>

## Relevant Files
- <path: why it matters>"""

#: Our paraphrase of the instructions that come with the template.
INSTRUCTIONS = (
    "Summarise the conversation above using exactly the Markdown template below. Keep every "
    "section, and write \"(none)\" under any section that has nothing to report. Use terse bullet "
    "points. Preserve exact file paths, symbols, commands, error strings and identifiers."
)

#: Extra instruction when an earlier summary exists.
MERGE_INSTRUCTIONS = (
    "The conversation opens with the summary of everything before it ([Previous summary]). Merge "
    "it with the new conversation into one updated summary: keep what still holds, update what changed."
)

#: The summary when no provider writes one: the template with every section empty.
EMPTY_SUMMARY = """## Objective
(none)

## Important Details
(none)

## Work State

### Completed
(none)

### Active
(none)

### Blocked
(none)

## Next Move
(none)

## Relevant Files
(none)"""

#: Headings every summary keeps, in order.
SECTIONS = ("## Objective", "## Important Details", "## Work State", "### Completed", "### Active",
            "### Blocked", "## Next Move", "## Relevant Files")


# --------------------------------------------------------------------------- flattening


def tool_call_text(record: Record) -> str:
    """``tool(json)``: the tool name and its arguments as JSON.

    Records keep a call as ``"name {json args}"``; the leading tool name is
    stripped from the text when present.
    """
    tool = record.tool or "tool"
    args = record.text.strip()
    if record.tool and args.startswith(record.tool):
        args = args[len(record.tool):].strip()
    if not args:
        args = "{}"
    else:
        try:
            args = json.dumps(json.loads(args), ensure_ascii=False)
        except ValueError:
            pass  # not JSON: keep the recorded text
    return f"{tool}({args})"


def cut_tool_result(text: str, limit: int = TOOL_RESULT_CHARS) -> str:
    """A tool result cut at `limit` characters, with a note saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... truncated: {len(text) - limit} more characters]"


def flatten_record(record: Record, pruned: bool = False) -> str | None:
    """One transcript block for a record (None for records that are not conversation)."""
    k = record.kind
    if k == "user":
        return f"[User]: {record.text}"
    if k == "assistant":
        return f"[Assistant]: {record.text}"
    if k == "reasoning":
        return f"[Assistant reasoning]: {record.text}"
    if k == "tool_call":
        return f"[Assistant tool call]: {tool_call_text(record)}"
    if k == "tool_output":
        if record.is_error:
            return f"[Tool error]: {record.text}"
        return f"[Tool result]: {PRUNED_TEXT if pruned else cut_tool_result(record.text)}"
    if k == "summary":  # an earlier summary inside the head (only the latest is merged separately)
        return f"[Assistant]: {record.text}"
    return None


def flatten(records: Sequence[Record], pruned: frozenset[int] = frozenset(),
            previous: Record | None = None) -> str:
    """The head as ``<conversation>`` text blocks, the previous summary (if any) first."""
    blocks = [f"[Previous summary]: {previous.text}"] if previous is not None else []
    blocks += [b for r in records if (b := flatten_record(r, r.source_order in pruned)) is not None]
    return "<conversation>\n" + "\n\n".join(blocks) + "\n</conversation>"


def request_text(records: Sequence[Record], previous: Record | None, pruned: frozenset[int],
                 instructions: str = INSTRUCTIONS + "\n\n" + TEMPLATE) -> str:
    """The one user message of the summary request."""
    parts = [flatten(records, pruned, previous)]
    if previous is not None:
        parts.append(MERGE_INSTRUCTIONS)
    parts.append(instructions)
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- prune


def prune_set(records: Sequence[Record], protect: int = PRUNE_PROTECT, minimum: int = PRUNE_MINIMUM) -> frozenset[int]:
    """Source orders of tool outputs OpenCode's prune clears (empty when it would save too little)."""
    turns = 0
    total = pruned = 0
    candidates: list[int] = []
    for r in reversed(records):
        if r.kind == "user":
            turns += 1
        if turns < 2:
            continue
        if r.kind == "summary":
            break
        if r.kind != "tool_output" or r.is_error or (r.tool in PRUNE_PROTECTED_TOOLS):
            continue
        n = est_chars4(r.text)
        total += n
        if total > protect:
            pruned += n
            candidates.append(r.source_order)
    return frozenset(candidates) if pruned > minimum else frozenset()


# --------------------------------------------------------------------------- tail


def _split_points(turn: Sequence[Record]) -> list[bool]:
    """``ok[j]``: the turn may be split before record ``j`` (j >= 1)."""
    n = len(turn)
    ok = [False] * n
    call_at: dict[str, int] = {}
    blocked = [0] * (n + 1)  # difference array: a call at i with output at o blocks splits in (i, o]
    for j, r in enumerate(turn):
        if r.kind == "tool_call" and r.call_id:
            call_at.setdefault(r.call_id, j)
        elif r.kind == "tool_output" and r.call_id and r.call_id in call_at:
            blocked[call_at[r.call_id] + 1] += 1
            blocked[j + 1] -= 1
    depth = 0
    for j in range(n):
        depth += blocked[j]
        if j == 0:
            continue
        ok[j] = (depth == 0 and turn[j].kind != "tool_output"
                 and turn[j].entry_id != turn[j - 1].entry_id)
    return ok


def select_tail(records: Sequence[Record], sizes: Sequence[int], budget: int) -> tuple[int, dict[str, Any]]:
    """Index in `records` where the tail starts (``len(records)`` for no tail) and facts about it.

    Whole user turns newest first while they fit; the first turn that does not
    fit may contribute its largest suffix that starts at a valid split point
    and fits the remaining budget.
    """
    starts = [i for i, r in enumerate(records) if r.kind == "user"]
    remaining = budget
    start = len(records)
    info: dict[str, Any] = {"tail_whole_turns": 0, "tail_split": None}
    ends = starts[1:] + [len(records)]
    for s, e in reversed(list(zip(starts, ends))):
        t = sum(sizes[s:e])
        if t <= remaining:
            remaining -= t
            start = s
            info["tail_whole_turns"] += 1
            continue
        ok = _split_points(records[s:e])
        suffix = 0
        best = None
        for j in range(e - 1, s, -1):
            suffix += sizes[j]
            if suffix > remaining:
                break
            if ok[j - s]:
                best = j
        if best is not None:
            info["tail_split"] = {"turn_start": records[s].entry_id, "split_at": records[best].entry_id}
            remaining -= sum(sizes[best:e])
            start = best
        break
    info["tail_tokens"] = budget - remaining
    return start, info


# --------------------------------------------------------------------------- strategy


@dataclass(frozen=True)
class OpenCodeStrategy:
    """OpenCode's compaction (see module docstring)."""

    name: str = "opencode"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = "chars/4"

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """OpenCode's own trigger: usage has reached ``usable``."""
        return opencode_trigger(ctx.window, ctx.output_ceiling, ctx.input_limit).fires(tokens)

    def prompts(self, ctx: CompactionContext) -> Mapping[str, str]:
        """The prompt texts in use (paraphrases, or the files the params point at)."""
        sysf, instf = ctx.param("system_prompt_file", None), ctx.param("prompt_file", None)
        return {
            "system": read_prompt(sysf, SYSTEM_PROMPT),
            "instructions": read_prompt(instf, INSTRUCTIONS + "\n\n" + TEMPLATE),
            "merge": MERGE_INSTRUCTIONS, "header": HEADER, "continue": CONTINUE,
            "empty_summary": EMPTY_SUMMARY,
        }

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        prompts = self.prompts(ctx)
        trig = opencode_trigger(ctx.window, ctx.output_ceiling, ctx.input_limit)
        recs = history(session, cut)

        # Live context: after the latest earlier summary.
        last_summary = max((i for i, r in enumerate(recs) if r.kind == "summary"), default=None)
        previous = recs[last_summary] if last_summary is not None else None
        live = recs[last_summary + 1:] if last_summary is not None else recs

        pruned = prune_set(live, int(ctx.param("prune_protect", PRUNE_PROTECT)),
                           int(ctx.param("prune_minimum", PRUNE_MINIMUM))) if ctx.param("prune", False) else frozenset()
        sizes = [est_chars4(PRUNED_TEXT if r.source_order in pruned else r.text) for r in live]
        budget = int(ctx.param("tail_tokens", opencode_tail_budget(trig.usable)))
        start, tail_info = select_tail(live, sizes, budget)
        head, tail = live[:start], live[start:]

        cap = max(1, min(int(ctx.param("summary_tokens", SUMMARY_TOKENS)), trig.max_output))
        source = ([previous] if previous is not None else []) + list(head)
        request = SummaryRequest(
            strategy=self.name, shape="dedicated", system=prompts["system"], tools=(),
            messages=({"role": "user", "content": request_text(head, previous, pruned, prompts["instructions"])},),
            template="opencode-template", max_output_tokens=cap,
            source_entry_ids=tuple(dict.fromkeys(r.entry_id for r in source if r.kind != "system")),
        )
        req_est = est_chars4(request.system) + est_chars4(request.messages[0]["content"])
        text, receipt = call_summarizer(ctx, request)
        body = (text or "").strip()
        if receipt.fallback:
            body, label = prompts["empty_summary"], "empty template (no summary)"
        elif not body:
            body, label = prompts["empty_summary"], "empty template (empty answer)"
        else:
            label = summary_label(receipt, "empty template (no summary)")

        segments = [Segment("system", "system", ctx.shape.system_prompt),
                    Segment("tools", "system", ctx.shape.tools_text()),
                    Segment("header", "user", prompts["header"], label="opencode compaction header"),
                    Segment("summary", "assistant", body, label=label)]
        for r in tail:
            if r.source_order in pruned:
                segments.append(Segment("omitted_marker", role_of(r), PRUNED_TEXT, (r.entry_id,),
                                        record_kind=r.kind, label="pruned tool output"))
            else:
                segments.append(Segment("tail", role_of(r), r.text, (r.entry_id,), record_kind=r.kind))
        auto = bool(ctx.param("auto", True))
        if auto:
            segments.append(Segment("continue", "user", prompts["continue"], label="opencode auto-continue"))

        notes = {
            "usable": trig.usable, "max_output": trig.max_output, "reserved": trig.reserved,
            "tail_budget": budget, **tail_info,
            "tail_records": len(tail), "head_records": len(head),
            "previous_summary": previous.entry_id if previous is not None else None,
            "already_compacted_records": (last_summary or 0) if previous is not None else 0,
            "prune": bool(ctx.param("prune", False)), "pruned_outputs": len(pruned),
            "pruned_tokens": sum(est_chars4(r.text) for r in live if r.source_order in pruned),
            "auto": auto,
            # the spec gives OpenCode no rule for a compaction request that overflows: we only record it
            "request_tokens_est": req_est, "request_over_usable": req_est > trig.usable,
        }
        return Projection(self.name, self.algorithm_version, session.id, cut, tuple(segments), trig.usable,
                          self.estimator, request, receipt, notes)


STRATEGY = OpenCodeStrategy()
STRATEGIES = {STRATEGY.name: STRATEGY}

__all__ = ["ALGORITHM_VERSION", "CONTINUE", "EMPTY_SUMMARY", "HEADER", "INSTRUCTIONS", "OpenCodeStrategy",
           "PRUNED_TEXT", "STRATEGIES", "SYSTEM_PROMPT", "TEMPLATE", "flatten", "flatten_record", "prune_set",
           "select_tail"]
