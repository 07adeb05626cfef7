"""Where an imported session is cut for the exam: where compaction would really happen.

A synthetic chain is cut where its bank says (fractions of its records). A user's own session is cut by
the run's ``cut`` parameter:

``auto`` (default)
    ``recorded`` where the session's log holds compactions its agent made, else ``capacity``.
``capacity``
    Where its uncompacted request would first exceed the usable capacity W − O (the window minus the
    output ceiling) in the agent's model's tokens (report tokens calibrated by the session's own usage,
    `strategies.calibration`; as they are when its log records none): the first record boundary ``c`` — one no tool call/output pair
    straddles — at which the whole history before ``c``, with the call shape's system prompt and tool
    definitions, is larger than W − O. Every arm must have compacted by then, so all arms are examined
    at the same point, and the ``full`` arm there is by construction over the window (the uncompacted
    reference). A session whose whole request never gets there *would not compact at W*: it is listed
    with its size and not cut (lower ``window`` to study it).
``end``
    After its last record (the seed report's forced compaction at the end).
``recorded``
    At each compaction its agent recorded (pi, Claude Code, Codex, OpenCode logs); a session without
    one is listed with the reason and not cut.

`SessionCut` says, per session, what was decided and why; the exam writes one row per imported session
(``exam_sessions.parquet``, `SESSION_COLUMNS`: report ``tokens``, calibrated ``tokens_model`` and the
``calibration`` factor, null when uncalibrated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction_lab.core.session import Session
from compaction_lab.strategies import calibration as cal
from compaction_lab.strategies.arms import recorded as rec
from compaction_lab.strategies.arms.futureos import tail_boundaries
from compaction_lab.strategies.base import CompactionContext

#: The values of the ``cut`` parameter, the default first.
CUT_MODES: tuple[str, ...] = ("auto", "capacity", "end", "recorded")

#: Columns of ``exam_sessions.parquet``: one row per imported session.
SESSION_COLUMNS: list[str] = [
    "session_id",
    "tokens",
    "tokens_model",
    "calibration",
    "would_compact",
    "cut",
    "questions",
    "reason",
]


@dataclass(frozen=True)
class SessionCut:
    """Where one session is cut for the exam, and why.

    Parameters
    ----------
    session_id : str
    tokens : int
        Report tokens of the session's whole uncompacted request (system prompt, tools, every record).
    capacity : int
        The usable capacity W − O it was compared with (the model's tokens).
    cuts : tuple of int
        The cuts examined (records with ``source_order < cut`` are compacted); empty: not cut.
    reason : str
        Why the session is not cut ("" when it is).
    tokens_model : int, optional
        `tokens` in the agent's model's tokens (`calibration.model_tokens`); None: as `tokens`.
    calibration : float, optional
        The session's calibration factor; None when its log records no usage.
    mode : str
        The mode that cut it (``auto`` resolves to ``recorded`` or ``capacity``; "" for a `SessionCut`
        made by hand: the run's mode).
    """

    session_id: str
    tokens: int
    capacity: int
    cuts: tuple[int, ...]
    reason: str = ""
    tokens_model: int | None = None
    calibration: float | None = None
    mode: str = ""

    @property
    def model_tokens(self) -> int:
        """The whole request in the model's tokens (report tokens when not calibrated)."""
        return self.tokens if self.tokens_model is None else self.tokens_model

    @property
    def would_compact(self) -> bool:
        """Whether the uncompacted request outgrows W − O (the model's tokens) before the session ends."""
        return self.model_tokens > self.capacity

    def row(self) -> dict[str, object]:
        """Return the `SESSION_COLUMNS` this cut decides (all but ``questions`` and ``reason``)."""
        return {
            "session_id": self.session_id,
            "tokens": self.tokens,
            "tokens_model": self.model_tokens,
            "calibration": self.calibration,
            "would_compact": self.would_compact,
            "cut": ",".join(str(c) for c in self.cuts),
        }


def check_mode(mode: str) -> str:
    """`mode` if it is one of `CUT_MODES`, else a ValueError naming the parameter."""
    if mode not in CUT_MODES:
        raise ValueError(f"cut = {mode!r}: expected one of {', '.join(CUT_MODES)}")
    return mode


#: The uncompacted request's size at every boundary (report tokens): `strategies.calibration.request_sizes`.
request_sizes = cal.request_sizes


def _sized(
    session: Session, ctx: CompactionContext, whole: int, cuts: tuple[int, ...], reason: str, mode: str
) -> SessionCut:
    """Build a `SessionCut` with the session's calibrated size."""
    c = cal.calibrate(session, ctx)
    return SessionCut(session.id, whole, cal.usable_capacity(ctx), cuts, reason, c.tokens(whole), c.value, mode)


def capacity_cut(session: Session, ctx: CompactionContext) -> SessionCut:
    """Cut in mode ``capacity``: the first boundary where the request exceeds W − O, in the model's tokens."""
    cap = cal.usable_capacity(ctx)
    c = cal.calibrate(session, ctx)
    sizes = request_sizes(session, ctx)
    whole = sizes[-1]
    if c.tokens(whole) <= cap:
        return _sized(session, ctx, whole, (), would_not_compact(c.tokens(whole), cap, ctx, c), "capacity")
    valid = tail_boundaries(session.records)
    # Records are in source order 0..n-1, so a boundary index is a cut; the end is always valid.
    cut = next(i for i in range(1, len(sizes)) if valid[i] and c.tokens(sizes[i]) > cap)
    return _sized(session, ctx, whole, (cut,), "", "capacity")


def would_not_compact(
    tokens: int, capacity: int, ctx: CompactionContext, calibration: cal.Calibration | None = None
) -> str:
    """Say why a session is not cut under ``capacity``: its size (model tokens), the capacity, what to change."""
    how = f"calibrated {calibration.label}" if calibration is not None and calibration.calibrated else cal.UNCALIBRATED
    return (
        f"would not compact at W = {int(ctx.window):,}: its whole request is {tokens:,} tokens ({how}), within "
        f"the usable capacity W − O = {capacity:,} (lower window to study it)"
    )


def recorded_cuts(session: Session, ctx: CompactionContext) -> SessionCut:
    """Cut in mode ``recorded``: the agent's own compaction points, or why there are none (a `SessionCut`)."""
    whole = request_sizes(session, ctx)[-1]
    found, _ = rec.find(session)
    if not found:
        return _sized(session, ctx, whole, (), f"no recorded compaction: {rec.skip_reason(session)}", "recorded")
    return _sized(session, ctx, whole, tuple(c.cut for c in found), "", "recorded")


def auto_cut(session: Session, ctx: CompactionContext) -> SessionCut:
    """Cut in mode ``auto``: at the agent's recorded compactions where its log holds any, else ``capacity``."""
    found, _ = rec.find(session)
    return recorded_cuts(session, ctx) if found else capacity_cut(session, ctx)


def end_cut(session: Session, ctx: CompactionContext) -> SessionCut:
    """Cut in mode ``end``: after the session's last record (a `SessionCut`)."""
    whole = request_sizes(session, ctx)[-1]
    return _sized(session, ctx, whole, (session.end,), "", "end")


def plan(sessions: Sequence[Session], mode: str, ctx: CompactionContext) -> list[SessionCut]:
    """One `SessionCut` per session under `mode` (see the module docstring)."""
    fn = {"auto": auto_cut, "capacity": capacity_cut, "end": end_cut, "recorded": recorded_cuts}[check_mode(mode)]
    return [fn(s, ctx) for s in sessions]


def context_of(params: dict) -> CompactionContext:
    """Read the window, output ceiling and encoding from a run's parameters (defaults: `CompactionContext`'s)."""
    ctx = CompactionContext()
    kw = {k: type(getattr(ctx, k))(params[k]) for k in ("window", "output_ceiling", "encoding") if params.get(k)}
    return replace(ctx, **kw)


__all__ = [
    "CUT_MODES",
    "SESSION_COLUMNS",
    "SessionCut",
    "auto_cut",
    "capacity_cut",
    "check_mode",
    "context_of",
    "end_cut",
    "plan",
    "recorded_cuts",
    "request_sizes",
    "would_not_compact",
]
