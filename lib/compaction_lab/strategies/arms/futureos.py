"""FutureOS (the seed's design): ``futureos-deterministic`` and ``futureos-summarized``.

No upstream repository: the design is docs/strategies.md (rules F1–F12) and the seed report
(docs/reference/seed-compaction-report.txt). The trigger and the budgets are `trigger.futureos_trigger`
and `trigger.futureos_budgets`; the evidence index is `evidence`.

Key names: `FutureOS` (the strategy), `build_projection`, `resolve_budgets`, `raised_history`,
`tail_boundaries`, `select_head`, `marker_entry_ids`, `summary_request`, `trigger_rule`.

Rules and the decisions where the spec is silent: docs/strategies.md#8-futureos--futureos-deterministic-futureos-summarized
and docs/strategies.md#futureos; each rule's source and the function here:
docs/strategies.md#futureos-sources-no-upstream-repository.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compaction_lab.core.projection import (
    STAND_IN_LABEL,
    Projection,
    Segment,
    SummaryReceipt,
    SummaryRequest,
    chat_messages,
)
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import TokenCounter, counter
from compaction_lab.strategies.base import (
    STRATEGIES,
    CompactionContext,
    call_summarizer,
    history,
    read_prompt,
    role_of,
)
from compaction_lab.strategies.evidence import (
    HEAD_CHARS,
    TAIL_CHARS,
    TARGET_CHARS,
    evidence_rows,
    evidence_text,
    tool_records,
)
from compaction_lab.strategies.trigger import (
    EVIDENCE_TOKENS,
    HISTORY_MAX,
    HISTORY_TARGET,
    SUMMARY_TOKENS,
    TAIL_TOKENS,
    FutureOSBudgets,
    FutureOSTrigger,
    futureos_budgets,
    futureos_trigger,
)

ALGORITHM_DETERMINISTIC = "deterministic-2"
ALGORITHM_SUMMARIZED = "summarized-2"

#: The handoff instruction appended as the final user message (our own words).
HANDOFF_INSTRUCTION = (
    "Context checkpoint: this conversation is about to be compacted, and the work will resume from "
    "a projection of it. Write a handoff summary that lets the task continue without the full "
    "history. Cover:\n"
    "1. Goals and constraints: what the user asked for, and every requirement, preference and limit "
    "they set.\n"
    "2. Decisions and values: what was decided and why, and the values that matter.\n"
    "3. State: what is done, what was changed and where, what is verified, what is failing or "
    "blocked.\n"
    "4. Next steps: what remains, in order.\n"
    "Preserve identifiers exactly as written: paths, symbols, commands, numbers, ids, error strings. "
    "Be concise and structured. Do not call tools and do not continue the task."
)

#: First line of the summary segment (the summary itself follows).
SUMMARY_PREFIX = "[Handoff summary written at compaction from the history before this point.]\n"

SUMMARY_TEMPLATE = "futureos-handoff"
REQUEST_SHAPE = "prefix-shared"

#: Head classes.
_USER, _ASSISTANT, _TOOL, _LEFT_OUT = "user", "assistant", "tool", "left_out"
_ASSISTANT_KINDS = frozenset({"assistant", "reasoning", "summary"})

_COUNT_CHUNK = 128


# --------------------------------------------------------------------------- prompt


def handoff_instruction(ctx: CompactionContext) -> str:
    """`HANDOFF_INSTRUCTION`, or the text of ``ctx.param("prompt_file")`` when one is given."""
    return read_prompt(ctx.param("prompt_file", None), HANDOFF_INSTRUCTION)


# --------------------------------------------------------------------------- budgets


@dataclass(frozen=True)
class Resolved:
    """Trigger and budgets for one compaction, plus the scale applied in small windows."""

    trigger: FutureOSTrigger
    budgets: FutureOSBudgets
    scale: float


def resolve_budgets(ctx: CompactionContext, with_summary: bool) -> Resolved:
    """Resolve the trigger and the budgets for `ctx` (see the module docstring on scaling)."""
    trig = futureos_trigger(ctx.window, ctx.output_ceiling)
    cnt = counter(ctx.encoding)
    system_t = cnt.count(ctx.shape.system_prompt)
    tools_t = cnt.count(ctx.shape.tools_text())
    tail = int(ctx.param("tail_tokens", TAIL_TOKENS))
    evidence = int(ctx.param("evidence_tokens", EVIDENCE_TOKENS))
    summary = int(ctx.param("summary_tokens", SUMMARY_TOKENS)) if with_summary else 0
    hmax = int(ctx.param("history_max", HISTORY_MAX))
    target = min(int(ctx.param("history_target", HISTORY_TARGET)), hmax)
    want = tail + evidence + summary + target
    avail = trig.effective - system_t - tools_t - trig.margin
    scale = 1.0
    if want > 0 and avail < want:
        scale = max(0, avail) / want
        tail, evidence, summary, target = (int(x * scale) for x in (tail, evidence, summary, target))
    budgets = futureos_budgets(
        trig, system_t, tools_t, tail=tail, evidence=evidence, summary=summary, history_target=target, history_max=hmax
    )
    return Resolved(trig, budgets, scale)


def raised_history(budgets: FutureOSBudgets) -> int:
    """Return the most the history budget may be raised to: ``history_max``, never past the real capacity.

    ``budgets.history`` is the target (``min(target, max, capacity)``); the raise
    only applies when the target would demote assistant originals (`build_projection`).
    """
    return max(budgets.history, min(budgets.history_max, budgets.capacity))


# --------------------------------------------------------------------------- counting


class _Counts:
    """Report-token counts of a record list, counted lazily in batches."""

    def __init__(self, records: Sequence[Record], cnt: TokenCounter):
        self.records = records
        self.cnt = cnt
        self.values: list[int | None] = [None] * len(records)

    def fill(self, indices: Sequence[int]) -> None:
        todo = [i for i in indices if self.values[i] is None]
        for i, n in zip(todo, self.cnt.count_many([self.records[i].text for i in todo]), strict=False):
            self.values[i] = n

    def __getitem__(self, i: int) -> int:
        v = self.values[i]
        if v is None:  # counting backwards from i: fill the chunk before it too
            self.fill(range(max(0, i - _COUNT_CHUNK + 1), i + 1))
            v = self.values[i]
            assert v is not None  # fill counted every index of the chunk, i included
        return v


# --------------------------------------------------------------------------- tail


def tail_boundaries(records: Sequence[Record]) -> list[bool]:
    """Tell, as ``valid[p]`` for p in 0..n, whether the tail may start at ``records[p]``.

    A start is invalid when a tool call sits before it and its output at or
    after it (the output pairs with the latest earlier call of its call_id).
    """
    n = len(records)
    diff = [0] * (n + 2)
    open_calls: dict[str, int] = {}
    for i, r in enumerate(records):
        if r.kind == "tool_call" and r.call_id:
            open_calls[r.call_id] = i
        elif r.kind == "tool_output" and r.call_id and r.call_id in open_calls:
            lo = open_calls[r.call_id]
            diff[lo + 1] += 1
            diff[i + 1] -= 1
    valid, run = [], 0
    for p in range(n + 1):
        run += diff[p]
        valid.append(run == 0)
    return valid


def _tail_copied(record: Record) -> bool:
    """Whether a tail record is copied (system records are left to the system segment)."""
    return record.kind != "system"


def tail_start(records: Sequence[Record], cost: Any, budget: int) -> tuple[int, int]:
    """Where the verbatim tail starts, walking back from the end.

    Returns ``(p, q)``: the tail is ``records[p:]`` (``p == len(records)`` when
    not even the last unit fits) and ``records[q:]`` is the last unit (the
    smallest valid tail), which is what an oversize tail excerpts.
    """
    n = len(records)
    valid = tail_boundaries(records)
    q = max((p for p in range(n) if valid[p]), default=0) if n else 0
    best, acc = n, 0
    for p in range(n - 1, -1, -1):
        if _tail_copied(records[p]):
            acc += cost[p]
        if acc > budget:
            break
        if valid[p]:
            best = p
    return best, q


def excerpt_text(record: Record, share: int, cnt: TokenCounter) -> str | None:
    """Head and tail excerpts of a record around an explicit omission marker, within `share` tokens.

    None when even the bare marker does not fit.
    """
    toks = cnt.encode(record.text)
    eid = record.entry_id

    def build(h: int, t: int) -> str:
        head = cnt.encoding.decode_bytes(toks[:h]).decode("utf-8", "ignore") if h > 0 else ""
        tail = cnt.encoding.decode_bytes(toks[-t:]).decode("utf-8", "ignore") if t > 0 else ""
        omitted = len(toks) - h - t
        marker = f"[… {omitted:,} tokens omitted from entry {eid} — retrievable with history get {eid} …]"
        return "\n".join(x for x in (head, marker, tail) if x)

    bare = build(0, 0)
    overhead = cnt.count(bare) + 2
    body = share - overhead
    if body < 2:
        return bare if cnt.count(bare) <= share else None
    for _ in range(6):
        h = body // 2
        text = build(h, body - h)
        n = cnt.count(text)
        if n <= share:
            return text
        body -= max(1, n - share)
        if body < 2:
            break
    return bare if cnt.count(bare) <= share else None


def oversize_unit(
    unit: Sequence[Record], cost: Any, offset: int, budget: int, cnt: TokenCounter
) -> list[tuple[Record, str | None]] | None:
    """Fit an oversize last unit into the tail budget by water-filling.

    Records are visited smallest first; each gets an equal share of what is
    left; one that fits its share stays verbatim (text None), a larger one is
    excerpted to its share. None when the excerpts cannot fit at all.
    Returned in source order.
    """
    idx = [i for i, r in enumerate(unit) if _tail_copied(r)]
    order = sorted(idx, key=lambda i: (cost[offset + i], i))
    remaining = budget
    out: dict[int, str | None] = {}
    for k, i in enumerate(order):
        share = remaining // (len(order) - k)
        n = cost[offset + i]
        if n <= share:
            out[i] = None
            remaining -= n
            continue
        text = excerpt_text(unit[i], share, cnt)
        if text is None:
            return None
        out[i] = text
        remaining -= cnt.count(text)
    return [(unit[i], out[i]) for i in sorted(out)]


# --------------------------------------------------------------------------- head


def head_class(record: Record) -> str:
    """How a record before the tail is treated: user / assistant original, tool evidence, or left out."""
    if record.kind == "user":
        return _LEFT_OUT if record.injected else _USER
    if record.kind in _ASSISTANT_KINDS:
        return _ASSISTANT
    if record.kind in ("tool_call", "tool_output"):
        return _TOOL
    return _LEFT_OUT  # system (the harness regenerates it)


@dataclass(frozen=True)
class HeadChoice:
    """Which head items are kept verbatim and which are demoted."""

    kept: frozenset[int]
    demoted_users: tuple[int, ...]
    demoted_assistants: tuple[int, ...]


def select_head(
    items: Sequence[tuple[int, str, int]],
    *,
    history_room: int,
    hard_room: int,
    marker_cost: int,
    id_costs: Sequence[int] | None = None,
) -> HeadChoice:
    """Choose the head originals.

    Parameters
    ----------
    items : sequence of (position, class, tokens)
        User and assistant originals in chronological order.
    history_room : int
        The history budget (header excluded) for originals and markers.
    hard_room : int
        The real capacity (header excluded): the most the user originals (and
        the markers) may take when they alone exceed the history budget.
    marker_cost : int
        Upper bound of one demotion marker's tokens without its list of entry
        ids (`_marker_costs`). Adjacent demoted items share one marker.
    id_costs : sequence of int, optional
        Upper bound of the tokens each item's entry id adds to the marker
        that lists it (every demoted entry id is listed); 0 when omitted. The
        cost of a choice is the kept tokens, plus `marker_cost` per run of
        demoted items, plus the id cost of every demoted item.

    Rules: every user original is kept unless the users (with the markers that
    the demoted assistants need) exceed `hard_room`; then the oldest users are
    demoted until they fit, and a demoted user that fits the room the merged
    markers freed is re-admitted (newest first). Assistants are then visited
    newest first, older ones assumed demoted, and one is kept when the cost
    stays within `history_room` (or does not grow: keeping a record no larger
    than the marker room it would otherwise need is never worse; while any user
    text is demoted, only such free keeps are made); one that does not fit is
    demoted and older ones are still tried.
    """
    n = len(items)
    cls = [c for _, c, _ in items]
    ids = list(id_costs) if id_costs is not None else [0] * n
    if len(ids) != n:
        raise ValueError(f"id_costs has {len(ids)} values for {n} items")
    demoted = [c == _ASSISTANT for c in cls]  # assistants start demoted, users kept

    def run_delta(i: int) -> int:
        """Change in the number of demoted runs when item i goes from demoted to kept."""
        left = i > 0 and demoted[i - 1]
        right = i + 1 < n and demoted[i + 1]
        return int(left) + int(right) - 1

    def keep_change(i: int) -> int:
        """Change in cost when item i goes from demoted to kept."""
        return items[i][2] + marker_cost * run_delta(i) - ids[i]

    runs = sum(1 for i in range(n) if demoted[i] and not (i > 0 and demoted[i - 1]))
    cost = (
        sum(t for (_, c, t), d in zip(items, demoted, strict=False) if not d)
        + marker_cost * runs
        + sum(x for x, d in zip(ids, demoted, strict=False) if d)
    )
    demoted_users = False
    for i in range(n):  # the oldest user originals go first, only when they exceed the real capacity
        if cost <= hard_room:
            break
        if cls[i] != _USER:
            continue
        demoted[i] = True  # run_delta(i) now counts i's neighbours as they are
        cost -= keep_change(i)
        demoted_users = True
    if demoted_users:  # merged markers may have freed room: re-admit demoted users, newest first
        for i in range(n - 1, -1, -1):
            if cls[i] == _USER and demoted[i]:
                change = keep_change(i)
                if cost + change <= hard_room:
                    demoted[i] = False
                    cost += change
    users_short = any(d and c == _USER for c, d in zip(cls, demoted, strict=False))
    for i in range(n - 1, -1, -1):  # assistants, newest first
        if cls[i] != _ASSISTANT:
            continue
        change = keep_change(i)
        # While any user text is demoted, assistants only stay where that costs nothing extra.
        if change <= 0 or (not users_short and cost + change <= history_room):
            demoted[i] = False
            cost += change
    kept = frozenset(p for (p, _, _), d in zip(items, demoted, strict=False) if not d)
    demoted_users_final = tuple(p for (p, c, _), d in zip(items, demoted, strict=False) if d and c == _USER)
    demoted_assistants = tuple(p for (p, c, _), d in zip(items, demoted, strict=False) if d and c == _ASSISTANT)
    return HeadChoice(kept, demoted_users_final, demoted_assistants)


_NOUNS = {_ASSISTANT: ("assistant output", "assistant outputs"), _USER: ("user message", "user messages")}


def demotion_marker(entries: Sequence[tuple[str, str, int]]) -> str:
    """One line saying that originals were omitted and not summarised, with entry ids and size.

    `entries` are ``(class, entry_id, tokens)`` of adjacent demoted records
    (class ``assistant`` or ``user``); blocks of one entry count once. Every
    entry id is named (ids are opaque, so no range can stand for them): a
    single entry as ``entry E, N tokens; retrievable: history get E``, several
    as ``N tokens; retrievable: history get <entry>; entries: E1, E2, …`` with
    the list last, in source order. Its size grows with the ids it lists; the
    selection counts them (`_marker_costs`).
    """
    ids = list(dict.fromkeys(eid for _, eid, _ in entries))
    per_class: dict[str, dict[str, None]] = {}
    for cls, eid, _ in entries:
        per_class.setdefault(cls, {})[eid] = None
    total = sum(n for _, _, n in entries)
    if len(ids) == 1:
        noun = _NOUNS[entries[0][0]][0]
        return (
            f"[{noun} omitted / not summarised — entry {ids[0]}, {total:,} tokens; retrievable: history get {ids[0]}]"
        )
    what = " and ".join(
        f"{len(per_class[c])} {_NOUNS[c][len(per_class[c]) != 1]}" for c in (_ASSISTANT, _USER) if c in per_class
    )
    return _multi_marker(what, total, ", ".join(ids))


def _multi_marker(what: str, total: int, listed: str) -> str:
    return f"[{what} omitted / not summarised — {total:,} tokens; retrievable: history get <entry>; entries: {listed}]"


def marker_entry_ids(text: str) -> list[str]:
    """Read back the entry ids a demotion marker names from its text (inverse of `demotion_marker`)."""
    if not (text.startswith("[") and text.endswith("]") and " omitted / not summarised — " in text):
        return []
    body = text[:-1]
    if "; entries: " in body:
        return body.split("; entries: ", 1)[1].split(", ")
    if "; retrievable: history get " in body:
        return [body.rsplit("; retrievable: history get ", 1)[1]]
    return []


def _marker_costs(records: Sequence[Record], cnt: TokenCounter) -> tuple[int, dict[str, int]]:
    """Upper bounds of a demotion marker's size: ``(frame, per_id)``.

    A marker over demoted entries E1..Ek takes at most ``frame + sum(per_id[Ei])``
    tokens: ``frame`` bounds the marker without its id list (any counts and
    total, either class) and a single-entry marker with the longest id;
    ``per_id[E]`` bounds what ``", E"`` adds to the list.
    """
    uniq = list(dict.fromkeys(r.entry_id for r in records)) or ["e"]
    longest = max(uniq, key=len)
    big, many = 10**12, 10**9
    what = f"{many:,} {_NOUNS[_ASSISTANT][1]} and {many:,} {_NOUNS[_USER][1]}"
    samples = [_multi_marker(what, big, ""), _multi_marker(what, big, longest)]
    samples += [demotion_marker([(cls, longest, big)]) for cls in (_USER, _ASSISTANT)]
    frame = max(cnt.count_many(samples)) + 2
    per_id = {e: n + 1 for e, n in zip(uniq, cnt.count_many([f", {e}" for e in uniq]), strict=False)}
    return frame, per_id


# --------------------------------------------------------------------------- header


@dataclass(frozen=True)
class _Stats:
    users: int = 0
    users_demoted: int = 0
    assistants: int = 0
    assistants_demoted: int = 0
    tools: int = 0
    rows: int = 0
    left_out: int = 0
    tail: int = 0
    excerpted: int = 0


def header_text(algorithm_version: str, s: _Stats, *, fallback: bool, summary: bool) -> str:
    """Write the projection's header: the algorithm_version and what was omitted (counts)."""
    parts = [f"{s.users - s.users_demoted} user messages kept verbatim"]
    if s.users_demoted:
        parts[-1] += f" ({s.users_demoted} oldest omitted / not summarised: they exceeded the window)"
    parts.append(
        f"{s.assistants - s.assistants_demoted} of {s.assistants} assistant outputs kept verbatim, "
        f"{s.assistants_demoted} omitted / not summarised (marked where they were)"
    )
    parts.append(f"{s.tools} tool calls/results replaced by an evidence index of {s.rows} rows")
    parts.append(f"{s.left_out} system/injected records left out (the harness re-sends them)")
    text = (
        f"[Compacted context — FutureOS {algorithm_version}"
        + (" (fallback: the handoff summary was unavailable)" if fallback else "")
        + ". Before the recent tail: "
        + "; ".join(parts)
        + ". "
        + ("A handoff summary follows the evidence index. " if summary else "")
        + f"The recent tail ({s.tail} records"
        + (f", {s.excerpted} excerpted" if s.excerpted else "")
        + ") follows verbatim. Originals are unchanged and retrievable with history get <entry>.]"
    )
    return text


# --------------------------------------------------------------------------- summary request


def summary_request(
    session: Session, cut: int, ctx: CompactionContext, max_output_tokens: int, strategy: str = "futureos-summarized"
) -> SummaryRequest:
    """Build the prefix-shared request: the session's own system prompt, tools and messages, instruction last."""
    hist = history(session, cut)
    ids = list(dict.fromkeys(r.entry_id for r in hist))
    # The session's own messages, with the same boundary rule as every request the suite builds
    # (`projection.chat_messages`), so this request repeats the session's previous one token for token.
    messages = chat_messages(
        (role_of(r), r.text, "entry:" + r.entry_id)
        for r in hist
        if not (r.kind == "system" and r.text == ctx.shape.system_prompt)
    )
    messages.append({"role": "user", "content": handoff_instruction(ctx)})
    return SummaryRequest(
        strategy=strategy,
        shape=REQUEST_SHAPE,
        system=ctx.shape.system_prompt,
        tools=tuple(ctx.shape.tools),
        messages=tuple(messages),
        template=SUMMARY_TEMPLATE,
        max_output_tokens=max_output_tokens,
        source_entry_ids=tuple(ids),
    )


def _cut_to(text: str, limit: int, cnt: TokenCounter) -> str:
    toks = cnt.encode(text)
    if len(toks) <= limit:
        return text
    n = max(0, limit)
    while n > 0:
        out = cnt.encoding.decode_bytes(toks[:n]).decode("utf-8", "ignore")
        if cnt.count(out) <= limit:
            return out
        n -= 1
    return ""


# --------------------------------------------------------------------------- projection


def build_projection(
    session: Session,
    cut: int,
    ctx: CompactionContext,
    *,
    strategy: str,
    algorithm_version: str,
    resolved: Resolved,
    summary: str | None = None,
    summary_label: str = "handoff summary",
    request: SummaryRequest | None = None,
    receipt: SummaryReceipt | None = None,
    fallback: bool = False,
) -> Projection:
    """Assemble a FutureOS projection with the given budgets (and summary text, if any)."""
    cnt = counter(ctx.encoding)
    trig, budgets = resolved.trigger, resolved.budgets
    hist = history(session, cut)
    cost = _Counts(hist, cnt)

    # ---- recent tail
    p, q = tail_start(hist, cost, budgets.tail)
    tail_items: list[tuple[Record, str | None]] = []
    if p < len(hist):
        tail_items = [(r, None) for r in hist[p:] if _tail_copied(r)]
    elif hist:
        fitted = oversize_unit(hist[q:], cost, q, budgets.tail, cnt)
        if fitted is not None:
            p, tail_items = q, fitted
    head = hist[:p]

    # ---- head classification
    classes = [head_class(r) for r in head]
    orig_pos = [i for i, c in enumerate(classes) if c in (_USER, _ASSISTANT)]
    cost.fill(orig_pos)
    items = [(i, classes[i], cost[i]) for i in orig_pos]
    tools = [r for r, c in zip(head, classes, strict=False) if c == _TOOL]
    pairs = tool_records(tools)
    left_out = [r for r, c in zip(head, classes, strict=False) if c == _LEFT_OUT]
    left_out += [r for r in hist[p:] if not _tail_copied(r)]

    # ---- evidence index
    rows = evidence_rows(
        pairs,
        budgets.evidence,
        head_chars=int(ctx.param("evidence_head_chars", HEAD_CHARS)),
        tail_chars=int(ctx.param("evidence_tail_chars", TAIL_CHARS)),
        target_chars=int(ctx.param("evidence_target_chars", TARGET_CHARS)),
        encoding=ctx.encoding,
    )

    # ---- summary
    summary_text, truncated = None, False
    if summary is not None:
        summary_text = SUMMARY_PREFIX + summary
        if cnt.count(summary_text) > budgets.summary:
            summary_text = _cut_to(summary_text, budgets.summary, cnt)
            truncated = True

    # ---- head selection (header and marker room reserved up front)
    n_users = sum(1 for _, c, _ in items if c == _USER)
    n_assist = len(items) - n_users
    worst = _Stats(*(len(hist),) * 9)
    header_reserve = (
        cnt.count(header_text(algorithm_version, worst, fallback=fallback, summary=summary is not None)) + 4
    )
    marker_cost, per_id = _marker_costs([head[i] for i in orig_pos], cnt)
    id_costs = [per_id[head[i].entry_id] for i in orig_pos]
    id_cost_at = dict(zip(orig_pos, id_costs, strict=False))
    hard = max(0, budgets.capacity)
    choice = select_head(
        items,
        history_room=budgets.history - header_reserve,
        hard_room=hard - header_reserve,
        marker_cost=marker_cost,
        id_costs=id_costs,
    )
    # The raise: when the target would demote assistant originals, the history budget is raised
    # up to history_max, never past the real capacity, if that keeps some of them.
    history_room, raised = budgets.history, False
    ceiling = raised_history(budgets)
    if choice.demoted_assistants and ceiling > budgets.history:
        alt = select_head(
            items,
            history_room=ceiling - header_reserve,
            hard_room=hard - header_reserve,
            marker_cost=marker_cost,
            id_costs=id_costs,
        )
        if any(classes[i] == _ASSISTANT for i in alt.kept - choice.kept):
            choice, history_room, raised = alt, ceiling, True

    fixed = [Segment("system", "system", ctx.shape.system_prompt), Segment("tools", "system", ctx.shape.tools_text())]
    ev_text = evidence_text(rows)
    ev_ids = tuple(dict.fromkeys(e for r in rows for e in r.entry_ids))
    tail_segs = [
        Segment("tail", role_of(r), r.text, (r.entry_id,), record_kind=r.kind)
        if txt is None
        else Segment(
            "omitted_marker", role_of(r), txt, (r.entry_id,), record_kind=r.kind, label="excerpt: head and tail kept"
        )
        for r, txt in tail_items
    ]
    excerpted = [r.entry_id for r, txt in tail_items if txt is not None]

    def assemble(ch: HeadChoice) -> tuple[list[Segment], int, int]:
        head_segs: list[Segment] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                entries = [(classes[i], head[i].entry_id, cost[i]) for i in run]
                text = demotion_marker(entries)
                head_segs.append(
                    Segment(
                        "omitted_marker",
                        "user",
                        text,
                        tuple(dict.fromkeys(e for _, e, _ in entries)),
                        record_kind=head[run[0]].kind,
                        label="omitted / not summarised",
                    )
                )
                run.clear()

        for i, cls, _ in items:
            if i in ch.kept:
                flush()
                r = head[i]
                kind = "user_original" if cls == _USER else "assistant_original"
                head_segs.append(Segment(kind, role_of(r), r.text, (r.entry_id,), record_kind=r.kind))
            else:
                run.append(i)
        flush()
        stats = _Stats(
            users=n_users,
            users_demoted=len(ch.demoted_users),
            assistants=n_assist,
            assistants_demoted=len(ch.demoted_assistants),
            tools=len(tools),
            rows=len(rows),
            left_out=len(left_out),
            tail=len(tail_items),
            excerpted=len(excerpted),
        )
        header = Segment(
            "header",
            "user",
            header_text(algorithm_version, stats, fallback=fallback, summary=summary_text is not None),
            label="compaction header",
        )
        segs = [*fixed, header, *head_segs]
        if ev_text:
            segs.append(Segment("evidence_index", "user", ev_text, ev_ids, label="deterministic evidence index"))
        if summary_text:
            segs.append(
                Segment(
                    "summary", "user", summary_text, request.source_entry_ids if request else (), label=summary_label
                )
            )
        segs.extend(tail_segs)
        counts = cnt.count_many([s.text for s in segs])
        return segs, sum(counts), sum(counts[2 : 3 + len(head_segs)])  # the header and the head items

    segs, total, history_used = assemble(choice)
    # Defensive: the reserves above are upper bounds, but never commit an overflow we can avoid:
    # demote the oldest kept assistant originals, enough of them at once to cover the overage.
    while total > trig.effective:
        kept_assist = sorted(i for i in choice.kept if classes[i] == _ASSISTANT)
        if not kept_assist:
            break
        drop, freed = [], 0
        for i in kept_assist:
            drop.append(i)
            freed += cost[i] - id_cost_at[i]
            if freed >= total - trig.effective + marker_cost:
                break
        choice = HeadChoice(
            choice.kept - set(drop), choice.demoted_users, tuple(sorted((*choice.demoted_assistants, *drop)))
        )
        segs, total, history_used = assemble(choice)

    notes = {
        "trigger": {
            "window": trig.window,
            "output_ceiling": trig.output_ceiling,
            "economic": trig.economic,
            "margin": trig.margin,
            "hard": trig.hard,
            "effective": trig.effective,
            "bound": trig.bound,
        },
        "budgets": {**dataclasses.asdict(budgets), "history": history_room, "scale": resolved.scale},
        "history_raised": raised,
        "history_used": history_used,
        "tail_start": hist[p].source_order if p < len(hist) else cut,
        "tail_records": len(tail_items),
        "tail_excerpted": excerpted,
        "user_originals": n_users,
        "user_demoted": [head[i].entry_id for i in choice.demoted_users],
        "assistant_originals": n_assist,
        "assistant_kept": sum(1 for i in choice.kept if classes[i] == _ASSISTANT),
        "assistant_demoted": list(dict.fromkeys(head[i].entry_id for i in choice.demoted_assistants)),
        "demoted_tokens": sum(cost[i] for i in (*choice.demoted_users, *choice.demoted_assistants)),
        "tool_records": len(pairs),
        "evidence_rows": len(rows),
        "evidence_entry_ids": list(ev_ids),
        "left_out": [r.entry_id for r in left_out],
        "summary_truncated": truncated,
        "fallback": fallback,
        "overflow": total > trig.effective,
        "estimated_tokens": total,
    }
    return Projection(
        strategy=strategy,
        algorithm_version=algorithm_version,
        session_id=session.id,
        cut=cut,
        segments=tuple(segs),
        capacity=trig.effective,
        estimator="tiktoken",
        summary_request=request,
        receipt=receipt,
        notes=notes,
    )


# --------------------------------------------------------------------------- strategies


@dataclass(frozen=True)
class FutureOS:
    """A FutureOS strategy: deterministic (no model call) or summarized (one prefix-shared call)."""

    name: str
    algorithm_version: str
    summarized: bool
    estimator: str = "tiktoken"

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Apply the FutureOS trigger: tell whether the input no longer fits under ``effective``."""
        return futureos_trigger(ctx.window, ctx.output_ceiling).fires(tokens)

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the session at `cut`, with a model summary when summarised (the deterministic one on failure)."""
        if not self.summarized:
            return build_projection(
                session,
                cut,
                ctx,
                strategy=self.name,
                algorithm_version=ALGORITHM_DETERMINISTIC,
                resolved=resolve_budgets(ctx, with_summary=False),
            )
        resolved = resolve_budgets(ctx, with_summary=True)
        # The summary segment is SUMMARY_PREFIX + the answer: ask for what is left of the budget.
        answer_cap = max(0, resolved.budgets.summary - counter(ctx.encoding).count(SUMMARY_PREFIX))
        request = summary_request(session, cut, ctx, answer_cap, strategy=self.name)
        text, receipt = call_summarizer(ctx, request)
        if text is not None and not text.strip():
            text, receipt = (
                None,
                dataclasses.replace(receipt, text="", fallback=True, error="the summarizer returned an empty summary"),
            )
        if text is None:  # SummaryUnavailable, or any summarizer failure: fall back
            return build_projection(
                session,
                cut,
                ctx,
                strategy=self.name,
                algorithm_version=ALGORITHM_DETERMINISTIC,
                resolved=resolve_budgets(ctx, with_summary=False),
                request=request,
                receipt=receipt,
                fallback=True,
            )
        return build_projection(
            session,
            cut,
            ctx,
            strategy=self.name,
            algorithm_version=ALGORITHM_SUMMARIZED,
            resolved=resolved,
            summary=text,
            summary_label=STAND_IN_LABEL if receipt.stand_in else "handoff summary",
            request=request,
            receipt=receipt,
        )


FUTUREOS_DETERMINISTIC = FutureOS("futureos-deterministic", ALGORITHM_DETERMINISTIC, summarized=False)
FUTUREOS_SUMMARIZED = FutureOS("futureos-summarized", ALGORITHM_SUMMARIZED, summarized=True)


# request_shape: as docs/strategies.md documents it, written out (not REQUEST_SHAPE) so verify checks the code.
def trigger_rule(ctx: CompactionContext) -> str:
    """Say which term of the trigger binds at ``ctx``'s W and O: ``economic`` (80% of W) or ``output`` (W - O - margin)."""
    return futureos_trigger(ctx.window, ctx.output_ceiling).bound


STRATEGIES.add(
    "futureos-summarized", FUTUREOS_SUMMARIZED, rank=10, request_shape="prefix-shared", trigger_rule=trigger_rule
)
STRATEGIES.add("futureos-deterministic", FUTUREOS_DETERMINISTIC, rank=20, trigger_rule=trigger_rule)

__all__ = [
    "ALGORITHM_DETERMINISTIC",
    "ALGORITHM_SUMMARIZED",
    "FUTUREOS_DETERMINISTIC",
    "FUTUREOS_SUMMARIZED",
    "FutureOS",
    "HANDOFF_INSTRUCTION",
    "HeadChoice",
    "Resolved",
    "SUMMARY_PREFIX",
    "build_projection",
    "demotion_marker",
    "excerpt_text",
    "handoff_instruction",
    "head_class",
    "marker_entry_ids",
    "oversize_unit",
    "raised_history",
    "resolve_budgets",
    "select_head",
    "summary_request",
    "tail_boundaries",
    "tail_start",
    "trigger_rule",
]
