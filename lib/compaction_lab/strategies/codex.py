"""Codex (openai/codex, local compaction path): keep real user messages, drop the rest, add a summary.

Pinned to Codex's *local* compaction path (its hosted remote compaction needs
the vendor backend). The rules, as STRATEGIES.md states them:

Trigger
    `codex_trigger`: 90% of the window (auto-compact limit), hard cap 95%.

Estimator (``bytes/4``)
    ``ceil(UTF-8 bytes / 4)`` per item. Upstream sizes an item by its
    serialized JSON; we size a record (and a chat message) by its *text*, the
    only form a `Record` keeps, so our estimate is a few tokens lower per item
    (no JSON keys / quoting).

Projection (next request)
    1. ``system`` and ``tools`` segments first: the initial context is re-sent.
    2. Real user messages only: ``kind == "user"`` records that are neither
       ``injected`` nor open with a known injected-context block
       (``ingest.base.is_injected``: ``# AGENTS.md instructions``,
       ``<environment_context>``, ``<user_instructions>``, ...) nor open with
       the summary prefix of an earlier Codex-style compaction. Earlier
       summaries (``summary`` records) are never user messages.
    3. Walked newest -> oldest with a 20,000-token budget (param
       ``user_budget_tokens``): a message is kept whole while it fits; the
       first that does not fit is kept middle-truncated -- half the remaining
       budget (in bytes, ``remaining * 4 / 2``) from its head, half from its
       tail, cut on UTF-8 character boundaries, with the marker
       ``…N tokens truncated…`` (N = bytes/4 estimate of the removed middle)
       between -- and the walk stops (it also stops when the budget is used up
       exactly). Chronological order is restored. Whole messages become
       ``user_original`` segments; the truncated one becomes three segments,
       ``user_original`` (head, a verbatim prefix), ``omitted_marker`` (the
       marker), ``user_original`` (tail, a verbatim suffix), all carrying the
       message's entry id -- so every non-authored segment stays verbatim.
    4. The summary as a **user-role** ``summary`` segment: `SUMMARY_PREFIX`, a
       newline, then the summary text, or ``(no summary available)`` when the
       provider gave none (provider ``none``, failure, empty answer).
    5. Assistant messages, reasoning, tool calls and tool outputs are dropped.

    Decision where the spec is silent: if the window is so small that the
    20,000-token budget plus system, tools and summary would overflow the
    auto-compact limit, the user budget is lowered to the room left (param
    ``fit_window``, default True; set False for the unclamped upstream rule).
    With the defaults (128k window) the clamp never binds.

Summary request (shape ``history+instruction``)
    System = the session's base instructions (``ctx.shape.system_prompt``), no
    tool definitions, messages = the whole history before the cut as chat
    messages (each record's text with its `role_of` role, consecutive
    same-role records joined into one message as `Projection.messages` does;
    a ``system`` record equal to the base instructions is not repeated) plus
    `COMPACT_INSTRUCTION` as a separate, final user message; template ``codex-handoff``. If the request
    would overflow -- its bytes/4 estimate exceeds ``window -
    max_output_tokens`` -- the oldest history item is dropped (with its tool
    call / output partner, as upstream does) and the request retried; we
    compute the fitting request directly and record the number of dropped
    items in ``notes["request_dropped_items"]``.

    Upstream sets no separate cap on the summary; ``max_output_tokens`` is
    param ``summary_tokens`` (default 4,096),
    never above the model's output ceiling.

    Upstream's local request carries **no tool definitions** while every
    regular turn does, so under a prefix cache it shares only the base
    instructions with the session's previous request (reported upstream as
    openai/codex#37305: the whole window re-billed uncached on every
    compaction). Param ``summary_tools`` (default False, faithful) set True
    sends the session's tool definitions with the request instead -- the fix
    that issue proposes, and what Codex's remote path sends -- so the cost
    notebook can show what the omission costs. It changes nothing but the
    request's ``tools``.

Prompts are our own paraphrases of the upstream instructions; point params
``prompt_file`` (instruction) and ``summary_prefix_file`` at files holding the
exact upstream text to use it instead. `CodexStrategy.prompts` returns the
texts in use (for ``verify`` fingerprints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..ingest.base import is_injected
from ..projection import Projection, Segment, SummaryReceipt, SummaryRequest
from ..session import Record, Session
from .base import CompactionContext, call_summarizer, est_bytes4, history, read_prompt, role_of, summary_label
from .trigger import SUMMARY_TOKENS, codex_trigger

ALGORITHM_VERSION = "codex-local-1"

#: Budget for the user messages carried over (Codex's 20,000-token rule).
USER_BUDGET_TOKENS = 20_000

#: Tokens kept free for the truncation marker when the user budget is clamped.
MARKER_SLACK = 16

#: Our paraphrase of Codex's compaction instruction (appended as the last user message).
COMPACT_INSTRUCTION = (
    "This is a context checkpoint: the conversation is being compacted. Write a handoff summary "
    "for another language model that will pick up this task where it stops now. Cover:\n"
    "- the progress made so far and the key decisions taken;\n"
    "- important context, constraints and the user's preferences;\n"
    "- what is left to do, as clear next steps;\n"
    "- any critical data, examples or references needed to carry on.\n"
    "Keep it concise and structured, and aim it at letting the next model continue the work "
    "without interruption."
)

#: Our paraphrase of Codex's summary prefix (opens the user-role summary message).
SUMMARY_PREFIX = (
    "A different language model began working on this task and wrote the summary below of what "
    "it did. The tools it used are still in the state it left them. Build on its work instead of "
    "repeating it; its summary follows:"
)

NO_SUMMARY = "(no summary available)"


def truncation_marker(tokens: int) -> str:
    """The marker between the kept head and tail of a middle-truncated message."""
    return f"…{tokens} tokens truncated…"


def middle_truncate(text: str, budget_tokens: int) -> tuple[str, str, int]:
    """Keep half of ``budget_tokens * 4`` bytes from the head and half from the tail.

    Cuts fall on UTF-8 character boundaries, so head and tail are verbatim
    prefix and suffix of `text`. Returns ``(head, tail, removed_tokens)`` with
    the removed middle sized by the bytes/4 estimate.
    """
    raw = text.encode("utf-8")
    max_bytes = max(0, budget_tokens) * 4
    if len(raw) <= max_bytes:
        return text, "", 0
    head_bytes = max_bytes // 2
    tail_bytes = max_bytes - head_bytes
    head = raw[:head_bytes].decode("utf-8", errors="ignore")
    tail = raw[len(raw) - tail_bytes:].decode("utf-8", errors="ignore") if tail_bytes else ""
    h, t = len(head.encode("utf-8")), len(tail.encode("utf-8"))
    removed = est_bytes4(raw[h:len(raw) - t].decode("utf-8"))
    return head, tail, removed


def is_real_user(record: Record, summary_prefix: str = SUMMARY_PREFIX) -> bool:
    """A user message the person typed: not harness-injected, not an earlier summary."""
    if record.kind != "user" or record.injected:
        return False
    text = record.text.lstrip()
    return not (is_injected(text) or (bool(summary_prefix) and text.startswith(summary_prefix)))


def chat_messages(records: list[Record], system_prompt: str) -> list[dict[str, Any]]:
    """History records as chat messages ``{"role", "content"}``.

    Consecutive records with the same role (other than ``tool``) form one
    message, their texts joined by a blank line -- the convention of
    `Projection.messages` and the FutureOS request, so message prefixes compare
    across strategies. A ``system`` record equal to the base instructions is
    not repeated (it is the request's system prompt).
    """
    out: list[dict[str, Any]] = []
    for r in records:
        if r.kind == "system" and r.text == system_prompt:
            continue
        role = role_of(r)
        if out and out[-1]["role"] == role and role != "tool":
            out[-1]["content"] += "\n\n" + r.text
        else:
            out.append({"role": role, "content": r.text})
    return out


def _drop_oldest(records: list[Record], sizes: list[int], fixed: int, limit: int) -> int:
    """How many of the oldest `records` to drop so ``fixed + sum(kept sizes) <= limit``.

    Returns the index of the first kept record. The caller also drops the
    partners (a tool call's output) of dropped records, as upstream's
    ``remove_first_item`` does.
    """
    total = fixed + sum(sizes)
    i = 0
    while total > limit and i < len(records):
        total -= sizes[i]
        i += 1
    return i


@dataclass(frozen=True)
class CodexStrategy:
    """Codex's local compaction (see module docstring)."""

    name: str = "codex"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = "bytes/4"

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Codex's own trigger: 90% of the window."""
        return codex_trigger(ctx.window).fires(tokens)

    def prompts(self, ctx: CompactionContext) -> Mapping[str, str]:
        """The prompt texts in use (paraphrases, or the files the params point at)."""
        instr = ctx.param("prompt_file", None)
        prefix = ctx.param("summary_prefix_file", None)
        return {
            "instruction": read_prompt(instr, COMPACT_INSTRUCTION),
            "summary_prefix": read_prompt(prefix, SUMMARY_PREFIX),
        }

    # ------------------------------------------------------------------ request

    def summary_request(self, session: Session, cut: int, ctx: CompactionContext,
                        prompts: Mapping[str, str] | None = None) -> tuple[SummaryRequest, dict[str, Any]]:
        """The summary request (history + instruction, base instructions, no tools), trimmed to fit."""
        prompts = prompts or self.prompts(ctx)
        system = ctx.shape.system_prompt
        recs = [r for r in history(session, cut) if not (r.kind == "system" and r.text == system)]
        cap = max(1, min(int(ctx.param("summary_tokens", SUMMARY_TOKENS)), ctx.output_ceiling or SUMMARY_TOKENS))
        limit = ctx.window - cap
        sizes = [est_bytes4(r.text) for r in recs]
        fixed = est_bytes4(system) + est_bytes4(prompts["instruction"])
        if ctx.param("summary_tools", False):
            fixed += est_bytes4(ctx.shape.tools_text())
        start = _drop_oldest(recs, sizes, fixed, limit)
        dropped_calls = {r.call_id for r in recs[:start] if r.call_id and r.kind in ("tool_call", "tool_output")}
        kept = [r for r in recs[start:]
                if not (r.call_id and r.kind in ("tool_call", "tool_output") and r.call_id in dropped_calls)]
        messages = chat_messages(kept, system) + [{"role": "user", "content": prompts["instruction"]}]
        req = SummaryRequest(
            strategy=self.name, shape="history+instruction", system=system,
            tools=tuple(ctx.shape.tools) if ctx.param("summary_tools", False) else (),
            messages=tuple(messages), template="codex-handoff", max_output_tokens=cap,
            source_entry_ids=tuple(dict.fromkeys(r.entry_id for r in kept)),
        )
        est = fixed + sum(est_bytes4(r.text) for r in kept)
        info = {
            "request_items": len(kept), "request_dropped_items": len(recs) - len(kept),
            "request_tokens_est": est, "request_limit": limit, "request_fits": est <= limit,
        }
        return req, info

    # ------------------------------------------------------------------ compact

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        prompts = self.prompts(ctx)
        trig = codex_trigger(ctx.window)
        capacity = trig.auto_compact
        system_text, tools_text = ctx.shape.system_prompt, ctx.shape.tools_text()

        # Summary first: its size decides how much room the user messages have.
        request, req_info = self.summary_request(session, cut, ctx, prompts)
        if req_info["request_fits"]:
            text, receipt = call_summarizer(ctx, request)
        else:  # even with no history left the request overflows: no model call
            text, receipt = None, SummaryReceipt(
                getattr(ctx.summarizer, "name", "?"), bool(getattr(ctx.summarizer, "stand_in", False)), "",
                request.fingerprint(), fallback=True,
                error="summary request does not fit the window even with all history dropped")
        body = (text or "").strip() or NO_SUMMARY
        if receipt.fallback:
            label = "no summary available"
        elif body == NO_SUMMARY:
            label = "no summary available (empty answer)"
        else:
            label = summary_label(receipt, "no summary available")
        summary_seg = Segment("summary", "user", f"{prompts['summary_prefix']}\n{body}", label=label)

        # User budget (clamped to the room left when the window is small).
        param_budget = int(ctx.param("user_budget_tokens", USER_BUDGET_TOKENS))
        fixed = est_bytes4(system_text) + est_bytes4(tools_text) + est_bytes4(summary_seg.text)
        room = capacity - fixed - MARKER_SLACK
        budget = min(param_budget, max(0, room)) if ctx.param("fit_window", True) else param_budget

        recs = history(session, cut)
        users = [r for r in recs if is_real_user(r, prompts["summary_prefix"])]
        skipped = sum(1 for r in recs if r.kind == "user") - len(users)
        picked: list[list[Segment]] = []
        remaining = budget
        truncated: dict[str, Any] | None = None
        for r in reversed(users):
            if remaining <= 0:
                break
            n = est_bytes4(r.text)
            if n <= remaining:
                picked.append([Segment("user_original", "user", r.text, (r.entry_id,), record_kind=r.kind)])
                remaining -= n
                continue
            head, tail, removed = middle_truncate(r.text, remaining)
            ids = (r.entry_id,)
            picked.append([
                Segment("user_original", "user", head, ids, record_kind=r.kind),
                Segment("omitted_marker", "user", truncation_marker(removed), ids, record_kind=r.kind,
                        label="codex middle truncation"),
                Segment("user_original", "user", tail, ids, record_kind=r.kind),
            ])
            truncated = {"entry_id": r.entry_id, "tokens": n, "kept_tokens": remaining, "removed_tokens": removed}
            remaining = 0
            break
        picked.reverse()

        segments = [Segment("system", "system", system_text), Segment("tools", "system", tools_text)]
        segments += [s for group in picked for s in group]
        segments.append(summary_seg)
        notes = {
            "auto_compact": trig.auto_compact, "hard_cap": trig.hard_cap,
            "user_budget_param": param_budget, "user_budget": budget,
            "user_budget_clamped": budget < param_budget,
            "user_budget_used": budget - remaining,
            "real_user_messages": len(users), "skipped_user_messages": skipped,
            "kept_user_entries": [g[0].entry_ids[0] for g in picked],
            "truncated": truncated,
            **req_info,
        }
        return Projection(self.name, self.algorithm_version, session.id, cut, tuple(segments), capacity,
                          self.estimator, request, receipt, notes)


STRATEGY = CodexStrategy()
STRATEGIES = {STRATEGY.name: STRATEGY}

__all__ = ["ALGORITHM_VERSION", "COMPACT_INSTRUCTION", "CodexStrategy", "NO_SUMMARY", "STRATEGIES",
           "SUMMARY_PREFIX", "USER_BUDGET_TOKENS", "call_summarizer", "chat_messages", "is_real_user",
           "middle_truncate", "truncation_marker"]
