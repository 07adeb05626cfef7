"""Baselines none of the seed systems tested: ``full``, ``truncate-oldest``, and ``observation-masking``.

`Full` keeps everything (the recall ceiling), `TruncateOldest` drops the oldest records,
`ObservationMasking` masks old tool outputs as the paper's SWE-agent fork does. They return the
same `Projection` as the agent arms, so every chart and exam treats them alike.

Upstream (``observation-masking`` only): Recursive-Safeguarding/the-complexity-trap @
1b07decf4ca4b5d722d25a57810fe18a2d8b60fb.

Rules (shared conventions, each arm, the overflow fallback): docs/strategies.md#baselines; upstream
file:line → function: docs/strategies.md#observation-masking-upstream-pins-and-projectionmessages-boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compaction_lab.core.projection import Projection, Segment
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import counter
from compaction_lab.strategies.base import STRATEGIES, CompactionContext, history, projection, role_of

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
    """Return the system and tools segments, and their size."""
    segs = [Segment("system", "system", ctx.shape.system_prompt), Segment("tools", "system", ctx.shape.tools_text())]
    return segs, sum(counter(ctx.encoding).count_many([s.text for s in segs]))


def _capacity(ctx: CompactionContext) -> int:
    """W − O in report tokens: the room the model's W − O leaves under the session's calibration.

    The baselines fit what the agent's model would accept, so a calibrated session (its log records
    usage: `strategies.calibration`) gets ``(W − O) / calibration`` report tokens; uncalibrated, W − O.
    """
    return int((ctx.window - ctx.output_ceiling) / float(ctx.calibration or 1.0))


def _verbatim(rec: Record, kind: str) -> Segment:
    return Segment(kind, role_of(rec), rec.text, (rec.entry_id,), record_kind=rec.kind)


def _head_kind(rec: Record) -> str:
    """Segment kind of a verbatim record kept before the tail."""
    return "assistant_original" if role_of(rec) in ("assistant", "tool") else "user_original"


def _call_of(records: Sequence[Record]) -> list[int | None]:
    """Link each tool output to its call: for each record, the call's index, else None.

    A tool output answers the latest earlier call with the same call id.
    """
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
        """Project the whole history at `cut` verbatim, whether or not it fits."""
        recs = _records(session, cut, ctx)
        frame, frame_tokens = _frame(ctx)
        total = frame_tokens + sum(_sizes(recs, ctx))
        cap = _capacity(ctx)
        return projection(
            self,
            session,
            cut,
            frame + [_verbatim(r, "tail") for r in recs],
            cap,
            notes={"fits": total <= cap, "tokens": total, "records": len(recs), "label_tag": "uncompacted reference"},
        )

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Never: this baseline does not compact."""
        return False


# --------------------------------------------------------------------------- truncate-oldest

TRUNCATE_HEADER = (
    "[{version}: the {n} oldest records of this session ({tokens} tokens) were dropped to fit "
    "the context window. They are not summarised; the originals stay in the session archive.]"
)


@dataclass(frozen=True)
class TruncateOldest:
    """Drop the oldest whole records until the rest fits (what a naive agent does)."""

    name: str = "truncate-oldest"
    algorithm_version: str = "truncate-oldest-1"
    estimator: str = ESTIMATOR

    def header(self, n: int, tokens: int) -> str:
        """Write the header saying how many records (and tokens) were dropped."""
        return TRUNCATE_HEADER.format(version=self.algorithm_version, n=n, tokens=tokens)

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the history at `cut`, its oldest whole records dropped until the rest fits."""
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
            kept_tokens = sum(sz for sz, d in zip(sizes, dropped, strict=False) if not d)
            header = self.header(n_dropped, suffix[0] - kept_tokens) if n_dropped else ""
            used = kept_tokens + (_count(header, ctx) if header else 0)
            if used <= budget or start >= n:
                break
            start += 1
        segs = list(frame)
        if header:
            segs.append(Segment("header", "user", header))
        segs += [_verbatim(r, "tail") for r, d in zip(recs, dropped, strict=False) if not d]
        return projection(
            self,
            session,
            cut,
            segs,
            cap,
            notes={
                "fits": frame_tokens + used <= cap,
                "tokens": frame_tokens + used,
                "dropped": n_dropped,
                "orphans_dropped": orphans,
                "dropped_tokens": suffix[0] - kept_tokens,
                "record_budget": budget,
                "kept": n - n_dropped,
            },
        )

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """When the input reaches ``W - O``."""
        return _fires_at_capacity(tokens, ctx)


# --------------------------------------------------------------------------- observation-masking

MASK_AFTER_TURNS = 10
#: Upstream's placeholder for a masked observation (the-complexity-trap @ 1b07decf4ca4,
#: sweagent/agent/history_processors.py:143): the output's line count, nothing else.
MASK_PLACEHOLDER = "Old environment output: ({lines} lines omitted)"
#: ``placeholder="archive"``: our marker (observation-masking-1's), naming the entry and its size.
MASK_MARKER = "[tool output omitted — entry {entry}, {tokens} tokens; retrievable from the session archive]"
MASK_HEADER = (
    "[{version}: {turns} oldest {units} and {records} further records ({tokens} tokens) were dropped "
    "to fit the context window; {masked} older tool outputs are replaced by placeholders. Nothing "
    "here is summarised; the originals stay in the session archive.]"
)
#: Mask units: the paper's agent step (default) and observation-masking-1's user turn.
MASK_UNITS = ("agent_step", "user_turn")
_LEGACY_UNITS = {"step": "agent_step", "user": "user_turn"}  # observation-masking-1's `turn_unit` values
_MODEL_KINDS = ("assistant", "reasoning", "tool_call")  # what one model call writes
_BETWEEN_STEPS = ("user", "system", "summary")  # input to the next model call


def _turns(records: Sequence[Record], unit: str) -> list[int]:
    """Assign each record its unit number (0-based, non-decreasing).

    ``agent_step``: a step starts at a model record (assistant, reasoning,
    tool call) that follows something else — unless it is a block of the same
    entry as the last model record (one message whose outputs were recorded
    between its blocks). User, system and summary records directly before a
    step belong to it; records before the first step belong to the first.
    ``user_turn``: a turn starts at a non-injected user message; records
    before the first belong to the first.
    """
    unit = _LEGACY_UNITS.get(unit, unit)
    if unit not in MASK_UNITS:
        raise ValueError(f"unknown mask_unit {unit!r}; expected one of {MASK_UNITS}")
    n = len(records)
    if unit == "user_turn":
        starts = [r.kind == "user" and not r.injected for r in records]
    else:
        starts, last_model, prev_model = [], None, False
        for r in records:
            model = r.kind in _MODEL_KINDS
            starts.append(model and not prev_model and r.entry_id != last_model)
            if model:
                last_model = r.entry_id
            prev_model = model
    out, t, started = [], 0, False
    for s in starts:
        if s:
            if started:
                t += 1
            started = True
        out.append(t)
    if unit == "agent_step":  # input between steps goes with the step that answers it
        for i in range(n - 2, -1, -1):
            if records[i].kind in _BETWEEN_STEPS and out[i + 1] == out[i] + 1:
                out[i] = out[i + 1]
    return out


def _first_protected(records: Sequence[Record], turn: Sequence[int], n_turns: int, m: int, unit: str) -> int:
    """Return the first unit whose tool outputs stay verbatim.

    ``agent_step``: the last `m` steps *that produced an observation* are
    kept, as upstream keeps the last n observations (a step with no output —
    a final answer — has nothing to keep and does not use up the window; the
    steps after the oldest kept one are kept whatever they hold).
    ``user_turn``: the last `m` turns.
    """
    if unit == "user_turn":
        return max(0, n_turns - m)
    if m <= 0:
        return n_turns
    observed = sorted({turn[i] for i, r in enumerate(records) if r.kind == "tool_output"})
    return observed[-m] if len(observed) >= m else 0


@dataclass(frozen=True)
class ObservationMasking:
    """Keep all prose and calls verbatim; mask tool outputs older than the last M agent steps.

    Masked outputs become upstream's placeholder (the paper's ``last_n_observations``, n = 10).
    """

    name: str = "observation-masking"
    algorithm_version: str = "observation-masking-2"
    estimator: str = ESTIMATOR

    def marker(self, rec: Record, tokens: int, placeholder: str = "upstream") -> str:
        """Write the text standing for a masked output: upstream's line count, or (``archive``) our entry marker."""
        if placeholder == "archive":
            return MASK_MARKER.format(entry=rec.entry_id, tokens=tokens)
        if placeholder != "upstream":
            raise ValueError(f"unknown placeholder {placeholder!r}; expected 'upstream' or 'archive'")
        return MASK_PLACEHOLDER.format(lines=len(rec.text.splitlines()))

    def header(self, turns: int, records: int, tokens: int, masked: int, unit: str = "agent_step") -> str:
        """Write the header saying what was dropped (whole units, records, tokens) and how many outputs masked."""
        units = "agent steps" if unit == "agent_step" else "turns"
        return MASK_HEADER.format(
            version=self.algorithm_version, turns=turns, units=units, records=records, tokens=tokens, masked=masked
        )

    def _header(
        self,
        recs: Sequence[Record],
        turn: Sequence[int],
        n_turns: int,
        dropped: Sequence[bool],
        masked: Sequence[bool],
        sizes: Sequence[int],
        unit: str = "agent_step",
    ) -> tuple[str, int]:
        """Return the header for what was dropped ("" when nothing was), and how many whole turns were dropped."""
        n = len(recs)
        whole = [True] * n_turns  # turn t entirely dropped?
        for i in range(n):
            if not dropped[i]:
                whole[turn[i]] = False
        dropped_turns = sum(whole)
        if not any(dropped):
            return "", dropped_turns
        in_turns = sum(1 for i in range(n) if dropped[i] and whole[turn[i]])
        return self.header(
            dropped_turns,
            sum(dropped) - in_turns,
            sum(sizes[i] for i in range(n) if dropped[i]),
            sum(1 for i in range(n) if masked[i] and not dropped[i]),
            unit,
        ), dropped_turns

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the history at `cut` with old tool outputs masked, falling back as the module says."""
        recs = _records(session, cut, ctx)
        n = len(recs)
        sizes = _sizes(recs, ctx)
        frame, frame_tokens = _frame(ctx)
        cap = _capacity(ctx)
        budget = cap - frame_tokens
        m = max(0, int(ctx.param("mask_after_turns", MASK_AFTER_TURNS)))
        unit = str(ctx.param("mask_unit", ctx.param("turn_unit", "agent_step")))
        unit = _LEGACY_UNITS.get(unit, unit)
        placeholder = str(ctx.param("placeholder", "upstream"))
        turn = _turns(recs, unit)
        n_turns = turn[-1] + 1 if recs else 0
        protected = _first_protected(recs, turn, n_turns, m, unit)
        outputs = [i for i, r in enumerate(recs) if r.kind == "tool_output"]
        markers = {i: self.marker(recs[i], sizes[i], placeholder) for i in outputs}
        msize = dict(zip(outputs, counter(ctx.encoding).count_many([markers[i] for i in outputs]), strict=False))
        masked = [recs[i].kind == "tool_output" and turn[i] < protected for i in range(n)]
        dropped = [False] * n

        def cost(i: int) -> int:
            return msize[i] if masked[i] else sizes[i]

        total = sum(cost(i) for i in range(n))
        reserve = _count(self.header(n_turns, n, sum(sizes), n, unit), ctx)
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
            header, dropped_turns = self._header(recs, turn, n_turns, dropped, masked, sizes, unit)
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
        return projection(
            self,
            session,
            cut,
            segs,
            cap,
            notes={
                "fits": frame_tokens + kept_tokens <= cap,
                "tokens": frame_tokens + kept_tokens,
                "turns": n_turns,
                "mask_unit": unit,
                "placeholder": placeholder,
                "mask_after_turns": m,
                "masked": sum(1 for i in range(n) if masked[i] and not dropped[i]),
                "masked_tokens": sum(sizes[i] for i in range(n) if masked[i] and not dropped[i]),
                "dropped": sum(dropped),
                "dropped_turns": dropped_turns,
                "fallback_steps": steps,
            },
        )

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """When the (unmasked) input reaches ``W - O``."""
        return _fires_at_capacity(tokens, ctx)


STRATEGIES.add("full", Full(), rank=90)
STRATEGIES.add("truncate-oldest", TruncateOldest(), rank=100, trigger_rule="W - O")
STRATEGIES.add("observation-masking", ObservationMasking(), rank=110, trigger_rule="W - O")

__all__ = [
    "Full",
    "MASK_MARKER",
    "MASK_PLACEHOLDER",
    "ObservationMasking",
    "TruncateOldest",
]
