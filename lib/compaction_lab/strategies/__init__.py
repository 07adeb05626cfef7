"""Compaction strategies: what each keeps when the window fills.

Every arm registers itself in the module of `compaction_lab.strategies.arms` that defines it, in
`STRATEGIES` (`compaction_lab.core.registry`): ``STRATEGIES.add(arm.name, arm, rank=...)``. An arm
is an object with ``name``, ``algorithm_version``, ``estimator``, ``compact(session, cut, ctx) ->
Projection`` and ``fires(tokens, ctx)`` (`Strategy`); its ``rank`` is its place in tables and
charts. The registry imports every module of ``arms``, so adding an arm is adding one module.

Seed systems: ``futureos-deterministic``, ``futureos-summarized``, ``codex``, ``opencode``. Other
agents: ``claude-code`` (reconstructed: its source is not public), ``pi``, ``gemini-cli``,
``aider``. Baselines none of them tested: ``full``, ``truncate-oldest``, ``observation-masking``.
``recorded`` is registered but not *listed* (``listed=False``): it is the projection an agent
itself sent after a compaction found in its log, so it exists only at those compactions
(`exam.exams.recorded` asks for it there).

Each arm's rules, with their upstream file and line at a pinned commit: docs/strategies.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from compaction_lab.core.projection import Projection, projection_from_json
from compaction_lab.core.registry import UnknownName
from compaction_lab.core.session import Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.strategies.base import STRATEGIES, CompactionContext, Strategy


def registry() -> Mapping[str, Strategy]:
    """Return every registered arm by name, listed or not (read-only)."""
    return MappingProxyType({e.name: e.obj for e in STRATEGIES.entries()})


def names() -> tuple[str, ...]:
    """Return the listed arms' names (the arms every run compares) in their registered rank order.

    ``recorded`` is not listed (``listed=False``): `get` still finds it.
    """
    return tuple(e.name for e in STRATEGIES.entries() if e.meta.get("listed", True))


def get(name: str) -> Strategy:
    """Return the arm registered under `name`.

    Raises
    ------
    ValueError
        When no arm has that name (the message lists the listed ones).
    """
    try:
        return STRATEGIES.get(name)
    except UnknownName:
        raise ValueError(f"unknown strategy {name!r}; available: {', '.join(names())}") from None


def compact(
    session: Session, strategy: str, cut: int | None = None, ctx: CompactionContext | None = None
) -> Projection:
    """Force a compaction of `session` at `cut` (default: its end) and count report tokens.

    The context's call shape takes the session's own system prompt when the
    session recorded one. With checkpoints on (`CompactionContext.checkpoint_path`:
    always for a model-written summary), a committed compaction of the same
    key is reused, so its summary is never requested twice; one another
    process is computing right now is waited for.
    """
    ctx = ctx or CompactionContext()
    ctx = dataclasses.replace(ctx, shape=ctx.shape.for_session(session))
    # Decisions the agent's model makes (its usage-driven trigger, what fits W − O) are in its own tokens.
    from compaction_lab.strategies import calibration

    ctx = calibration.calibrated_context(session, ctx)
    end = len(session.records) if cut is None else cut
    if not 0 <= end <= len(session.records):
        raise ValueError(f"cut {end} outside session {session.id!r} (0..{len(session.records)})")
    impl = get(strategy)
    compute = lambda: impl.compact(session, end, ctx).finalize(ctx.encoding)
    path = ctx.checkpoint_path()
    if path is None and getattr(ctx.summarizer, "deterministic", False) is True:
        # With a summarizer that says it answers as a pure function of the request (the offline ones:
        # ``none``, the extractive stand-in), the projection is a pure function of the session's content,
        # the cut, the arm and the context: one computed earlier in this run's kernel, or by another run
        # of the sweep, is reused. Any other summarizer (a model, a test's scripted one) is asked each time.
        from compaction_lab.store import memo
        from compaction_lab.store.checkpoints import checkpoint_params

        summarizer = (type(ctx.summarizer).__qualname__, getattr(ctx.summarizer, "encoding", None))
        k = memo.key(
            "projection",
            memo.content_key(session),
            end,
            strategy,
            impl.algorithm_version,
            summarizer,
            sorted(checkpoint_params(strategy, ctx).items(), key=lambda kv: kv[0]),
        )
        return memo.remembered("projection", k, compute)
    if path is None:
        return compute()
    from compaction_lab.store.checkpoints import CheckpointStore, checkpoint_key, compact_once

    key = checkpoint_key(session.id, end, strategy, impl.algorithm_version, ctx)

    def committable() -> Projection:
        # A summary that failed (endpoint down, empty answer) is not a result to keep: the next run asks again.
        p = compute()
        if p.receipt is not None and p.receipt.fallback:
            raise _NotCommitted(p)
        return p

    try:
        out = compact_once(CheckpointStore(path), key, committable, wait=CHECKPOINT_WAIT_S)
    except _NotCommitted as exc:
        return exc.projection
    if out.computed is not None:
        return out.computed
    if out.projection is None:
        raise RuntimeError(
            f"checkpoint {key} is still being computed by another process after "
            f"{CHECKPOINT_WAIT_S:.0f} s; see `compaction-lab checkpoints list`"
        )
    stored = projection_from_json(out.projection)
    receipt = stored.receipt
    if receipt is None or receipt.fallback:
        return stored
    # Rebuild with the committed summary replayed (no request is sent), so the projection carries
    # its summary request again -- the cost model prices it -- and check it is the same request.
    again = impl.compact(session, end, dataclasses.replace(ctx, summarizer=_Replay(receipt))).finalize(ctx.encoding)
    same = again.receipt is not None and again.receipt.request_fingerprint == receipt.request_fingerprint
    return again if same else stored


class _NotCommitted(Exception):
    def __init__(self, projection: Projection):
        super().__init__("summary fell back; not committed")
        self.projection = projection


class _Replay:
    """A summarizer that returns a committed checkpoint's summary instead of asking anyone."""

    def __init__(self, receipt):
        self.receipt, self.name, self.stand_in = receipt, receipt.summarizer, receipt.stand_in

    def summarize(self, request):
        from compaction_lab.summarize import SummaryResult

        r = self.receipt
        return SummaryResult(r.text, r.input_tokens, r.cached_tokens, r.output_tokens)


#: How long a compaction waits for another process's fence on the same checkpoint.
CHECKPOINT_WAIT_S = 600.0


__all__ = ["STRATEGIES", "CallShape", "CompactionContext", "Strategy", "compact", "get", "names", "registry"]
