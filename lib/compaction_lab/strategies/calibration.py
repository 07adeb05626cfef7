"""Calibration: the agent's own token counts, read from its log, against the report tokenizer's.

Every size the suite reports is counted with the report tokenizer (cl100k). The agent's model counts the
same request with its own tokenizer (Claude's counts ~27% more), and it is the model's count that decides
whether a request fits the window, where the agent compacts, and whether an arm's projection could be
sent. Where a log records usage (pi ``usage``, Claude Code ``message.usage``, Codex ``token_count``,
OpenCode ``tokens``: the importers' ``metadata["usage"]`` rows), each recorded model call measured one
request: the history before the call's entry. Its provider input tokens (`request_total`) over the
report tokenizer's count of that request (`request_sizes`) is one ratio; a session's calibration is the
median of its ratios, with their spread and number (`Calibration`, `calibrate`) — when a tokenizer can
explain it (`PLAUSIBLE`, `MAX_IQR_RATIO`; else uncalibrated, with the reason). Only calls before the
session's first recorded compaction are used: their request is the uncompacted history, which the suite
counts exactly. A session without usage is uncalibrated: factor 1.0, labelled `UNCALIBRATED`.

`model_tokens` turns report tokens into the model's (calibrated) tokens; `over_window` compares those
with the usable capacity W − O. `calibrated_context` puts a session's factor into the
`CompactionContext` (``ctx.calibration``), which the triggers upstream drives from API usage read
(`CompactionContext.model_tokens`). `live_request_tokens` is the report-token size of the request an
agent held at one of its recorded compactions (after its earlier ones), and `tokens_before` the size its
log recorded there (pi ``tokensBefore``, Claude Code ``preTokens``).

Design: docs/exams.md (cuts, over_window) and docs/session-formats.md (usage rows).
"""

from __future__ import annotations

import itertools
import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from compaction_lab.core.session import Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.tokens import counter
from compaction_lab.strategies.arms import recorded as rec
from compaction_lab.strategies.base import CompactionContext, history

#: The ``calibration`` label of a session whose log records no usage (its factor is 1.0).
UNCALIBRATED = "uncalibrated (cl100k)"

#: The factors a tokenizer difference can explain (report tokens to a model's); a median outside is not
#: a tokenizer's, and the session stays uncalibrated with the reason.
PLAUSIBLE: tuple[float, float] = (0.5, 2.0)

#: The widest spread of ratios (third quartile over first) a calibration may have: a tokenizer's ratio is
#: steady over a session's requests; one that drifts means the log's usage counts something else too.
MAX_IQR_RATIO = 1.25


@dataclass(frozen=True)
class Calibration:
    """A session's ratio of the provider's input tokens to the report tokenizer's count of the same requests.

    Parameters
    ----------
    session_id : str
    factor : float
        The median ratio over the requests measured; 1.0 when uncalibrated.
    n : int
        Requests measured (0: uncalibrated).
    low, high : float or None
        The smallest and largest ratio.
    q1, q3 : float or None
        The ratios' quartiles (the interquartile range).
    reason : str
        Why the session is uncalibrated ("" when it is calibrated).
    """

    session_id: str
    factor: float = 1.0
    n: int = 0
    low: float | None = None
    high: float | None = None
    q1: float | None = None
    q3: float | None = None
    reason: str = ""

    @property
    def calibrated(self) -> bool:
        """Whether the log's usage measured at least one request."""
        return self.n > 0

    @property
    def value(self) -> float | None:
        """The factor for a table's ``calibration`` column: None when uncalibrated."""
        return self.factor if self.calibrated else None

    @property
    def label(self) -> str:
        """``×1.284 (median of 171 requests, 1.252–3.090)``, or `UNCALIBRATED`."""
        if not self.calibrated:
            return UNCALIBRATED
        return f"×{self.factor:.3f} (median of {self.n} requests, {self.low:.3f}–{self.high:.3f})"

    def tokens(self, report_tokens: float) -> int:
        """Return the model's tokens for `report_tokens` report tokens (rounded to the nearest token)."""
        return round(float(report_tokens) * self.factor)

    def row(self) -> dict[str, Any]:
        """Columns for a per-session table: factor, n, min, max, quartiles, label."""
        return {
            "calibration": self.value,
            "calibration_n": self.n,
            "calibration_min": self.low,
            "calibration_max": self.high,
            "calibration_q1": self.q1,
            "calibration_q3": self.q3,
            "calibration_label": self.label,
            "calibration_reason": self.reason,
        }


# --------------------------------------------------------------------------- usage rows -> requests


def request_total(row: Mapping[str, Any], session: Session) -> int | None:
    """Return the provider's input tokens of the request one usage row measured (None: the row records none).

    Logs differ on whether ``input_tokens`` includes the cached tokens (OpenAI, Codex: yes, the
    importer sets ``metadata["usage_input_includes_cached"]``; Anthropic, pi: no, the request is
    fresh + cache read + cache write). `cost.model.measured_vs_simulated` reads its rows by this rule.
    """
    keys = ("input_tokens", "cached_tokens", "cache_write_tokens")
    if not any(isinstance(row.get(k), int | float) for k in keys):
        return None
    fresh, cached, write = (int(row.get(k) or 0) for k in keys)
    return fresh if session.metadata.get("usage_input_includes_cached") else fresh + cached + write


def usage_requests(session: Session) -> list[tuple[int, int, int]]:
    """List the requests the session's usage rows measured: ``(call, cut, provider input tokens)``.

    ``call`` is the row's index in ``metadata["usage"]``; ``cut`` the first record of the row's
    entry (the request held every record before the model's answer). Rows whose entry left no
    record (an aborted call) or that record no input are left out.
    """
    first: dict[str, int] = {}
    for r in session.records:
        first.setdefault(r.entry_id, r.source_order)
    out = []
    for i, row in enumerate(session.metadata.get("usage") or ()):
        if not isinstance(row, Mapping):
            continue
        cut = first.get(str(row.get("entry_id")))
        total = request_total(row, session)
        if cut is not None and total is not None:
            out.append((i, cut, total))
    return out


#: The last sizes counted, by the very session object: a session's cut and its calibration both need them.
_SIZED: deque[tuple[Session, str, CallShape, tuple[int, ...]]] = deque(maxlen=16)


def request_sizes(session: Session, ctx: CompactionContext) -> list[int]:
    """Size the uncompacted request at every boundary: ``sizes[c]`` for ``c`` in ``0..n`` (report tokens).

    ``sizes[c]`` holds the records before ``c`` — the ``full`` arm's projection at cut ``c`` (system
    prompt and tools of the session's call shape, then every history record but the system prompt itself).
    Counted once per session object, encoding and call shape (a copy is returned).
    """
    for held, encoding, shape, sizes in _SIZED:
        if held is session and encoding == ctx.encoding and shape == ctx.shape:
            return list(sizes)
    counted = _count_sizes(session, ctx)
    _SIZED.appendleft((session, ctx.encoding, ctx.shape, tuple(counted)))
    return counted


def _count_sizes(session: Session, ctx: CompactionContext) -> list[int]:
    shape = ctx.shape.for_session(session)
    cnt = counter(ctx.encoding)
    frame = sum(cnt.count_many([shape.system_prompt, shape.tools_text()]))
    kept = {
        r.source_order for r in history(session, None) if not (r.kind == "system" and r.text == shape.system_prompt)
    }
    sizes = cnt.count_many([r.text if r.source_order in kept else "" for r in session.records])
    return [frame + s for s in itertools.accumulate(sizes, initial=0)]


def first_compaction(session: Session) -> int | None:
    """Return the cut of the session's first compaction its log records (None: none recorded)."""
    cuts = [
        c["source_order"]
        for c in session.metadata.get("compactions") or ()
        if isinstance(c, Mapping) and isinstance(c.get("source_order"), int)
    ]
    return min(cuts, default=None)


# --------------------------------------------------------------------------- calibration


def _calibrate(session: Session, ctx: CompactionContext) -> Calibration:
    measured = usage_requests(session)
    if not measured:
        return Calibration(session.id, reason="its log records no usage")
    limit = first_compaction(session)
    sizes = request_sizes(session, ctx)
    ratios = [
        total / sizes[cut]
        for _, cut, total in measured
        if total > 0 and sizes[cut] > 0 and (limit is None or cut <= limit)
    ]
    if not ratios:
        return Calibration(session.id, reason="no recorded usage before its first compaction")
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    median = statistics.median(ratios)
    if not PLAUSIBLE[0] <= median <= PLAUSIBLE[1] or q3 > q1 * MAX_IQR_RATIO:
        # A tokenizer scales a request; a request the log's usage counts but the transcript does not hold (the
        # agent's own system prompt and tool definitions: Claude Code's ~17k) adds a constant no factor can carry.
        return Calibration(
            session.id,
            reason=(
                f"its usage does not scale with what its log holds: ratio {median:.2f} "
                f"(quartiles {q1:.2f}–{q3:.2f}, {len(ratios)} requests); the requests hold text the log does not "
                "record (a system prompt, tool definitions)"
            ),
        )
    return Calibration(session.id, median, len(ratios), min(ratios), max(ratios), q1, q3)


#: The last calibrations made, by the very session object (a run asks for the same session many times).
_HELD: deque[tuple[Session, str, CallShape, Calibration]] = deque(maxlen=64)


def calibrate(session: Session, ctx: CompactionContext | None = None) -> Calibration:
    """Calibrate `session` from its recorded usage (see the module docstring); uncalibrated without usage."""
    ctx = ctx or CompactionContext()
    if not session.metadata.get("usage"):
        return Calibration(session.id, reason="its log records no usage")
    for held, encoding, shape, cal in _HELD:
        if held is session and encoding == ctx.encoding and shape == ctx.shape:
            return cal
    cal = _calibrate(session, ctx)
    _HELD.appendleft((session, ctx.encoding, ctx.shape, cal))
    return cal


def model_tokens(tokens: float, session: Session, ctx: CompactionContext | None = None) -> int:
    """Return the model's tokens for `tokens` report tokens of `session` (as they are when uncalibrated)."""
    return calibrate(session, ctx).tokens(tokens)


def usable_capacity(ctx: CompactionContext) -> int:
    """W − O: the most a request may hold (in the model's tokens) and still leave room for the reply."""
    return int(ctx.window) - int(ctx.output_ceiling)


def over_window(tokens: float, session: Session, ctx: CompactionContext) -> bool:
    """Whether a request of `tokens` report tokens is larger, in the model's tokens, than W − O."""
    return model_tokens(tokens, session, ctx) > usable_capacity(ctx)


def calibrated_context(session: Session, ctx: CompactionContext) -> CompactionContext:
    """`ctx` with the session's factor as ``calibration`` (the triggers driven by API usage read it)."""
    factor = calibrate(session, ctx).factor
    return ctx if factor == ctx.calibration else replace(ctx, calibration=factor)


# --------------------------------------------------------------------------- recorded compactions


def tokens_before(session: Session, cut: int) -> int | None:
    """Return the size the log recorded for the request at its compaction at `cut` (None: not recorded).

    pi's compaction entry carries ``tokensBefore`` (``metadata["compactions"][i]["tokens_before"]``),
    Claude Code's ``compact_boundary`` its ``preTokens`` (``pre_tokens``).
    """
    for c in session.metadata.get("compactions") or ():
        if isinstance(c, Mapping) and c.get("source_order") == cut:
            for key in ("tokens_before", "pre_tokens"):
                if isinstance(c.get(key), int) and not isinstance(c.get(key), bool):
                    return int(c[key])
    return None


def live_request_tokens(session: Session, cut: int, ctx: CompactionContext) -> int:
    """Report tokens of the request the agent held at its recorded compaction at `cut`.

    Before its first compaction that is the uncompacted history (`request_sizes`); after one, the
    agent's next request at its previous compaction (the ``recorded`` arm's projection there) and every
    context record from there up to `cut`.
    """
    found, _ = rec.find(session)
    previous = [rc for rc in found if rc.cut < cut]
    if not previous:
        return request_sizes(session, ctx)[cut]
    last = previous[-1]
    shaped = replace(ctx, shape=ctx.shape.for_session(session))
    base = int(rec.Recorded().compact(session, last.cut, shaped).notes["tokens"])
    cnt = counter(ctx.encoding)
    later = [r.text for r in history(session, cut) if r.source_order >= last.after]
    return base + sum(cnt.count_many(later))


__all__ = [
    "UNCALIBRATED",
    "Calibration",
    "calibrate",
    "calibrated_context",
    "first_compaction",
    "live_request_tokens",
    "model_tokens",
    "over_window",
    "request_sizes",
    "request_total",
    "tokens_before",
    "usable_capacity",
    "usage_requests",
]
