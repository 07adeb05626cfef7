"""Where an imported session is cut for the exam: where compaction would really happen.

A synthetic chain is cut where its bank says (fractions of its records). A user's own session is cut by
the run's ``cut`` parameter:

``capacity`` (default)
    Where its uncompacted request would first exceed the usable capacity W − O (the window minus the
    output ceiling, report tokens): the first record boundary ``c`` — one no tool call/output pair
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
(``exam_sessions.parquet``, `SESSION_COLUMNS`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction_lab.core.session import Session
from compaction_lab.core.tokens import counter
from compaction_lab.strategies import recorded as rec
from compaction_lab.strategies.base import CompactionContext, history
from compaction_lab.strategies.futureos import tail_boundaries

#: The values of the ``cut`` parameter, the default first.
CUT_MODES: tuple[str, ...] = ("capacity", "end", "recorded")

#: Columns of ``exam_sessions.parquet``: one row per imported session.
SESSION_COLUMNS: list[str] = ["session_id", "tokens", "would_compact", "cut", "questions", "reason"]


@dataclass(frozen=True)
class SessionCut:
    """Where one session is cut for the exam, and why.

    Parameters
    ----------
    session_id : str
    tokens : int
        Report tokens of the session's whole uncompacted request (system prompt, tools, every record).
    capacity : int
        The usable capacity W − O it was compared with.
    cuts : tuple of int
        The cuts examined (records with ``source_order < cut`` are compacted); empty: not cut.
    reason : str
        Why the session is not cut ("" when it is).
    """

    session_id: str
    tokens: int
    capacity: int
    cuts: tuple[int, ...]
    reason: str = ""

    @property
    def would_compact(self) -> bool:
        """Whether the uncompacted request outgrows W − O before the session ends."""
        return self.tokens > self.capacity


def check_mode(mode: str) -> str:
    """`mode` if it is one of `CUT_MODES`, else a ValueError naming the parameter."""
    if mode not in CUT_MODES:
        raise ValueError(f"cut = {mode!r}: expected one of {', '.join(CUT_MODES)}")
    return mode


def request_sizes(session: Session, ctx: CompactionContext) -> list[int]:
    """Size the uncompacted request at every boundary: ``sizes[c]`` for ``c`` in ``0..n``.

    ``sizes[c]`` is the report tokens of the uncompacted request holding the records before ``c`` — the
    ``full`` arm's projection at cut ``c`` (system prompt and tools of the session's call shape, then every
    history record but the system prompt itself).
    """
    shape = ctx.shape.for_session(session)
    cnt = counter(ctx.encoding)
    frame = sum(cnt.count_many([shape.system_prompt, shape.tools_text()]))
    kept = {
        r.source_order for r in history(session, None) if not (r.kind == "system" and r.text == shape.system_prompt)
    }
    sizes = cnt.count_many([r.text if r.source_order in kept else "" for r in session.records])
    return [frame + s for s in itertools.accumulate(sizes, initial=0)]


def capacity_cut(session: Session, ctx: CompactionContext) -> SessionCut:
    """Cut in mode ``capacity``: the first boundary where the request exceeds W − O (a `SessionCut`)."""
    cap = int(ctx.window) - int(ctx.output_ceiling)
    sizes = request_sizes(session, ctx)
    whole = sizes[-1]
    if whole <= cap:
        return SessionCut(session.id, whole, cap, (), would_not_compact(whole, cap, ctx))
    valid = tail_boundaries(session.records)
    # Records are in source order 0..n-1, so a boundary index is a cut; the end is always valid.
    cut = next(c for c in range(1, len(sizes)) if valid[c] and sizes[c] > cap)
    return SessionCut(session.id, whole, cap, (cut,))


def would_not_compact(tokens: int, capacity: int, ctx: CompactionContext) -> str:
    """Say why a session is not cut under ``capacity``: its size, the capacity, what to change."""
    return (
        f"would not compact at W = {int(ctx.window):,}: its whole request is {tokens:,} tokens, within the "
        f"usable capacity W − O = {capacity:,} (lower window to study it)"
    )


def recorded_cuts(session: Session, ctx: CompactionContext) -> SessionCut:
    """Cut in mode ``recorded``: the agent's own compaction points, or why there are none (a `SessionCut`)."""
    cap = int(ctx.window) - int(ctx.output_ceiling)
    whole = request_sizes(session, ctx)[-1]
    found, _ = rec.find(session)
    if not found:
        return SessionCut(session.id, whole, cap, (), f"no recorded compaction: {rec.skip_reason(session)}")
    return SessionCut(session.id, whole, cap, tuple(c.cut for c in found))


def end_cut(session: Session, ctx: CompactionContext) -> SessionCut:
    """Cut in mode ``end``: after the session's last record (a `SessionCut`)."""
    cap = int(ctx.window) - int(ctx.output_ceiling)
    whole = request_sizes(session, ctx)[-1]
    return SessionCut(session.id, whole, cap, (session.end,))


def plan(sessions: Sequence[Session], mode: str, ctx: CompactionContext) -> list[SessionCut]:
    """One `SessionCut` per session under `mode` (see the module docstring)."""
    fn = {"capacity": capacity_cut, "end": end_cut, "recorded": recorded_cuts}[check_mode(mode)]
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
    "capacity_cut",
    "check_mode",
    "context_of",
    "end_cut",
    "plan",
    "recorded_cuts",
    "request_sizes",
    "would_not_compact",
]
