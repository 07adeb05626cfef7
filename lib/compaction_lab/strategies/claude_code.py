"""``claude-code`` — Claude Code's compaction, **reconstructed** (its source is not public).

Claude Code (Anthropic's CLI agent, v2.x, ``services/compact/``) ships as a
minified bundle; there is no public repository to pin. Every rule below is
reconstructed from public analyses of that bundle and from Anthropic's own
documentation; ``strategies/UPSTREAM.md`` (section "Claude Code") lists each rule, the analysis it comes from and the
function here. Tables and figures label the arm ``claude-code (reconstructed)``
(``LABEL_TAG`` in the projection's notes, read by `anatomy.strategy_label`).
It replaces ``claude-code-style-1``, which sent a dedicated cold request,
cleared every tool result before summarising and kept an 8k verbatim tail —
none of which Claude Code does; hence ``claude-code-2``.

Rules (``claude-code-2``)
-------------------------
Trigger (`ClaudeCode.fires`, ``autoCompact.ts``)
    ``W - min(O, 20,000) - 13,000``: the effective window keeps room for the
    summary's output (at most 20,000 tokens) and auto-compact fires 13,000
    tokens below it. Parameters ``reserved_output_cap`` / ``autocompact_buffer``.
Estimator
    Claude Code counts with the API's reported usage; we count with the
    report tokenizer (``tiktoken``) as the stand-in for those counts. The
    re-attached files' total budget uses upstream's rough estimate
    (characters / 4, `base.est_chars4`).
Microcompact (`microcompact`, ``microCompact.ts``) — its own step, **off by default**
    Upstream clears the content of old results of the compactable tools
    (read, shell, grep, glob, web fetch / search, edit, write; MCP tools) to
    ``[Old tool result content cleared]``, keeping the most recent N, either
    server-side through cache edits or, when the prompt cache has gone cold
    (a long idle gap), in the messages themselves. It is not part of the
    summary step: the summariser sees the tool results the live history
    holds. We do not model idle time, so it runs only when the parameter
    ``microcompact_keep_recent`` (an int, N) is given; it then applies to the
    live history before the summary request is forked.
Summary request (`fork_request`, ``compact.ts`` ``streamCompactSummary``)
    It **forks the main conversation** (prompt-cache sharing on by default
    upstream): the session's own system prompt, the same tool definitions, the
    same messages as the session's previous request (records before the cut;
    `projection.chat_messages`: the blocks of one entry joined, each entry and tool result its own message,
    the system-prompt record itself sent as the system prompt), then the
    nine-section compact instruction (`NINE_SECTION_INSTRUCTION`, our words
    with upstream's instructions) as the last user message — shape
    ``prefix-shared``, so a prefix cache serves everything but the
    instruction. ``max_output_tokens`` = 20,000 (upstream's summary output
    limit; parameter ``summary_tokens``), never past the room left.
    Prompt too long (a documented parameter, ``ptl_retry``, off by default):
    upstream, when the API answers "prompt is too long", drops the oldest API
    rounds and retries (at most 3 times). Compacting on time (at
    ``W - 33,000``) the fork always fits, and our forced cuts may lie past the
    window (the default chains hold ≈130k report tokens in a 128k window)
    while the cost model assumes the session's previous request was sent and
    primed the cache — so by default the fork is sent whole, like that
    request. With ``ptl_retry=True`` the oldest turns are dropped while the
    fork's input exceeds ``W``; ``notes["ptl_dropped_turns"]`` counts them.
Summary (`format_summary`, ``prompt.ts`` ``formatCompactSummary``)
    The model's ``<analysis>`` scratch block is stripped; a ``<summary>``
    block becomes ``Summary:`` and its content. With provider ``none`` (or a
    failure) the summary is the empty nine-section template and the receipt
    says why (``fallback=True``).
Next request after compaction (``compact.ts`` ``buildPostCompactMessages``)
    The compact boundary is a transcript marker the API never sees
    (``notes["compact_boundary"]``); the next request holds, after system and
    tools: **one user message** — the continuation preface
    (`SUMMARY_PREFACE`, a ``header`` segment), the summary (``summary``), and
    for auto-compaction the instruction to carry on without asking
    (`CONTINUE_INSTRUCTION`, ``continue``) — then the re-attachments:
    up to 5 of the most recently read files (`recent_files`; newest first,
    each at most 5,000 tokens, 50,000 in all; a file over 5,000 tokens comes
    back as its path only — an ``omitted_marker``), each a ``header`` naming
    the file and its content as last read (``user_original``, role user,
    ``record_kind`` tool_output), and the todo list (the latest todo-tool
    call, a ``header``). **No verbatim tail**: nothing else of the history.
    Deviation (documented): upstream re-reads each file from disk, so it sees
    the file as it is now; we re-attach the output of its last read.
    CLAUDE.md / memory files are never re-attached (upstream re-injects them
    from disk with every request).
Room
    Upstream assumes a ≥200k window; here nothing is added past ``W - O``:
    the summary is capped by the room after the preface, re-attachments that
    no longer fit are left out (named in ``notes["reattach_dropped"]``).
Not modelled
    Session-memory compaction (experimental upstream), partial compaction,
    custom ``/compact`` instructions, hooks, skills and plan re-attachment,
    the transcript-path note of newer versions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from compaction_lab.core.fingerprints import sha256_text
from compaction_lab.core.projection import Projection, Segment, SummaryReceipt, SummaryRequest
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import counter
from compaction_lab.strategies.base import (
    CompactionContext,
    est_chars4,
    history,
    read_prompt,
    record_messages,
    summarize_or_template,
    summary_label,
)

ALGORITHM_VERSION = "claude-code-2"

#: Shown after the name in every table and figure: Claude Code's source is not public.
LABEL_TAG = "reconstructed"

SUMMARY_TOKENS = 20_000  # MAX_OUTPUT_TOKENS_FOR_SUMMARY
AUTOCOMPACT_BUFFER = 13_000  # AUTOCOMPACT_BUFFER_TOKENS
RESERVED_OUTPUT_CAP = 20_000  # reserved for the summary's output in the effective window
MAX_FILES_TO_RESTORE = 5  # POST_COMPACT_MAX_FILES_TO_RESTORE
MAX_TOKENS_PER_FILE = 5_000  # POST_COMPACT_MAX_TOKENS_PER_FILE
FILES_TOKEN_BUDGET = 50_000  # POST_COMPACT_TOKEN_BUDGET
CLEARED_TOOL_RESULT = "[Old tool result content cleared]"

TEMPLATE = "claude-code-9"
REQUEST_SHAPE = "prefix-shared"
ESTIMATOR = "tiktoken"

#: Tool names (lower case) whose results upstream re-attaches as files / clears in microcompact.
READ_TOOLS = frozenset({"read", "read_file", "readfile", "file_read", "view", "view_file"})
TODO_TOOLS = frozenset({"todowrite", "todo_write", "todo", "update_todos"})
COMPACTABLE_TOOLS = READ_TOOLS | frozenset(
    {
        "bash",
        "shell",
        "exec_command",
        "grep",
        "glob",
        "websearch",
        "web_search",
        "webfetch",
        "web_fetch",
        "edit",
        "edit_file",
        "multiedit",
        "write",
        "write_file",
    }
)
#: Files upstream never re-attaches (re-injected from disk with every request instead).
_NOT_RESTORED = re.compile(r"(^|/)(CLAUDE(\.local)?\.md|MEMORY\.md)$", re.I)

#: The compact instruction appended to the forked conversation (our words, upstream's instructions).
NINE_SECTION_INSTRUCTION = "\n".join(
    (
        "Reply with text only and do not call any tools: tool calls will be rejected, and this turn must "
        "produce the summary.",
        "",
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
    )
)

#: First part of the summary user message (our words for upstream's continuation preface).
SUMMARY_PREFACE = (
    "This session continues an earlier conversation that ran out of context. The summary "
    "below covers the earlier part of the conversation."
)
#: Last part of the summary user message on auto-compaction (our words).
CONTINUE_INSTRUCTION = (
    "Continue the conversation from where it stopped without asking the user any further "
    "questions. Resume directly: do not acknowledge the summary or recap what was happening; "
    "carry on with the last task you were asked to work on."
)
FILE_HEADER = "[Re-attached after compaction: {path} — its content when it was last read (entry {entry}).]"
FILE_REFERENCE = (
    "[{path} was read before the conversation was summarised, but it is too large to re-attach "
    "({tokens} tokens). Read it again if you need it.]"
)
TODO_HEADER = "[The todo list at compaction, as last written (entry {entry}):]\n{text}"


# --------------------------------------------------------------------------- helpers


def _count(text: str, ctx: CompactionContext) -> int:
    return counter(ctx.encoding).count(text)


def live_history(session: Session, cut: int, ctx: CompactionContext) -> list[Record]:
    """The records the session's next request would carry (the system-prompt record is the system prompt).

    After a compaction Claude Code's conversation restarts at the compact
    boundary: its next request holds the compact summary (the user message
    ``isCompactSummary``, imported as a ``summary`` record) and what came after
    it, never the messages before (``compact.ts`` ``buildPostCompactMessages``;
    the transcript keeps them only for the UI). So the live history starts at
    the latest ``summary`` record before the cut. A session from another agent
    is read the same way: its recorded compaction summary stands for Claude
    Code's summary message (the rule every arm follows for a foreign agent's
    compaction).
    """
    sp = ctx.shape.system_prompt
    recs = [r for r in history(session, cut) if not (r.kind == "system" and r.text == sp)]
    last = max((i for i, r in enumerate(recs) if r.kind == "summary"), default=None)
    return recs if last is None else recs[last:]


def is_compactable(tool: str | None) -> bool:
    """Whether microcompact may clear this tool's results (upstream's list, plus MCP tools)."""
    t = (tool or "").lower()
    return t in COMPACTABLE_TOOLS or t.startswith("mcp__")


def microcompact(records: Sequence[Record], keep_recent: int) -> tuple[list[Record], int]:
    """Clear the content of every compactable tool result but the `keep_recent` newest.

    Returns the records (cleared ones replaced by a copy whose text is
    `CLEARED_TOOL_RESULT`) and how many were cleared. The originals are untouched.
    """
    idx = [i for i, r in enumerate(records) if r.kind == "tool_output" and is_compactable(r.tool)]
    clear = set(idx[: max(0, len(idx) - max(0, keep_recent))])
    out = [replace(r, text=CLEARED_TOOL_RESULT) if i in clear else r for i, r in enumerate(records)]
    return out, len(clear)


def _messages(records: Sequence[Record]) -> list[dict[str, str]]:
    """The records as the session's own request sends them.

    The one rule the cost model prices the session's previous request by
    (`cost.model`), so the fork carries the very same messages by construction.
    """
    return [dict(m) for m in record_messages(records)]


def _turn_starts(records: Sequence[Record]) -> list[int]:
    """Indices where an API round starts (a real user message), the first record always."""
    starts = [i for i, r in enumerate(records) if r.kind == "user" and not r.injected]
    return sorted({0, *starts}) if records else []


_ANALYSIS_RE = re.compile(r"<analysis>.*?</analysis>", re.S)
_SUMMARY_RE = re.compile(r"<summary>(.*?)</summary>", re.S)


def format_summary(text: str) -> str:
    """Upstream's formatting of the model's answer: ``<analysis>`` dropped, ``<summary>`` → ``Summary:``."""
    out = _ANALYSIS_RE.sub("", text)
    m = _SUMMARY_RE.search(out)
    if m:
        out = out[: m.start()] + "Summary:\n" + m.group(1).strip() + out[m.end() :]
    return re.sub(r"\n\n+", "\n\n", out).strip()


def _target(rec: Record, calls: dict[str, Record]) -> str | None:
    if rec.target:
        return rec.target
    call = calls.get(rec.call_id or "")
    return call.target if call is not None else None


def recent_files(records: Sequence[Record], max_files: int = MAX_FILES_TO_RESTORE) -> list[tuple[str, Record]]:
    """The most recently read files, newest first: (path, the output of its last read), at most `max_files`."""
    calls = {r.call_id: r for r in records if r.kind == "tool_call" and r.call_id}
    seen: set[str] = set()
    out: list[tuple[str, Record]] = []
    for r in reversed(records):
        if len(out) >= max_files:
            break
        if r.kind != "tool_output" or r.is_error or (r.tool or "").lower() not in READ_TOOLS:
            continue
        path = _target(r, calls)
        if not path or path in seen or _NOT_RESTORED.search(path):
            continue
        seen.add(path)
        out.append((path, r))
    return out


def latest_todo(records: Sequence[Record]) -> Record | None:
    """The latest todo-tool call (its arguments are the todo list as last written)."""
    return next((r for r in reversed(records) if r.kind == "tool_call" and (r.tool or "").lower() in TODO_TOOLS), None)


def _truncate_tokens(text: str, n: int, ctx: CompactionContext) -> str:
    if n <= 0:
        return ""
    enc = counter(ctx.encoding).encoding
    ids = enc.encode_ordinary(text)
    if len(ids) <= n:
        return text
    return enc.decode(ids[: max(0, n - 1)], errors="replace").rstrip("\ufffd") + "…"


# --------------------------------------------------------------------------- the strategy


@dataclass(frozen=True)
class ClaudeCode:
    """Claude Code's compaction, reconstructed: a forked nine-section summary, re-attached files, no tail."""

    name: str = "claude-code"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = ESTIMATOR
    template: str = TEMPLATE
    label_tag: str = LABEL_TAG

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Claude Code's auto-compact threshold: ``W - min(O, 20,000) - 13,000``."""
        reserved = min(ctx.output_ceiling, int(ctx.param("reserved_output_cap", RESERVED_OUTPUT_CAP)))
        return tokens >= ctx.window - reserved - int(ctx.param("autocompact_buffer", AUTOCOMPACT_BUFFER))

    def instruction(self, ctx: CompactionContext) -> str:
        """The nine-section compact instruction in use (``prompt_file`` points at exact upstream text)."""
        return read_prompt(ctx.param("prompt_file", None), NINE_SECTION_INSTRUCTION)

    def fork_request(self, records: Sequence[Record], ctx: CompactionContext, cap: int) -> SummaryRequest:
        """The summary request: the main conversation forked, the instruction appended as the last user message."""
        messages = _messages(records) + [{"role": "user", "content": self.instruction(ctx)}]
        return SummaryRequest(
            strategy=self.name,
            shape=REQUEST_SHAPE,
            system=ctx.shape.system_prompt,
            tools=tuple(ctx.shape.tools),
            messages=tuple(messages),
            template=self.template,
            max_output_tokens=cap,
            source_entry_ids=tuple(dict.fromkeys(r.entry_id for r in records)),
        )

    def _fit_fork(self, records: list[Record], ctx: CompactionContext, cap: int) -> tuple[SummaryRequest, int]:
        """The forked request, its oldest turns dropped while it does not fit the window (prompt too long)."""
        cnt = counter(ctx.encoding)
        frame = cnt.count(ctx.shape.system_prompt) + cnt.count(ctx.shape.tools_text())
        limit = ctx.window  # "prompt is too long": the input alone past the context window
        sizes = cnt.count_many([r.text for r in records])
        instr = cnt.count(self.instruction(ctx))
        total = frame + sum(sizes) + instr
        starts = _turn_starts(records)
        dropped, k = 0, 0
        while bool(ctx.param("ptl_retry", False)) and total > limit and k + 1 < len(starts):
            k += 1
            total -= sum(sizes[starts[k - 1] : starts[k]])
            dropped += 1
        kept = records[starts[k] :] if dropped else records
        return self.fork_request(kept, ctx, cap), dropped

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        recs = live_history(session, cut, ctx)
        notes: dict[str, Any] = {
            "label_tag": self.label_tag,
            "summarised": len(recs),
            "microcompact_cleared": 0,
            "ptl_dropped_turns": 0,
            "reattached_files": [],
            "reattach_dropped": [],
            "todo_entry": None,
        }
        keep_recent = ctx.param("microcompact_keep_recent", None)
        if keep_recent is not None:
            recs, n_cleared = microcompact(recs, int(keep_recent))
            notes["microcompact_cleared"] = n_cleared
        cnt = counter(ctx.encoding)
        segs = [
            Segment("system", "system", ctx.shape.system_prompt),
            Segment("tools", "system", ctx.shape.tools_text()),
        ]
        frame_tokens = sum(cnt.count_many([s.text for s in segs]))
        cap = ctx.window - ctx.output_ceiling
        room = cap - frame_tokens
        req = receipt = None
        if recs:
            reserve = cnt.count(SUMMARY_PREFACE) + cnt.count(CONTINUE_INSTRUCTION)
            summary_cap = max(0, min(int(ctx.param("summary_tokens", SUMMARY_TOKENS)), room - reserve))
            req, notes["ptl_dropped_turns"] = self._fit_fork(recs, ctx, summary_cap)
            text, receipt = self._summarise(req, ctx)
            if cnt.count(text) > room - reserve:  # a provider overshot its cap
                text = _truncate_tokens(text, room - reserve, ctx)
                notes["summary_truncated"] = True
            receipt = replace(receipt, text=text)
            # one user message: the preface, the summary, the instruction to carry on
            segs.append(Segment("header", "user", SUMMARY_PREFACE, message="compact-summary"))
            # Labelled as every arm labels its summary: the stand-in, the provider, or the empty template.
            segs.append(
                Segment(
                    "summary",
                    "user",
                    text,
                    req.source_entry_ids,
                    message="compact-summary",
                    label=summary_label(receipt, "empty template (no summary)"),
                )
            )
            segs.append(Segment("continue", "user", CONTINUE_INSTRUCTION, message="compact-summary"))
            used = sum(cnt.count_many([s.text for s in segs[2:]]))
            segs += self._reattach(recs, ctx, room - used, notes)
            notes.update(
                {
                    "summary_cap": summary_cap,
                    "instruction_sha256": sha256_text(self.instruction(ctx)),
                    "compact_boundary": {
                        "trigger": "auto",
                        "pre_tokens": sum(cnt.count_many([r.text for r in recs])),
                        "last_entry": recs[-1].entry_id,
                    },
                }
            )
        tokens = frame_tokens + sum(cnt.count_many([s.text for s in segs[2:]]))
        notes.update({"tokens": tokens, "fits": tokens <= cap})
        return Projection(
            strategy=self.name,
            algorithm_version=self.algorithm_version,
            session_id=session.id,
            cut=cut,
            segments=tuple(segs),
            capacity=cap,
            estimator=self.estimator,
            summary_request=req,
            receipt=receipt,
            notes=notes,
        )

    def _reattach(
        self, recs: Sequence[Record], ctx: CompactionContext, room: int, notes: dict[str, Any]
    ) -> list[Segment]:
        """Re-attached recent files (newest first) and the todo list, within upstream's budgets and `room`."""
        cnt = counter(ctx.encoding)
        todo = latest_todo(recs)
        todo_seg = None
        if todo is not None:
            todo_seg = Segment(
                "header",
                "user",
                TODO_HEADER.format(entry=todo.entry_id, text=todo.text),
                (todo.entry_id,),
                message="todo",
            )
            t = cnt.count(todo_seg.text)
            if t <= room:
                room -= t
                notes["todo_entry"] = todo.entry_id
            else:
                notes["reattach_dropped"].append(todo.entry_id)
                todo_seg = None
        out: list[Segment] = []
        budget = int(ctx.param("reattach_token_budget", FILES_TOKEN_BUDGET))
        per_file = int(ctx.param("reattach_tokens_per_file", MAX_TOKENS_PER_FILE))
        max_files = int(ctx.param("reattach_max_files", MAX_FILES_TO_RESTORE))
        rough = 0
        for path, rec in recent_files(recs, max_files):
            size = cnt.count(rec.text)
            if size > per_file:
                segs = [
                    Segment(
                        "omitted_marker",
                        "user",
                        FILE_REFERENCE.format(path=path, tokens=size),
                        (rec.entry_id,),
                        message=f"file:{path}",
                        record_kind=rec.kind,
                    )
                ]
            else:  # one attachment message per file: the header naming it, then its content
                segs = [
                    Segment(
                        "header",
                        "user",
                        FILE_HEADER.format(path=path, entry=rec.entry_id),
                        (rec.entry_id,),
                        message=f"file:{path}",
                    ),
                    Segment(
                        "user_original", "user", rec.text, (rec.entry_id,), message=f"file:{path}", record_kind=rec.kind
                    ),
                ]
            est = sum(est_chars4(s.text) for s in segs)  # upstream's rough estimate of the attachment
            need = sum(cnt.count_many([s.text for s in segs]))
            if rough + est > budget or need > room:
                notes["reattach_dropped"].append(rec.entry_id)
                continue
            rough += est
            room -= need
            out += segs
            notes["reattached_files"].append(path)
        return out + ([todo_seg] if todo_seg is not None else [])

    def _summarise(self, req: SummaryRequest, ctx: CompactionContext) -> tuple[str, SummaryReceipt]:
        text, receipt = summarize_or_template(ctx, req)
        if receipt.fallback:  # no room, unavailable or failed: the empty template, the receipt says why
            return text, receipt
        text = format_summary(text)
        return text, replace(receipt, text=text)


STRATEGIES = {s.name: s for s in (ClaudeCode(),)}

__all__ = [
    "ALGORITHM_VERSION",
    "CLEARED_TOOL_RESULT",
    "CONTINUE_INSTRUCTION",
    "ClaudeCode",
    "LABEL_TAG",
    "NINE_SECTION_INSTRUCTION",
    "STRATEGIES",
    "SUMMARY_PREFACE",
    "format_summary",
    "latest_todo",
    "live_history",
    "microcompact",
    "recent_files",
]
