"""Compaction strategies: what each keeps when the window fills.

Every strategy module in this package exposes ``STRATEGIES``, a dict mapping
names to objects with ``name``, ``algorithm_version``, ``estimator``,
``compact(session, cut, ctx) -> Projection`` and ``fires(tokens, ctx)``.
The registry discovers them, so adding a strategy is adding one module.

Seed systems: ``futureos-deterministic``, ``futureos-summarized``, ``codex``,
``opencode``. Baselines none of them tested: ``full``, ``truncate-oldest``,
``observation-masking``, ``claude-code-style``.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from functools import lru_cache
from typing import Mapping

from ..projection import Projection
from ..session import Session
from .base import CallShape, CompactionContext, Strategy

#: Modules that hold shared machinery, not strategies.
_NOT_STRATEGIES = frozenset({"base", "trigger", "evidence"})

#: The order tables and charts list strategies in.
ORDER: tuple[str, ...] = (
    "futureos-summarized", "futureos-deterministic", "codex", "opencode",
    "full", "truncate-oldest", "observation-masking", "claude-code-style",
)


@lru_cache(maxsize=1)
def registry() -> Mapping[str, Strategy]:
    """Every strategy of every module in this package, by name."""
    found: dict[str, Strategy] = {}
    for mod in pkgutil.iter_modules(__path__):
        if mod.name in _NOT_STRATEGIES or mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        for name, strat in getattr(module, "STRATEGIES", {}).items():
            if name in found:
                raise RuntimeError(f"strategy {name!r} defined twice")
            found[name] = strat
    return found


def names() -> tuple[str, ...]:
    """Strategy names, the known ones in `ORDER`, then any added ones alphabetically."""
    reg = registry()
    return tuple(n for n in ORDER if n in reg) + tuple(sorted(set(reg) - set(ORDER)))


def get(name: str) -> Strategy:
    """A strategy by name."""
    try:
        return registry()[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; available: {', '.join(names())}") from None


def compact(session: Session, strategy: str, cut: int | None = None,
            ctx: CompactionContext | None = None) -> Projection:
    """Force a compaction of `session` at `cut` (default: its end) and count report tokens.

    The context's call shape takes the session's own system prompt when the
    session recorded one.
    """
    ctx = ctx or CompactionContext()
    ctx = dataclasses.replace(ctx, shape=ctx.shape.for_session(session))
    end = len(session.records) if cut is None else cut
    if not 0 <= end <= len(session.records):
        raise ValueError(f"cut {end} outside session {session.id!r} (0..{len(session.records)})")
    return get(strategy).compact(session, end, ctx).finalize(ctx.encoding)


__all__ = ["CallShape", "CompactionContext", "ORDER", "Strategy", "compact", "get", "names", "registry"]
