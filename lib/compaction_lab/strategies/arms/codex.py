"""``codex``: Codex's *local* compaction (its hosted remote one needs the vendor backend).

Upstream: openai/codex @ e06dd0e5d5694c24968bf49b62466cdedae04aaa (the rollout replay and the
truncation utilities at the further commits the docs name).

Key names: `CodexStrategy` (`CodexStrategy.prompts` returns the prompt texts in use),
`live_history` (the rollout replay, record-time truncation, opaque remote summaries),
`request_messages`, `encrypted_item_tokens`, `SUMMARY_PREFIX`, `COMPACT_INSTRUCTION`.

Rules, parameters and the decisions where upstream is silent: docs/strategies.md#codex; each rule's
upstream file:line and the function here: docs/strategies.md#codex-upstream-pins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compaction_lab.core.projection import (
    Projection,
    Segment,
    SentRequest,
    SummaryReceipt,
    SummaryRequest,
    chat_messages,
)
from compaction_lab.core.session import Record, Session
from compaction_lab.core.text import is_injected
from compaction_lab.strategies.base import (
    COMPACTION_FAILED,
    STRATEGIES,
    CompactionContext,
    call_summarizer,
    choice,
    est_bytes4,
    failure_mode,
    history,
    projection,
    read_prompt,
    role_of,
    summary_label,
)
from compaction_lab.strategies.trigger import SUMMARY_TOKENS, codex_trigger

#: codex-local-4: with no answer text the summary holds the live history's last assistant message (issue 46).
ALGORITHM_VERSION = "codex-local-4"

#: Budget for the user messages carried over (Codex's 20,000-token rule).
USER_BUDGET_TOKENS = 20_000

#: Tokens kept free for the truncation marker when the user budget is clamped.
MARKER_SLACK = 16

#: Record-time truncation policy of Codex's fallback model family (10,000 bytes).
TRUNCATION_POLICY = "bytes:10000"

#: ``ContextManager::process_item`` scales the policy by this before truncating a tool output.
SERIALIZATION_BUDGET = 1.2

#: Where the re-injected initial context goes: ``auto``, ``pre_turn`` or ``mid_turn``.
COMPACTION_PHASE = "auto"

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

#: How Codex's own summary messages open (``templates/compact/summary_prefix.md``): used only to
#: recognise summary messages Codex wrote into a rollout, never sent.
UPSTREAM_SUMMARY_OPENING = "Another language model started to solve this problem"

#: What upstream's ``build_compacted_history`` writes for an empty summary text: only a recorded
#: ``compacted`` item with an empty ``message`` and no replacement history reaches it (the compact
#: task's own summary always opens with the prefix), and ``on_failure="placeholder"`` uses it.
NO_SUMMARY = "(no summary available)"

INITIAL_CONTEXT_LABEL = "re-injected initial context"

#: Labels of the summary segment: the summarizer gave nothing (``on_failure="placeholder"``), the model
#: answered with blank text, an earlier summary the live history carries, a remote compaction's encrypted one.
NO_SUMMARY_LABEL = "no summary available"
EMPTY_SUMMARY_LABEL = "summary (empty answer)"
#: ... the answer had no text and the summary holds the live history's last assistant message instead
#: (`previous_reply`), or it had no text and nothing stands in for it (no earlier reply, or ``no_answer="empty"``).
PREVIOUS_REPLY_LABEL = "summary (previous reply: no answer)"
NO_ANSWER_LABEL = "summary (no answer)"

#: Values of param ``no_answer`` (the first is the default): what follows the summary prefix when the
#: answer has no text (upstream: no assistant message in the compaction turn). ``previous_reply``: the
#: pinned code's outcome -- its scan for the last assistant message runs over the whole history;
#: ``empty``: the evident intent (the compaction turn's own answer, so nothing), a what-if.
NO_ANSWER_CHOICES = ("previous_reply", "empty")
EARLIER_SUMMARY_LABEL = "codex summary of an earlier compaction"
OPAQUE_SUMMARY_LABEL = "summary opaque (encrypted)"

#: Bytes Codex takes off an encrypted item's decoded length when it estimates what the model sees
#: (``estimate_reasoning_length`` in context_manager/history.rs).
ENCRYPTED_OVERHEAD_BYTES = 650

#: Why the compaction failed when the request overflows with every history item dropped.
REQUEST_DOES_NOT_FIT = "summary request does not fit the window even with all history dropped"


# --------------------------------------------------------------------------- truncation (utils/string)


def truncation_marker(count: int, unit: str = "tokens") -> str:
    """Write the inline marker between the kept head and tail of a middle-truncated text."""
    return f"…{count} {unit} truncated…"


def _split(text: str, max_bytes: int) -> tuple[str, str, int]:
    """Head of at most ``max_bytes // 2`` bytes and tail of at most the rest, on character boundaries.

    Callers pass ``max_bytes`` below the text's size, so head and tail never overlap. Returns ``(head, tail, removed_chars)``, as upstream's ``split_string``.
    """
    raw = text.encode("utf-8")
    left = max_bytes // 2
    right = max_bytes - left
    head = raw[:left].decode("utf-8", errors="ignore")
    tail = raw[len(raw) - right :].decode("utf-8", errors="ignore") if right else ""
    removed = len(text) - len(head) - len(tail)
    return head, tail, removed


def middle_truncate(text: str, budget_tokens: int) -> tuple[str, str, int]:
    """Token-budget middle truncation (``truncate_middle_with_token_budget``).

    Keeps half of ``budget_tokens * 4`` bytes from the head and the rest from
    the tail, cut on UTF-8 character boundaries (head and tail are a verbatim
    prefix and suffix of `text`). Returns ``(head, tail, removed_tokens)``
    with ``removed_tokens = ceil((bytes - budget bytes) / 4)``, the count
    upstream writes in its marker; ``(text, "", 0)`` when the text fits.
    """
    raw_len = len(text.encode("utf-8"))
    max_bytes = max(0, budget_tokens) * 4
    if not text or (max_bytes > 0 and raw_len <= max_bytes):
        return text, "", 0
    if max_bytes == 0:
        return "", "", math.ceil(raw_len / 4)
    head, tail, _ = _split(text, max_bytes)
    return head, tail, math.ceil((raw_len - max_bytes) / 4)


def truncate_tokens(text: str, budget_tokens: int) -> str:
    """``truncate_text(text, TruncationPolicy::Tokens(budget))``: head, inline marker, tail."""
    head, tail, removed = middle_truncate(text, budget_tokens)
    if removed == 0 and not tail and head == text:
        return text
    return head + truncation_marker(removed) + tail


def truncate_bytes(text: str, max_bytes: int) -> str:
    """``truncate_text(text, TruncationPolicy::Bytes(max_bytes))``: ``…N chars truncated…`` inline."""
    if not text:
        return text
    if max_bytes <= 0:
        return truncation_marker(len(text), "chars")
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    head, tail, removed = _split(text, max_bytes)
    return head + truncation_marker(removed, "chars") + tail


def parse_policy(policy: Any) -> tuple[str, int] | None:
    """``"bytes:N"`` / ``"tokens:N"`` -> (unit, N); ``"none"`` / None -> None (no truncation)."""
    if policy is None or str(policy).strip().lower() in ("", "none", "off"):
        return None
    unit, _, n = str(policy).partition(":")
    unit = unit.strip().lower()
    if unit not in ("bytes", "tokens") or not n.strip().isdigit():
        raise ValueError(f"codex truncation_policy {policy!r}: expected 'bytes:N', 'tokens:N' or 'none'")
    return unit, int(n)


def truncate_tool_output(text: str, policy: Any = TRUNCATION_POLICY) -> str:
    """Truncate a tool output as Codex records it into its history: the policy x 1.2, middle-truncated."""
    parsed = parse_policy(policy)
    if parsed is None:
        return text
    unit, n = parsed
    limit = math.ceil(n * SERIALIZATION_BUDGET)
    return truncate_bytes(text, limit) if unit == "bytes" else truncate_tokens(text, limit)


# --------------------------------------------------------------------------- encrypted items


def encrypted_item_tokens(encrypted_bytes: int) -> int:
    """Codex's estimate of what an encrypted item (a remote compaction's summary) costs the model, in tokens.

    ``estimate_response_item_model_visible_bytes``: the base64 payload's
    length x 3/4 (its decoded size) less `ENCRYPTED_OVERHEAD_BYTES`, never
    below 0; then ``approx_tokens_from_byte_count``: ``ceil(bytes / 4)``.
    """
    visible = max(0, max(0, int(encrypted_bytes)) * 3 // 4 - ENCRYPTED_OVERHEAD_BYTES)
    return math.ceil(visible / 4)


def opaque_text(tokens: int) -> str:
    """Write the placeholder an opaque summary shows in our text: what it is and its estimated size, not its content."""
    return (
        f"[{OPAQUE_SUMMARY_LABEL}: Codex's server-side compaction summary, about {tokens:,} tokens; the model "
        "reads it decrypted, its text is not readable here]"
    )


# --------------------------------------------------------------------------- live history


@dataclass(frozen=True)
class Item:
    """One item of Codex's live history.

    ``entry_id`` is the record it came from (for replacement-history items:
    the ``compacted`` line's summary record); ``verbatim`` says the text is a
    record's text unchanged; ``summary`` marks a compaction summary message;
    ``context`` marks injected initial context (developer messages,
    AGENTS.md, environment context); ``key`` is the upstream item it is
    (record items: their entry id, so the blocks of one entry form one
    message; replacement-history items: one key each). ``opaque_tokens`` is
    set on a remote compaction's encrypted summary: it has no text we can
    read, and this is Codex's estimate of its size (`encrypted_item_tokens`).
    """

    role: str
    text: str
    entry_id: str
    kind: str
    call_id: str | None = None
    verbatim: bool = True
    summary: bool = False
    context: bool = False
    key: str = ""
    opaque_tokens: int | None = None

    @property
    def opaque(self) -> bool:
        """An encrypted item: the model reads it, we cannot."""
        return self.opaque_tokens is not None

    def size(self) -> int:
        """bytes/4 of its text, or Codex's estimate for an encrypted item."""
        return self.opaque_tokens if self.opaque_tokens is not None else est_bytes4(self.text)

    def message_key(self) -> str:
        """Return the key of the message the item belongs to (its own key, else its entry)."""
        return self.key or "entry:" + self.entry_id  # `Segment.message_key`'s form: items and records agree


def is_contextual(text: str) -> bool:
    """Injected context (``core.text.is_injected``); XML-tag blocks also in any letter case.

    Upstream's own test (``collect_user_messages_filters_session_prefix_entries``)
    filters ``<ENVIRONMENT_CONTEXT>``: its tag check ignores case.
    """
    if is_injected(text):
        return True
    head = text.lstrip()[:64].lower()
    return head.startswith("<") and is_injected(head)


def is_summary_text(text: str, summary_prefix: str = SUMMARY_PREFIX) -> bool:
    """Tell whether a text is a summary message: it opens with our prefix or with Codex's own."""
    t = text.lstrip()
    return (bool(summary_prefix) and t.startswith(summary_prefix)) or t.startswith(UPSTREAM_SUMMARY_OPENING)


def is_real_user(record: Record, summary_prefix: str = SUMMARY_PREFIX) -> bool:
    """Tell whether a record is a user message the person typed: not harness-injected, not an earlier summary."""
    if record.kind != "user" or record.injected:
        return False
    return not (is_contextual(record.text) or is_summary_text(record.text, summary_prefix))


def _is_context_record(r: Record, system_prompt: str) -> bool:
    return (r.kind == "system" and r.text != system_prompt) or (
        r.kind == "user" and (r.injected or is_contextual(r.text))
    )


def _record_item(r: Record, policy: Any, summary_prefix: str) -> Item:
    text = truncate_tool_output(r.text, policy) if r.kind == "tool_output" else r.text
    context = r.kind == "system" or (r.kind == "user" and (r.injected or is_contextual(r.text)))
    return Item(
        role_of(r),
        text,
        r.entry_id,
        r.kind,
        r.call_id,
        verbatim=text == r.text,
        context=context,
        summary=r.kind == "user" and not context and is_summary_text(r.text, summary_prefix),
    )


def initial_context(session: Session, cut: int, system_prompt: str) -> list[Item]:
    """Return the session's opening block of context items (developer messages, AGENTS.md, environment context).

    Our stand-in for ``Session::build_initial_context``, which rebuilds them
    from the current turn's settings: the context records that open the
    session, before its first other record (the base instructions and
    ``meta`` records are skipped).
    """
    out: list[Item] = []
    for r in history(session, cut):
        if r.kind == "system" and r.text == system_prompt:
            continue
        if not _is_context_record(r, system_prompt):
            break
        out.append(Item(role_of(r), r.text, r.entry_id, r.kind, context=True))
    return out


def _boundaries(session: Session) -> dict[str, Mapping[str, Any]]:
    """Codex compaction boundaries by the entry id of their summary record (Codex rollouts only)."""
    if session.source_format != "codex":
        return {}
    out: dict[str, Mapping[str, Any]] = {}
    for b in session.metadata.get("compactions", ()) or ():
        if isinstance(b, Mapping) and isinstance(b.get("entry_id"), str):
            out[b["entry_id"]] = b
    return out


def _replacement(
    boundary: Mapping[str, Any], rec: Record, user_ids: Mapping[str, str], summary_prefix: str
) -> list[Item] | None:
    """Items of a recorded ``replacement_history``, or None when none was recorded.

    Messages, and a remote compaction's encrypted summary as an opaque item
    (upstream's resume puts the whole replacement history back,
    rollout_reconstruction.rs); other items (tool calls) were not kept by
    the importer.
    """
    items = boundary.get("replacement_history")
    if not isinstance(items, list):
        return None
    out: list[Item] = []
    for n, it in enumerate(items):
        if isinstance(it, Mapping) and it.get("type") == "compaction":
            size = it.get("encrypted_bytes")
            out.append(
                Item(
                    # upstream counts the compaction item among the model's own output (`is_model_generated_item`)
                    "assistant",
                    "",
                    rec.entry_id,
                    "compaction",
                    verbatim=False,
                    summary=True,
                    key=f"{rec.entry_id}#{n}",
                    opaque_tokens=encrypted_item_tokens(size if isinstance(size, int) else 0),
                )
            )
            continue
        if not isinstance(it, Mapping) or it.get("type") != "message" or not isinstance(it.get("text"), str):
            continue
        role = {"developer": "system"}.get(str(it.get("role")), str(it.get("role")))
        if role not in ("system", "user", "assistant"):
            continue
        text = it["text"]
        injected = bool(it.get("injected")) or (role == "user" and is_contextual(text))
        summary = (
            role == "user"
            and not injected
            and ((bool(rec.text) and text == rec.text) or is_summary_text(text, summary_prefix))
        )
        kind = {"system": "system", "assistant": "assistant"}.get(role, "user")
        verbatim = role == "user" and text in user_ids  # the journal holds the same message
        out.append(
            Item(
                role,
                text,
                user_ids[text] if verbatim else rec.entry_id,
                kind,
                verbatim=verbatim,
                summary=summary,
                context=injected or role == "system",
                key=f"{rec.entry_id}#{n}",
            )
        )
    return out


def collect_user_messages(items: list[Item]) -> list[Item]:
    """Real user messages of a live history (``collect_user_messages``): not context, not a summary."""
    return [i for i in items if i.role == "user" and i.kind == "user" and not i.context and not i.summary]


def select_user_messages(users: list[Item], budget: int) -> tuple[list[tuple[Item, str]], dict[str, Any] | None, int]:
    """``build_compacted_history_with_limit``'s walk: newest first within `budget` tokens.

    Returns ``([(item, text sent)], truncated-info or None, budget left)`` in
    chronological order.
    """
    picked: list[tuple[Item, str]] = []
    remaining = budget
    truncated: dict[str, Any] | None = None
    if budget > 0:
        for it in reversed(users):
            if remaining <= 0:
                break
            n = est_bytes4(it.text)
            if n <= remaining:
                picked.append((it, it.text))
                remaining -= n
                continue
            text = truncate_tokens(it.text, remaining)
            _, _, removed = middle_truncate(it.text, remaining)
            picked.append((it, text))
            truncated = {"entry_id": it.entry_id, "tokens": n, "kept_tokens": remaining, "removed_tokens": removed}
            remaining = 0
            break
    picked.reverse()
    return picked, truncated, remaining


def live_history(
    session: Session,
    cut: int,
    system_prompt: str,
    *,
    policy: Any = TRUNCATION_POLICY,
    summary_prefix: str = SUMMARY_PREFIX,
    user_budget: int = USER_BUDGET_TOKENS,
) -> list[Item]:
    """Codex's live history at `cut`, rebuilt as its rollout replay does (see module docstring)."""
    recs = history(session, cut)
    bounds = _boundaries(session)
    user_ids = {r.text: r.entry_id for r in recs if r.kind == "user"}  # latest record of each user text
    init: list[Item] | None = None
    items: list[Item] = []
    for r in recs:
        if r.kind == "system" and r.text == system_prompt:
            continue
        if r.kind != "summary":
            items.append(_record_item(r, policy, summary_prefix))
            continue
        boundary = bounds.get(r.entry_id)
        replaced = _replacement(boundary, r, user_ids, summary_prefix) if boundary is not None else None
        if replaced is not None:
            items = replaced
            continue
        if init is None:
            init = initial_context(session, cut, system_prompt)
        own = boundary is not None
        text = r.text if own else f"{summary_prefix}\n{r.text}"
        if not text:
            text = NO_SUMMARY
        picked, _, _ = select_user_messages(collect_user_messages(items), user_budget)
        rebuilt = list(init)
        rebuilt += [
            Item("user", t, it.entry_id, "user", verbatim=it.verbatim and t == it.text, key=it.message_key())
            for it, t in picked
        ]
        rebuilt.append(Item("user", text, r.entry_id, "summary", verbatim=own, summary=True, key=f"{r.entry_id}#s"))
        items = rebuilt
    return items


def request_messages(items: list[Any], system_prompt: str) -> list[dict[str, Any]]:
    """History items (or records) as chat messages ``{"role", "content"}``: one message per upstream item.

    Codex sends every history item as its own input item. The message
    boundary rule is `Projection.messages`'s: consecutive ``system`` parts
    form one message; otherwise a part joins the previous message only with
    the same role (never ``tool``) and the same item key -- the blocks of one
    source entry (a record's entry id), so every rollout line stays one
    message. A ``system`` record equal to the base instructions is not
    repeated (it is the request's system prompt); an item with no text (a
    reasoning item whose content is encrypted) sends nothing.
    """

    def parts():
        for r in items:
            if isinstance(r, Record):
                if r.kind == "system" and r.text == system_prompt:
                    continue
                role, text, key = role_of(r), r.text, "entry:" + r.entry_id
            else:
                role, text, key = r.role, r.text, r.message_key()
            if text:  # a reasoning item with only encrypted content has nothing readable to send
                yield role, text, key

    return chat_messages(parts())


def _drop_oldest(sizes: list[int], fixed: int, limit: int) -> int:
    """How many of the oldest items to drop so ``fixed + sum(kept sizes) <= limit``.

    Returns the index of the first kept item. The caller also drops the
    partners (a tool call's output) of dropped items, as upstream's
    ``remove_first_item`` does.
    """
    total = fixed + sum(sizes)
    i = 0
    while total > limit and i < len(sizes):
        total -= sizes[i]
        i += 1
    return i


def _phase(session: Session, cut: int, ctx: CompactionContext, prefix: str) -> str:
    phase = str(ctx.param("compaction_phase", COMPACTION_PHASE))
    if phase not in ("auto", "pre_turn", "mid_turn"):
        raise ValueError(f"codex compaction_phase {phase!r}: expected 'auto', 'pre_turn' or 'mid_turn'")
    if phase != "auto":
        return phase
    nxt = next((r for r in session.records if r.source_order >= cut and r.kind != "meta"), None)
    return "pre_turn" if nxt is None or nxt.kind in ("user", "system", "summary") else "mid_turn"


def summary_cap(ctx: CompactionContext) -> int:
    """Return the summary's output cap before the window's room: output limit O, or param ``summary_tokens``.

    Upstream sends no cap (the model's own output limit applies); the
    profile's output ceiling O stands for it. ``summary_tokens`` overrides
    it, never above O.
    """
    ceiling = ctx.output_ceiling if ctx.output_ceiling and ctx.output_ceiling > 0 else SUMMARY_TOKENS
    override = ctx.param("summary_tokens", None)
    return max(1, ceiling if override is None else min(int(override), ceiling))


def no_answer_mode(ctx: CompactionContext) -> str:
    """Param ``no_answer``, checked (`base.choice`): one of `NO_ANSWER_CHOICES` (default ``previous_reply``)."""
    return choice(ctx, "codex", "no_answer", NO_ANSWER_CHOICES)


def previous_reply(items: list[Item]) -> Item | None:
    """Return the last assistant message of a live history, or None when it holds none.

    Upstream takes the summary's text from ``get_last_assistant_message_from_turn``
    (codex.rs), which it hands the whole history: newest to oldest, the first
    assistant message with an output text, whatever that text is. When the
    compaction turn recorded no assistant message, the scan reaches the one
    before it -- this item. Reasoning, tool calls and an encrypted summary are
    not messages.
    """
    return next((i for i in reversed(items) if i.kind == "assistant" and i.role == "assistant"), None)


def opaque_segment(item: Item, label: str = OPAQUE_SUMMARY_LABEL) -> Segment:
    """Show an encrypted summary as a projection segment: placeholder text, Codex's size estimate, flagged opaque."""
    n = item.opaque_tokens or 0
    return Segment(
        "summary",
        item.role,
        opaque_text(n),
        (item.entry_id,),
        tokens=n,
        label=label,
        message=item.message_key(),
        opaque=True,
    )


def history_segments(items: list[Item]) -> list[Segment]:
    """Show a live history as the next request carries it, one segment per item.

    This is what Codex sends when it did not compact. Records kept as they
    were are ``tail`` segments; texts Codex changed -- a tool output
    truncated at record time, a replacement-history message not in the
    journal -- are ``omitted_marker`` segments saying why; summaries of
    earlier compactions are ``summary`` segments, an encrypted one opaque
    (`opaque_segment`). Items with no text (reasoning with only encrypted
    content) send nothing, as in `request_messages`.
    """
    out: list[Segment] = []
    for it in items:
        key = it.message_key()
        if it.opaque:
            out.append(opaque_segment(it))
        elif not it.text:
            continue
        elif it.summary:
            out.append(Segment("summary", "user", it.text, (it.entry_id,), label=EARLIER_SUMMARY_LABEL, message=key))
        elif it.verbatim:
            out.append(Segment("tail", it.role, it.text, (it.entry_id,), record_kind=it.kind, message=key))
        else:
            why = "codex record-time truncation" if it.kind == "tool_output" else "codex replacement history"
            out.append(
                Segment("omitted_marker", it.role, it.text, (it.entry_id,), record_kind=it.kind, label=why, message=key)
            )
    return out


@dataclass(frozen=True)
class CodexStrategy:
    """Codex's local compaction (see module docstring)."""

    name: str = "codex"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = "bytes/4"

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Codex's own trigger: 90% of the window, on the API's usage (report tokens calibrated: ``ctx.model_tokens``)."""
        return codex_trigger(ctx.window).fires(ctx.model_tokens(tokens))

    def prompts(self, ctx: CompactionContext) -> Mapping[str, str]:
        """Return the prompt texts in use (paraphrases, or the files the params point at)."""
        instr = ctx.param("prompt_file", None)
        prefix = ctx.param("summary_prefix_file", None)
        return {
            "instruction": read_prompt(instr, COMPACT_INSTRUCTION),
            "summary_prefix": read_prompt(prefix, SUMMARY_PREFIX),
        }

    def live_history(
        self, session: Session, cut: int, ctx: CompactionContext, prompts: Mapping[str, str] | None = None
    ) -> list[Item]:
        """Codex's live history at `cut` under this context's parameters."""
        prompts = prompts or self.prompts(ctx)
        return live_history(
            session,
            cut,
            ctx.shape.system_prompt,
            policy=ctx.param("truncation_policy", TRUNCATION_POLICY),
            summary_prefix=prompts["summary_prefix"],
            user_budget=int(ctx.param("user_budget_tokens", USER_BUDGET_TOKENS)),
        )

    # ------------------------------------------------------------------ request

    def summary_request(
        self,
        session: Session,
        cut: int,
        ctx: CompactionContext,
        prompts: Mapping[str, str] | None = None,
        items: list[Item] | None = None,
    ) -> tuple[SummaryRequest, dict[str, Any]]:
        """Build the summary request (live history + instruction, base instructions, no tools), trimmed to fit.

        Fits: its input estimate is within the model's input limit (the
        window, or ``ctx.input_limit`` below it) and leaves the answer at
        least one token of the window; ``max_output_tokens`` is `summary_cap`
        or the room the input leaves, whichever is smaller.
        """
        prompts = prompts or self.prompts(ctx)
        system = ctx.shape.system_prompt
        live = items if items is not None else self.live_history(session, cut, ctx, prompts)
        cap = summary_cap(ctx)
        limit = min(ctx.window - 1, ctx.input_limit or ctx.window)
        sizes = [i.size() for i in live]
        fixed = est_bytes4(system) + est_bytes4(prompts["instruction"])
        if ctx.param("summary_tools", False):
            fixed += est_bytes4(ctx.shape.tools_text())
        start = _drop_oldest(sizes, fixed, limit)
        paired = ("tool_call", "tool_output")
        dropped_calls = {i.call_id for i in live[:start] if i.call_id and i.kind in paired}
        kept = [i for i in live[start:] if not (i.call_id and i.kind in paired and i.call_id in dropped_calls)]
        est = fixed + sum(i.size() for i in kept)
        room = ctx.window - est
        messages = request_messages(kept, system) + [{"role": "user", "content": prompts["instruction"]}]
        req = SummaryRequest(
            strategy=self.name,
            shape="history+instruction",
            system=system,
            tools=tuple(ctx.shape.tools) if ctx.param("summary_tools", False) else (),
            messages=tuple(messages),
            template="codex-handoff",
            max_output_tokens=max(1, min(cap, room)),
            source_entry_ids=tuple(dict.fromkeys(i.entry_id for i in kept)),
        )
        info = {
            "request_items": len(kept),
            "request_dropped_items": len(live) - len(kept),
            "request_opaque_items": sum(1 for i in kept if i.opaque),
            "request_tokens_est": est,
            "request_limit": limit,
            "request_fits": est <= limit,
            "request_answer_cap": cap,
            "request_answer_room": room,
            "live_history_items": len(live),
            "tool_outputs_truncated": sum(1 for i in live if i.kind == "tool_output" and not i.verbatim),
        }
        return req, info

    # ------------------------------------------------------------------ compact

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the next request after Codex compacts the session at `cut`."""
        on_failure = failure_mode(ctx, self.name)
        no_answer = no_answer_mode(ctx)
        prompts = self.prompts(ctx)
        trig = codex_trigger(ctx.window)
        capacity = trig.auto_compact
        system_text, tools_text = ctx.shape.system_prompt, ctx.shape.tools_text()
        live = self.live_history(session, cut, ctx, prompts)

        # Summary first: its size decides how much room the user messages have.
        request, req_info = self.summary_request(session, cut, ctx, prompts, live)
        if req_info["request_fits"]:
            text, receipt = call_summarizer(ctx, request)
        else:  # even with no history left the request overflows: upstream's task errors (compact.rs)
            text, receipt = (
                None,
                SummaryReceipt(
                    getattr(ctx.summarizer, "name", "?"),
                    bool(getattr(ctx.summarizer, "stand_in", False)),
                    "",
                    request.fingerprint(),
                    fallback=True,
                    error=REQUEST_DOES_NOT_FIT,
                ),
            )
        notes: dict[str, Any] = {"auto_compact": trig.auto_compact, "hard_cap": trig.hard_cap, "on_failure": on_failure}
        if text is None and on_failure == "upstream":
            # The compact task returned its error before replacing the history: the next request carries it unchanged.
            segments = [Segment("system", "system", system_text), Segment("tools", "system", tools_text)]
            segments += history_segments(live)
            notes |= {
                "compaction_failed": receipt.error or COMPACTION_FAILED,
                "history_tokens_est": sum(i.size() for i in live),
                **req_info,
            }
            return projection(
                self,
                session,
                cut,
                segments,
                capacity,
                summary_request=request,
                receipt=receipt,
                notes=notes,
                sent_requests=(SentRequest(request, 0),),
            )
        reply = None  # the live history's last assistant message, when it stands in for an answer with no text
        if text is None:  # on_failure="placeholder": the lab's older behaviour, not upstream's
            body, label, suffix = NO_SUMMARY, NO_SUMMARY_LABEL, "placeholder"
        elif not text:  # no assistant message: upstream's scan goes on into the history (`previous_reply`)
            reply = previous_reply(live) if no_answer == "previous_reply" else None
            body, label, suffix = (
                ("", NO_ANSWER_LABEL, "empty")
                if reply is None
                else (reply.text, PREVIOUS_REPLY_LABEL, "previous_reply")
            )
        elif not text.strip():  # an assistant message with blank text: the scan stops there
            body, label, suffix = text, EMPTY_SUMMARY_LABEL, "answer"
        else:
            body, label, suffix = text, summary_label(receipt, NO_SUMMARY_LABEL), "answer"
        summary_seg = Segment(
            "summary",
            "user",
            f"{prompts['summary_prefix']}\n{body}",
            (reply.entry_id,) if reply is not None else (),
            label=label,
        )

        init = initial_context(session, cut, system_text)
        init_segs = [
            Segment("system", i.role, i.text, (i.entry_id,), record_kind=i.kind, label=INITIAL_CONTEXT_LABEL)
            for i in init
        ]

        # User budget (clamped to the room left when the window is small).
        param_budget = int(ctx.param("user_budget_tokens", USER_BUDGET_TOKENS))
        fixed = (
            est_bytes4(system_text)
            + est_bytes4(tools_text)
            + est_bytes4(summary_seg.text)
            + sum(est_bytes4(s.text) for s in init_segs)
        )
        room = capacity - fixed - MARKER_SLACK
        budget = min(param_budget, max(0, room)) if ctx.param("fit_window", True) else param_budget

        users = collect_user_messages(live)
        skipped = sum(1 for i in live if i.role == "user" and i.kind == "user") - len(users)
        picked, truncated, remaining = select_user_messages(users, budget)
        user_segs: list[Segment] = []
        for n, (it, sent) in enumerate(picked):
            # Each kept user message is its own input item upstream: a key per item keeps it one
            # message even where two items share an entry (replacement-history items, repeated text).
            if sent == it.text and it.verbatim:
                user_segs.append(
                    Segment(
                        "user_original",
                        "user",
                        sent,
                        (it.entry_id,),
                        record_kind="user",
                        message=f"codex-user-item:{n}",
                    )
                )
            else:
                why = "codex middle truncation" if sent != it.text else "codex replacement history"
                user_segs.append(
                    Segment(
                        "omitted_marker",
                        "user",
                        sent,
                        (it.entry_id,),
                        record_kind="user",
                        label=why,
                        message=f"codex-user-item:{n}",
                    )
                )

        phase = _phase(session, cut, ctx, prompts["summary_prefix"])
        segments = [Segment("system", "system", system_text), Segment("tools", "system", tools_text)]
        if phase == "mid_turn":  # BeforeLastUserMessage: just above the last real user message, else the summary
            at = len(user_segs) - 1 if user_segs else 0
            segments += user_segs[:at] + init_segs + user_segs[at:] + [summary_seg]
        else:  # DoNotInject: the next regular turn re-injects the full initial context after the history
            segments += user_segs + [summary_seg] + init_segs
        notes |= {
            "user_budget_param": param_budget,
            "user_budget": budget,
            "user_budget_clamped": budget < param_budget,
            "user_budget_used": budget - remaining,
            "real_user_messages": len(users),
            "skipped_user_messages": skipped,
            "kept_user_entries": [it.entry_id for it, _ in picked],
            "truncated": truncated,
            "compaction_phase": phase,
            "initial_context_entries": [i.entry_id for i in init],
            "dropped_opaque_summaries": sum(1 for i in live if i.opaque),
            "no_answer": no_answer,
            "summary_suffix": suffix,
            "summary_suffix_entry": reply.entry_id if reply is not None else None,
            **req_info,
        }
        return projection(self, session, cut, segments, capacity, summary_request=request, receipt=receipt, notes=notes)


STRATEGY = CodexStrategy()
STRATEGIES.add("codex", STRATEGY, rank=30, request_shape="history+instruction", trigger_rule="90% of W")

__all__ = [
    "ALGORITHM_VERSION",
    "COMPACT_INSTRUCTION",
    "CodexStrategy",
    "EMPTY_SUMMARY_LABEL",
    "ENCRYPTED_OVERHEAD_BYTES",
    "Item",
    "NO_SUMMARY",
    "NO_ANSWER_CHOICES",
    "NO_ANSWER_LABEL",
    "NO_SUMMARY_LABEL",
    "OPAQUE_SUMMARY_LABEL",
    "PREVIOUS_REPLY_LABEL",
    "REQUEST_DOES_NOT_FIT",
    "SUMMARY_PREFIX",
    "TRUNCATION_POLICY",
    "USER_BUDGET_TOKENS",
    "call_summarizer",
    "collect_user_messages",
    "encrypted_item_tokens",
    "history_segments",
    "initial_context",
    "is_contextual",
    "is_real_user",
    "is_summary_text",
    "live_history",
    "middle_truncate",
    "no_answer_mode",
    "opaque_segment",
    "opaque_text",
    "parse_policy",
    "previous_reply",
    "request_messages",
    "select_user_messages",
    "summary_cap",
    "truncate_bytes",
    "truncate_tokens",
    "truncate_tool_output",
    "truncation_marker",
]
