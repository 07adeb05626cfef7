"""``aider``: Aider's chat-history summarisation (``ChatSummary``), reproduced at a pinned commit.

Upstream: Aider-AI/aider @ 5dc9490bb35f9729ef2c95d00a19ccd30c26339c (`UPSTREAM_COMMIT`).

Key names: `Aider` (the strategy: ``fires``, ``summary_request``, ``compact``), `ChatSummary`
(``summarize`` / ``summarize_real`` / ``summarize_all``), `to_messages`, `transcript`,
`live_history`, `message_tokens` / `messages_tokens`.

Rules, parameters and our decisions: docs/strategies.md#aider; each rule's upstream file:line and
the function here: docs/strategies.md#aider-upstream-pins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compaction_lab.core.fingerprints import sha256_text
from compaction_lab.core.projection import Projection, Segment, SentRequest, SummaryReceipt, SummaryRequest
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import counter
from compaction_lab.strategies.base import (
    STRATEGIES,
    CompactionContext,
    call_summarizer,
    choice,
    history,
    projection,
    read_prompt,
    summary_label,
)
from compaction_lab.summarize import extractive
from compaction_lab.summarize.extractive import Block, Section, Template, empty_template

#: Upstream pin.
UPSTREAM_COMMIT = "5dc9490bb35f9729ef2c95d00a19ccd30c26339c"
ALGORITHM_VERSION = "aider-2"  # aider-2: the pinned discard of the background summary (issue 46)
#: Internal decisions count ``json.dumps(message)`` with tiktoken (the model tokenizer's stand-in).
ESTIMATOR = "tiktoken"
REQUEST_SHAPE = "dedicated-system"
TEMPLATE = "aider-summary"

#: ``prompts.summary_prefix`` (prompts.py:61), exact.
SUMMARY_PREFIX = "I spoke to you previously about a number of things.\n"
#: ``prompts.run_output`` (prompts.py:36-43), exact.
RUN_OUTPUT = "I ran this command:\n\n{command}\n\nAnd got this output:\n\n{output}\n"
#: The fixed assistant acknowledgement (history.py:30, commands.py:1043).
OK_REPLY = "Ok."

#: ``prompts.summarize`` (prompts.py:46-59), in our words, line for line; ``prompt_file`` for the exact text.
SUMMARIZE_PROMPT = """*Briefly* summarise this part of a conversation about programming.
Give older parts less detail and the most recent messages more detail.
Begin a new paragraph whenever the subject changes!

This is only one part of a longer conversation, so *DO NOT* end the summary with wording like "Finally, ...", since the conversation goes on after the summary.
The summary *MUST* name the functions, libraries and packages under discussion.
The summary *MUST* name the files the assistant refers to inside ```...``` fenced code blocks!
The summary *MUST NOT* contain ```...``` fenced code blocks!

Write the summary in the first person as the USER, telling the ASSISTANT about the conversation.
Write *as* the user.
The user calls the assistant *you*.
Begin the summary with "I asked you...".
"""

MIN_SPLIT = 4  # history.py:42
MAX_DEPTH = 3  # history.py:43 (``depth > 3``)
HEAD_INPUT_RESERVE = 512  # history.py:74
DEFAULT_SUMMARY_MODEL_INPUT = 4096  # history.py:73 (``or 4096``)
HISTORY_MIN, HISTORY_MAX, HISTORY_DIVISOR = 1024, 8192, 16  # models.py:356-358

#: Values of the ``aider_summary`` parameter. ``"upstream"`` (the default): what the pinned control flow
#: does -- the background summary started by ``move_back_cur_messages`` is discarded, because the
#: move appends the commit message and ``"Ok."`` to ``done_messages`` after the worker copied it
#: (base_coder.py:1014-1017, 1031, 1036-1046); ``"applied"``: the intent, the summary applied at the
#: next request (the lab's behaviour before issue 46).
SUMMARY_CHOICES = ("upstream", "applied")
#: ``notes["compaction_failed"]`` when the pinned control flow discards the summary.
SUMMARY_DISCARDED = "summary discarded: done_messages changed while summarising (aider base_coder.py:1031, :1042-1045)"

CAPACITY_MARKER = (
    "[{n} earlier message(s) omitted to fit the context window (entries {ids}); "
    "not summarised — Aider itself would send them and overflow.]"
)

#: The stand-in's template. Aider's summary has no headings: these lead lines follow what the
#: prompt asks for (the user's requests in the first person, functions/libraries/packages,
#: the files referenced, more detail on the latest part).
AIDER_TEMPLATE = Template(
    TEMPLATE,
    (
        Section("I asked you:", "user", 10, 120, 40),
        Section("Most recently:", "state", 20, 100, 2),
        Section("The functions, libraries and packages we discussed:", "concepts", 35, 30, 40),
        Section("The files you referred to:", "files", 40, 30, 40),
        Section("The errors we saw:", "errors", 45, 70, 12),
    ),
)

_ROLE_HEAD_RE = re.compile(r"^# (USER|ASSISTANT)\n", re.M)
_CALL_PARA_RE = re.compile(r"^[A-Za-z_][\w.:-]{0,63} \{.*\}\s*$", re.S)
_RUN_RE = re.compile(r"\AI ran this command:\n\n(.*?)\n\nAnd got this output:\n\n(.*)\Z", re.S)


def read_transcript(request: SummaryRequest) -> list[Block]:
    """Read Aider's ``# USER`` / ``# ASSISTANT`` transcript (the request's user message) for the stand-in."""
    text = "\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") == "user")
    marks = list(_ROLE_HEAD_RE.finditer(text))
    out: list[Block] = []

    def add(role: str, body: str) -> None:
        body = body.strip()
        if body:
            out.append(Block(role, body, len(out)))

    for i, mk in enumerate(marks):
        body = text[mk.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        if mk.group(1) == "USER":
            run = _RUN_RE.match(body.strip("\n"))
            if body.startswith(SUMMARY_PREFIX):
                add("summary", body[len(SUMMARY_PREFIX) :])
            elif run:
                add("tool_call", run.group(1))
                add("tool_result", run.group(2))
            else:
                add("user", body)
        else:
            if body.strip() == OK_REPLY:
                continue
            for para in re.split(r"\n{2,}", body):
                add("tool_call" if _CALL_PARA_RE.match(para.strip()) else "assistant", para)
    return out


extractive.register_template(AIDER_TEMPLATE, reader=read_transcript)


# --------------------------------------------------------------------------- messages


@dataclass
class Msg:
    """One Aider chat message with its provenance.

    ``parts`` are ``(segment kind, text, entry id or None, record kind or None)``; the message's content
    is the parts joined by ``sep`` (the segments join with a blank line in `Projection.messages`).
    """

    role: str
    parts: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    real_user: bool = False
    summary: bool = False
    #: The entries a summary message stands for (set by `_summary_msg`); empty: its parts' own ids.
    ids: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def content(self) -> str:
        """Return the message's content: its parts' texts joined by a blank line."""
        return "\n\n".join(p[1] for p in self.parts)

    @property
    def entry_ids(self) -> tuple[str, ...]:
        """Return the entry ids of the message's parts, first-seen order, without repeats."""
        return tuple(dict.fromkeys(p[2] for p in self.parts if p[2]))

    def as_dict(self) -> dict[str, str]:
        """Return the message as a chat message dict (role, content), as upstream counts it."""
        return {"role": self.role, "content": self.content}


def _ok() -> Msg:
    return Msg("assistant", [("header", OK_REPLY, None, None)])


def _summary_msg(text: str, ids: Sequence[str]) -> Msg:
    m = Msg(
        "user",
        [("summary", text if text.startswith(SUMMARY_PREFIX) else SUMMARY_PREFIX + text, None, None)],
        summary=True,
    )
    m.ids = tuple(ids)
    return m


def _ids(m: Msg) -> tuple[str, ...]:
    return m.ids or m.entry_ids


def to_messages(records: Sequence[Record], ctx: CompactionContext) -> list[Msg]:
    """Turn the records into Aider's chat messages (records of one entry form one message)."""
    tool_mode = str(ctx.param("tool_records", "run_output"))
    reasoning = str(ctx.param("reasoning", "drop"))
    calls = {r.call_id: r for r in records if r.kind == "tool_call" and r.call_id}
    out: list[Msg] = []
    cur_entry: str | None = None
    for r in records:
        if r.kind == "meta":
            continue
        if r.kind == "summary":  # an earlier compaction (Aider's own or a foreign agent's): Aider's summary message
            parts = [] if r.text.startswith(SUMMARY_PREFIX) else [("header", SUMMARY_PREFIX.rstrip("\n"), None, None)]
            out.append(Msg("user", parts + [("tail", r.text, r.entry_id, r.kind)], summary=True))
            cur_entry = None
            continue
        if r.kind == "tool_output":
            if tool_mode == "drop":
                continue
            call = calls.get(r.call_id or "")
            command = r.target or (call.target if call is not None else None) or r.tool or "(tool)"
            lead = RUN_OUTPUT.split("{output}")[0].format(command=command).rstrip("\n")
            out.append(Msg("user", [("header", lead, None, None), ("tail", r.text, r.entry_id, r.kind)]))
            out.append(_ok())
            cur_entry = None
            continue
        if r.kind == "reasoning" and reasoning != "inline":
            continue
        if r.kind == "tool_call" and tool_mode == "drop":
            continue
        role = {"system": "system", "user": "user"}.get(r.kind, "assistant")
        if out and cur_entry == r.entry_id and out[-1].role == role and not out[-1].summary:
            out[-1].parts.append(("tail", r.text, r.entry_id, r.kind))
        else:
            out.append(Msg(role, [("tail", r.text, r.entry_id, r.kind)], real_user=r.kind == "user" and not r.injected))
        cur_entry = r.entry_id
    return out


def split_current(msgs: Sequence[Msg], ctx: CompactionContext) -> tuple[list[Msg], list[Msg]]:
    """``(done_messages, cur_messages)``: the exchange in progress starts at the last real user message."""
    if str(ctx.param("cur_from", "last_user")) == "none":
        return list(msgs), []
    last = max((i for i, m in enumerate(msgs) if m.real_user), default=None)
    if last is None:
        return list(msgs), []
    return list(msgs[:last]), list(msgs[last:])


def live_history(session: Session, cut: int, ctx: CompactionContext) -> list[Record]:
    """Return the records Aider's next request would carry (the system-prompt record is the system prompt).

    Aider's summary replaces ``done_messages`` in memory; the latest ``summary`` record before the cut
    (Aider's own, or a foreign agent's recorded compaction) stands for that summary message, and the
    history restarts there: it and the records after it.
    """
    sp = ctx.shape.system_prompt
    recs = [r for r in history(session, cut) if not (r.kind == "system" and r.text == sp)]
    last = max((i for i, r in enumerate(recs) if r.kind == "summary"), default=None)
    return recs if last is None else recs[last:]


# --------------------------------------------------------------------------- estimator and trigger


def message_tokens(msg: Mapping[str, Any], ctx: CompactionContext) -> int:
    """``Model.token_count(dict)``: the tokenizer over ``json.dumps(message)`` (models.py:650-670)."""
    return counter(ctx.encoding).count(json.dumps(dict(msg)))


def messages_tokens(msgs: Sequence[Mapping[str, Any]], ctx: CompactionContext) -> int:
    """``Model.token_count(list)`` = ``litellm.token_counter``: role + content + 3 per message, + 3."""
    cnt = counter(ctx.encoding)
    return sum(cnt.count(str(m.get("role", ""))) + cnt.count(str(m.get("content") or "")) + 3 for m in msgs) + 3


def max_chat_history_tokens(ctx: CompactionContext) -> float:
    """``min(max(max_input_tokens / 16, 1024), 8192)`` (models.py:356-358), or the override."""
    override = ctx.param("max_chat_history_tokens", None)
    if override:
        return override
    max_input = ctx.input_limit or ctx.window
    return min(max(max_input / HISTORY_DIVISOR, HISTORY_MIN), HISTORY_MAX)


def summary_setting(ctx: CompactionContext) -> str:
    """Param ``aider_summary``, checked (`base.choice`): one of `SUMMARY_CHOICES` (default ``"upstream"``)."""
    return choice(ctx, "aider", "aider_summary", SUMMARY_CHOICES)


def too_big(session: Session, cut: int, ctx: CompactionContext) -> bool:
    """Upstream's exact check on the done messages at `cut` (history.py:15-18)."""
    done, _ = split_current(to_messages(live_history(session, cut, ctx), ctx), ctx)
    return sum(message_tokens(m.as_dict(), ctx) for m in done) > max_chat_history_tokens(ctx)


# --------------------------------------------------------------------------- the summariser


class SummaryFailed(ValueError):
    """Every model failed (history.py:123)."""


@dataclass
class ChatSummary:
    """A port of ``aider.history.ChatSummary`` over `Msg` (history.py:7-123).

    ``models`` are ``send(transcript, head) -> text | None`` callables tried in turn (upstream: the weak
    model, then the main model); one that raises or answers None is skipped, and when none answers
    `SummaryFailed` is raised (history.py:114-123). ``max_input`` is the first model's
    ``info["max_input_tokens"]`` (0: unknown → 4,096).
    """

    max_tokens: float
    token_count: Callable[[Mapping[str, Any]], int]
    list_count: Callable[[Sequence[Mapping[str, Any]]], int]
    models: Sequence[Callable[[str, list[Msg]], str | None]]
    max_input: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)

    def too_big(self, messages: Sequence[Msg]) -> bool:
        """Tell whether the messages' summed token counts are more than ``max_tokens`` (history.py:15-18)."""
        return sum(t for t, _ in self.tokenize(messages)) > self.max_tokens

    def tokenize(self, messages: Sequence[Msg]) -> list[tuple[int, Msg]]:
        """Pair each message with its token count."""
        return [(self.token_count(m.as_dict()), m) for m in messages]

    def summarize(self, messages: Sequence[Msg]) -> list[Msg]:
        """Summarise the messages, appending an assistant ``"Ok."`` when the result does not end with one."""
        out = self.summarize_real(list(messages))
        if out and out[-1].role != "assistant":
            out.append(_ok())
        return out

    def summarize_real(self, messages: list[Msg], depth: int = 0) -> list[Msg]:
        """Summarise the head and keep the tail, recursing while the result is too big."""
        sized = self.tokenize(messages)
        total = sum(t for t, _ in sized)
        if total <= self.max_tokens and depth == 0:
            return messages
        if len(messages) <= MIN_SPLIT or depth > MAX_DEPTH:
            return self.summarize_all(messages, depth)
        tail_tokens, split_index = 0, len(messages)
        half_max_tokens = self.max_tokens // 2
        for i in range(len(sized) - 1, -1, -1):
            tokens, _ = sized[i]
            if tail_tokens + tokens < half_max_tokens:
                tail_tokens += tokens
                split_index = i
            else:
                break
        while messages[split_index - 1].role != "assistant" and split_index > 1:
            split_index -= 1
        if split_index <= MIN_SPLIT:
            return self.summarize_all(messages, depth)
        tail = messages[split_index:]
        limit = (self.max_input or DEFAULT_SUMMARY_MODEL_INPUT) - HEAD_INPUT_RESERVE
        keep, running = [], 0
        for tokens, msg in sized[:split_index]:
            running += tokens
            if running > limit:
                break
            keep.append(msg)
        lost = sized[len(keep) : split_index]
        summary = self.summarize_all(keep, depth, lost=[m for _, m in lost])
        summary_tokens = self.list_count([m.as_dict() for m in summary])
        tail_tokens = sum(t for t, _ in sized[split_index:])
        self.log[-1].update(
            {
                "split_index": split_index,
                "tail_messages": len(tail),
                "tail_tokens": tail_tokens,
                "summary_tokens": summary_tokens,
            }
        )
        if summary_tokens + tail_tokens < self.max_tokens:
            return summary + tail
        return self.summarize_real(summary + tail, depth + 1)

    def summarize_all(self, messages: Sequence[Msg], depth: int = 0, lost: Sequence[Msg] = ()) -> list[Msg]:
        """Summarise all the messages into one summary message, trying each model in turn."""
        content = transcript(messages)
        self.log.append(
            {
                "depth": depth,
                "messages": len(messages),
                "lost_messages": len(lost),
                "lost_entries": [e for m in lost for e in _ids(m)],
            }
        )
        ids = tuple(dict.fromkeys(e for m in messages for e in _ids(m)))
        for send in self.models:
            try:
                text = send(content, list(messages))
            except Exception as exc:
                self.log[-1].setdefault("model_errors", []).append(f"{type(exc).__name__}: {exc}")
                continue
            if text is not None:
                return [_summary_msg(SUMMARY_PREFIX + text, ids)]
        raise SummaryFailed("summarizer unexpectedly failed for all models")


def transcript(messages: Sequence[Msg]) -> str:
    """Flatten the messages as ``summarize_all`` does (history.py:99-107).

    ``# USER`` / ``# ASSISTANT`` headings, other roles skipped.
    """
    content = ""
    for m in messages:
        role = m.role.upper()
        if role not in ("USER", "ASSISTANT"):
            continue
        content += f"# {role}\n"
        content += m.content
        if not content.endswith("\n"):
            content += "\n"
    return content


# --------------------------------------------------------------------------- the strategy


@dataclass(frozen=True)
class Aider:
    """Aider's ``ChatSummary``: the done history's head summarised as a user message.

    Its tail and the current exchange are kept verbatim.
    """

    name: str = "aider"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = ESTIMATOR
    template: str = TEMPLATE

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Tell whether `tokens` is more than ``max_chat_history_tokens`` (``too_big``).

        Upstream sizes the done history only; `tokens` is the whole input, so this fires no later than
        upstream; `too_big` is exact.
        """
        return tokens > max_chat_history_tokens(ctx)

    def instruction(self, ctx: CompactionContext) -> str:
        """Return the summarize system prompt in use (``prompt_file`` points at the exact upstream text)."""
        return read_prompt(ctx.param("prompt_file", None), SUMMARIZE_PROMPT)

    def prompts(self, ctx: CompactionContext) -> Mapping[str, str]:
        """Return the prompt texts in use."""
        return {
            "system": self.instruction(ctx),
            "summary_prefix": SUMMARY_PREFIX,
            "run_output": RUN_OUTPUT,
            "ok": OK_REPLY,
        }

    def summary_request(
        self, content: str, messages: Sequence[Msg], ctx: CompactionContext, cap: int
    ) -> SummaryRequest:
        """``[system: summarize prompt, user: transcript]``, no tools (history.py:109-112)."""
        return SummaryRequest(
            strategy=self.name,
            shape=REQUEST_SHAPE,
            system=self.instruction(ctx),
            tools=(),
            messages=({"role": "user", "content": content},),
            template=self.template,
            max_output_tokens=cap,
            source_entry_ids=tuple(dict.fromkeys(e for m in messages for e in _ids(m))),
        )

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the next request after Aider summarises the done history at `cut`.

        With ``aider_summary="upstream"`` (the default) in mode ``"auto"``, a summary that was made is
        sent and billed but discarded, as the pinned ``summarize_end`` discards it: the next request
        carries the done history and the exchange in progress unsummarised, with no capacity guard
        (``notes["compaction_failed"]``). Mode ``"switch"`` and ``aider_summary="applied"`` apply it.
        """
        setting = summary_setting(ctx)
        recs = live_history(session, cut, ctx)
        msgs = to_messages(recs, ctx)
        done, cur = split_current(msgs, ctx)
        cnt = counter(ctx.encoding)
        frame = [
            Segment("system", "system", ctx.shape.system_prompt),
            Segment("tools", "system", ctx.shape.tools_text()),
        ]
        frame_tokens = sum(cnt.count_many([s.text for s in frame]))
        cap = ctx.window - ctx.output_ceiling
        max_tokens = max_chat_history_tokens(ctx)
        summary_cap = max(1, min(int(ctx.param("summary_tokens", int(max_tokens // 2))), cap - frame_tokens))
        mode = str(ctx.param("mode", "auto"))
        on_failure = str(ctx.param("on_failure", "upstream"))
        requests: list[SummaryRequest] = []
        receipts: list[SummaryReceipt] = []

        def send(content: str, head: list[Msg]) -> str | None:
            req = self.summary_request(content, head, ctx, summary_cap)
            text, receipt = call_summarizer(ctx, req)
            requests.append(req)
            receipts.append(receipt)
            return text

        summ = ChatSummary(
            max_tokens,
            lambda m: message_tokens(m, ctx),
            lambda ms: messages_tokens(ms, ctx),
            [send],
            int(ctx.param("summary_model_max_input_tokens", ctx.input_limit or ctx.window)),
        )
        done_tokens = sum(t for t, _ in summ.tokenize(done))
        notes: dict[str, Any] = {
            "upstream_commit": UPSTREAM_COMMIT,
            "aider_summary": setting,
            "mode": mode,
            "max_chat_history_tokens": max_tokens,
            "done_messages": len(done),
            "done_tokens": done_tokens,
            "cur_messages": len(cur),
            "too_big": done_tokens > max_tokens,
            "summary_calls": 0,
            "summary_failed": False,
            "done_dropped": False,
            "capacity_dropped": [],
        }
        failed = False
        try:
            if mode == "switch":
                new_done = summ.summarize_all(done) if done else []
            else:
                new_done = summ.summarize(done) if done else []
        except SummaryFailed:
            failed = True
            notes["summary_failed"] = True
            if mode == "switch" or on_failure == "keep":
                new_done = done
            elif on_failure == "empty_template":
                ids = tuple(dict.fromkeys(e for m in done for e in _ids(m)))
                new_done = [_summary_msg(SUMMARY_PREFIX + empty_template(self.template), ids), _ok()]
            else:  # upstream: summarize_end replaces done_messages by the empty result
                new_done = []
                notes["done_dropped"] = True
        # The pinned flow: move_back_cur_messages starts the worker, then appends the commit message and
        # "Ok." to done_messages (base_coder.py:1036-1046; the message is never falsy at :1594 or in
        # architect_coder.py:46); the worker's copy predates the append, so summarize_end finds the lists
        # unequal and keeps done_messages (:1031) -- a failed summary too. Only the background path races.
        discarded = setting == "upstream" and mode != "switch" and bool(notes["too_big"])
        notes["summary_calls"] = len(requests)
        notes["summary_log"] = summ.log
        notes["summary_applied"] = bool(requests) and not failed and not discarded
        req = requests[-1] if requests else None
        receipt = receipts[-1] if receipts else None
        if receipt is not None and failed:
            receipt = replace(receipt, text="")
        if len(requests) > 1:
            notes["earlier_summary_requests"] = [r.fingerprint() for r in requests[:-1]]
        label = summary_label(receipt, "empty template (no summary)") if receipt is not None else ""

        if discarded:  # the unsummarised history, as sent: Aider only warns when it is too big (:1396-1415)
            notes["done_dropped"] = False
            notes["compaction_failed"] = SUMMARY_DISCARDED
            segs = [s for i, m in enumerate(done + cur) for s in self._segments(m, i, label)]
        else:
            units = [self._segments(m, i, label) for i, m in enumerate(new_done + cur)]
            segs = self._fit(units, frame_tokens, cap, notes, ctx)
        if req is not None:
            notes["instruction_sha256"] = sha256_text(self.instruction(ctx))
        all_segs = frame + segs
        tokens = frame_tokens + sum(cnt.count_many([s.text for s in segs]))
        notes.update({"tokens": tokens, "fits": tokens <= cap, "summary_cap": summary_cap})
        return projection(
            self,
            session,
            cut,
            all_segs,
            cap,
            summary_request=req,
            receipt=receipt,
            notes=notes,
            sent_requests=tuple(
                SentRequest(r, cnt.count(rc.text or "")) for r, rc in zip(requests, receipts, strict=False)
            )
            if len(requests) > 1 or discarded
            else (),
        )

    def _segments(self, m: Msg, i: int, label: str) -> list[Segment]:
        key = f"aider:{i}"
        out = []
        for kind, text, eid, rkind in m.parts:
            if kind == "summary":
                out.append(Segment("summary", m.role, text, _ids(m), message=key, label=label))
            elif kind == "tail":
                out.append(Segment("tail", m.role, text, (eid,) if eid else (), record_kind=rkind, message=key))
            else:
                out.append(Segment("header", m.role, text, message=key))
        return out

    def _fit(
        self, units: list[list[Segment]], frame_tokens: int, cap: int, notes: dict[str, Any], ctx: CompactionContext
    ) -> list[Segment]:
        """Capacity guard (ours): drop the oldest non-summary messages behind one marker until it fits."""
        cnt = counter(ctx.encoding)
        sizes = [sum(cnt.count_many([s.text for s in u])) for u in units]
        room = cap - frame_tokens
        if sum(sizes) <= room:
            return [s for u in units for s in u]
        summary_units = [i for i, u in enumerate(units) if any(s.kind == "summary" for s in u)]
        keep_first = summary_units[-1] + 1 if summary_units else 0
        head = [s for u in units[:keep_first] for s in u]
        head_size = sum(sizes[:keep_first])
        if head_size > room:  # the summary itself does not fit: cut it to the room left
            head = [self._cut_summary(s, room, ctx) if s.kind == "summary" else s for s in head]
            head_size = sum(cnt.count_many([s.text for s in head]))
        rest = list(range(keep_first, len(units)))
        dropped: list[int] = []

        def marker(ids: list[int]) -> Segment:
            eids = [e for i in ids for s in units[i] for e in s.entry_ids]
            shown = ", ".join(dict.fromkeys(eids[:3])) + (f", … (+{len(eids) - 3})" if len(eids) > 3 else "")
            return Segment(
                "omitted_marker",
                "user",
                CAPACITY_MARKER.format(n=len(ids), ids=shown or "-"),
                tuple(dict.fromkeys(eids)),
                message="aider:capacity",
            )

        while rest:
            total = head_size + sum(sizes[i] for i in rest)
            if dropped:
                total += cnt.count(marker(dropped).text)
            if total <= room:
                break
            dropped.append(rest.pop(0))
        if dropped:
            mk = marker(dropped)
            fits = head_size + cnt.count(mk.text) + sum(sizes[i] for i in rest) <= room
            notes["capacity_dropped"] = [e for i in dropped for s in units[i] for e in s.entry_ids]
            return head + ([mk] if fits else []) + [s for i in rest for s in units[i]]
        return head + [s for i in rest for s in units[i]]

    @staticmethod
    def _cut_summary(seg: Segment, room: int, ctx: CompactionContext) -> Segment:
        enc = counter(ctx.encoding).encoding
        ids = enc.encode_ordinary(seg.text)
        n = max(0, room - 1)
        if len(ids) <= n:
            return seg
        return replace(seg, text=enc.decode(ids[:n], errors="replace").rstrip("\ufffd") + "…")


# request_shape: as docs/strategies.md documents it, written out (not REQUEST_SHAPE) so verify checks the code.
STRATEGIES.add("aider", Aider(), rank=80, request_shape="dedicated-system", trigger_rule="min(max(W/16, 1,024), 8,192)")

__all__ = [
    "AIDER_TEMPLATE",
    "ALGORITHM_VERSION",
    "Aider",
    "ChatSummary",
    "Msg",
    "OK_REPLY",
    "REQUEST_SHAPE",
    "RUN_OUTPUT",
    "SUMMARIZE_PROMPT",
    "SUMMARY_CHOICES",
    "SUMMARY_DISCARDED",
    "SUMMARY_PREFIX",
    "UPSTREAM_COMMIT",
    "live_history",
    "max_chat_history_tokens",
    "message_tokens",
    "messages_tokens",
    "read_transcript",
    "split_current",
    "summary_setting",
    "to_messages",
    "too_big",
    "transcript",
]
