"""When each strategy compacts (figure 8), and the trigger and budgets of the agents that define them here.

The per-agent helpers are the rules their strategies' ``fires`` apply: `futureos_trigger` and
`futureos_budgets` (FutureOS), `codex_trigger` (Codex), `opencode_trigger` and
`opencode_tail_budget` (OpenCode, both pinned versions). Figure 8's table is not written by hand:
`trigger_table` reads every listed strategy from the registry and finds, by bisection on its own
``fires`` (`first_firing`), the smallest input at which it compacts for each window W and output
ceiling O; the registration's ``trigger_rule`` names what binds. `budget_table` tabulates the
budgets inside a FutureOS projection (figure 8, bottom).

Rules: docs/strategies.md, "2. The window W, the output ceiling O and the triggers", and each
strategy's section.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compaction_lab.strategies.base import STRATEGIES, CompactionContext, Strategy

if TYPE_CHECKING:  # pandas only for the figure tables
    import pandas as pd

    from compaction_lab.core.registry import Entry

# FutureOS budget defaults (all parameters).
TAIL_TOKENS = 8_192
HISTORY_TARGET = 32_768
HISTORY_MAX = 131_072
EVIDENCE_TOKENS = 2_048
SUMMARY_TOKENS = 4_096

CODEX_AUTO_COMPACT = 0.90
CODEX_HARD_CAP = 0.95

OPENCODE_OUTPUT_CAP = 32_000
OPENCODE_RESERVED_CAP = 20_000


@dataclass(frozen=True)
class FutureOSTrigger:
    """The FutureOS trigger for a window W and output ceiling O."""

    window: int
    output_ceiling: int
    economic: int
    margin: int
    hard: int  # W - O - margin
    effective: int

    @property
    def bound(self) -> str:
        """Which term binds: ``economic`` (80% of W) or ``output`` (W - O - margin)."""
        return "economic" if self.economic <= self.hard else "output"

    def fires(self, tokens: int) -> bool:
        """Tell whether the input no longer fits under the effective trigger."""
        return tokens > self.effective


def futureos_trigger(window: int, output_ceiling: int) -> FutureOSTrigger:
    """Derive the FutureOS trigger.

    Examples
    --------
    >>> t = futureos_trigger(1_000_000, 32_000)
    >>> (t.economic, t.margin, t.effective)
    (800000, 2048, 800000)
    """
    if window <= 0 or output_ceiling < 0:
        raise ValueError("window must be > 0 and output ceiling >= 0")
    economic = (window * 8) // 10  # floor(W * 0.8) without float rounding
    margin = min(2048, window // 16)
    hard = window - output_ceiling - margin
    return FutureOSTrigger(window, output_ceiling, economic, margin, hard, min(economic, hard))


@dataclass(frozen=True)
class FutureOSBudgets:
    """Target budgets inside a FutureOS projection (report tokens)."""

    effective: int
    system: int
    tools: int
    tail: int
    evidence: int
    summary: int
    margin: int
    history_target: int
    history_max: int
    capacity: int  # effective - system - tools - tail - evidence - summary - margin
    history: int  # min(history_target, history_max, capacity), never negative


def futureos_budgets(
    trigger: FutureOSTrigger,
    system_tokens: int,
    tools_tokens: int,
    *,
    tail: int = TAIL_TOKENS,
    evidence: int = EVIDENCE_TOKENS,
    summary: int = 0,
    history_target: int = HISTORY_TARGET,
    history_max: int = HISTORY_MAX,
) -> FutureOSBudgets:
    """Resolve the budgets: the history target may be raised up to `history_max`.

    Never past the real capacity left by everything else.
    """
    capacity = trigger.effective - system_tokens - tools_tokens - tail - evidence - summary - trigger.margin
    hist = max(0, min(history_target, history_max, capacity))
    return FutureOSBudgets(
        trigger.effective,
        system_tokens,
        tools_tokens,
        tail,
        evidence,
        summary,
        trigger.margin,
        history_target,
        history_max,
        capacity,
        hist,
    )


@dataclass(frozen=True)
class CodexTrigger:
    """Codex's auto-compact limit and hard cap."""

    window: int
    auto_compact: int
    hard_cap: int

    def fires(self, tokens: int) -> bool:
        """Tell whether the input has reached the auto-compact limit."""
        return tokens >= self.auto_compact


def codex_trigger(window: int) -> CodexTrigger:
    """90% of the window triggers compaction; 95% is the hard cap."""
    return CodexTrigger(window, int(window * CODEX_AUTO_COMPACT), int(window * CODEX_HARD_CAP))


@dataclass(frozen=True)
class OpenCodeTrigger:
    """OpenCode's usable input and overflow rule."""

    context: int
    max_output: int
    input_limit: int | None
    reserved: int | None
    usable: int

    def fires(self, tokens: int) -> bool:
        """``isOverflow``: usage has reached the usable input."""
        return tokens >= self.usable


#: OpenCode versions the trigger knows (see `opencode_trigger`).
OPENCODE_VERSIONS = ("1.18", "main")


def opencode_trigger(
    context: int, output_limit: int, input_limit: int | None = None, version: str = "1.18"
) -> OpenCodeTrigger:
    """OpenCode's ``usable()`` (``packages/opencode/src/session/overflow.ts``).

    ``1.18`` (the seed's pin): ``limit.input - reserved`` with a declared input
    limit (``reserved = min(20,000, maxOutput)``), else ``context - maxOutput``.
    ``main`` (sst/opencode@31e22f65): the reserved output is subtracted in the
    no-input-limit branch too -- ``max(0, context - maxOutput - reserved)`` --
    and both branches are floored at 0.
    """
    if version not in OPENCODE_VERSIONS:
        raise ValueError(f"opencode_version must be one of {OPENCODE_VERSIONS}, not {version!r}")
    max_output = min(output_limit, OPENCODE_OUTPUT_CAP) if output_limit else OPENCODE_OUTPUT_CAP
    reserved = min(OPENCODE_RESERVED_CAP, max_output)
    if version == "main":
        if input_limit:
            return OpenCodeTrigger(context, max_output, input_limit, reserved, max(0, input_limit - reserved))
        return OpenCodeTrigger(context, max_output, None, reserved, max(0, context - max_output - reserved))
    if input_limit:
        return OpenCodeTrigger(context, max_output, input_limit, reserved, input_limit - reserved)
    return OpenCodeTrigger(context, max_output, None, None, context - max_output)


def opencode_tail_budget(usable: int) -> int:
    """Tokens for OpenCode's verbatim tail: min(15,000, max(2,000, floor(usable * 0.25)))."""
    return min(15_000, max(2_000, usable // 4))


# --------------------------------------------------------------------------- every strategy's trigger (figure 8)

#: The ``bound`` of a strategy that does not fire at any input up to W (``full``).
NEVER = "never"


def first_firing(strategy: Strategy, ctx: CompactionContext) -> int | None:
    """Return the smallest input (tokens, in [0, W]) at which `strategy` fires under `ctx`, or None.

    Found by bisection on the strategy's own ``fires(tokens, ctx)``, which must be monotone in
    `tokens` (once it fires, it fires for every larger input): a few probes on each side of the
    result check it.

    Raises
    ------
    ValueError
        When the probes find ``fires`` not monotone (the message names the strategy and the inputs).

    Examples
    --------
    >>> from compaction_lab.strategies import get
    >>> first_firing(get("codex"), CompactionContext(window=200_000, output_ceiling=32_000))
    180000
    """
    w = ctx.window
    if not strategy.fires(w, ctx):
        found = None
    elif strategy.fires(0, ctx):
        found = 0
    else:
        lo, hi = 0, w  # fires(lo) is False, fires(hi) is True
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if strategy.fires(mid, ctx) else (mid, hi)
        found = hi
    edge = w + 1 if found is None else found
    probes = sorted({*(w * i // 16 for i in range(17)), max(0, edge - 1), min(w, edge)})
    for t in probes:
        if strategy.fires(t, ctx) != (t >= edge):
            raise ValueError(
                f"strategy {strategy.name!r}: fires is not monotone in tokens at W={w:,}, "
                f"O={ctx.output_ceiling:,} (fires({t:,}) is {not t >= edge}, first firing found at {found})"
            )
    return found


def trigger_rule(entry: Entry[Strategy], ctx: CompactionContext, trigger: int | None) -> str:
    """Return the text of what binds a strategy's trigger (figure 8's ``bound`` column).

    The registration's ``trigger_rule`` meta (a text, or a function of the `CompactionContext`
    returning one: FutureOS's ``economic`` or ``output``); without one, ``"fires at >= N tokens"``;
    `NEVER` when the strategy does not fire up to W.
    """
    if trigger is None:
        return NEVER
    rule = entry.meta.get("trigger_rule")
    if rule is None:
        return f"fires at >= {trigger:,} tokens"
    return str(rule(ctx) if callable(rule) else rule)


def trigger_table(windows, output_ceilings, *, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Each listed strategy's trigger across windows W and output ceilings O (figure 8, top).

    Read from the registry (`STRATEGIES`, listed strategies in rank order, as `strategies.names`
    lists them): the trigger is `first_firing` under ``CompactionContext(window=W,
    output_ceiling=O)``, so a new strategy module appears here with nothing else edited. Pairs with
    O >= W are skipped.

    Parameters
    ----------
    windows, output_ceilings : iterable of int
    names : sequence of str, optional
        Only these strategies (default: every listed one).

    Returns
    -------
    DataFrame
        strategy, window, output_ceiling, trigger (tokens; NaN when it never fires up to W),
        share (trigger / W), bound (`trigger_rule`), curve (the strategies whose triggers are the same
        at every (W, O) of the table, in rank order joined by " = ": figure 8 draws one line for them).
    """
    import pandas as pd

    entries = [e for e in STRATEGIES.entries() if e.meta.get("listed", True)]
    if names is not None:
        known = {e.name: e for e in entries}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown strategy {unknown[0]!r}; available: {', '.join(known)}")
        entries = [known[n] for n in names]
    pairs = [(int(w), int(o)) for w in windows for o in output_ceilings if o < w]
    rows = []
    for e in entries:
        for w, o in pairs:
            ctx = CompactionContext(window=w, output_ceiling=o)
            t = first_firing(e.obj, ctx)
            rows.append(
                {
                    "strategy": e.name,
                    "window": w,
                    "output_ceiling": o,
                    "trigger": float("nan") if t is None else t,
                    "bound": trigger_rule(e, ctx, t),
                }
            )
    columns = ["strategy", "window", "output_ceiling", "trigger", "share", "bound", "curve"]
    if not rows:
        return pd.DataFrame(columns=columns)
    df = pd.DataFrame(rows)
    df["share"] = df["trigger"] / df["window"]
    # Strategies with the same trigger at every (W, O) share one curve, named after all of them in rank order.
    curves: dict[tuple, list[str]] = {}
    for name, g in df.groupby("strategy", sort=False):
        curves.setdefault(tuple(g["trigger"].fillna(-1).astype(int)), []).append(str(name))
    curve_of = {n: " = ".join(group) for group in curves.values() for n in group}
    df["curve"] = df["strategy"].map(curve_of)
    return df[columns]


def budget_table(budgets: FutureOSBudgets, used: dict[str, int] | None = None) -> pd.DataFrame:
    """Tabulate the budgets inside a FutureOS projection, in window order (figure 8, bottom).

    Parameters
    ----------
    budgets : FutureOSBudgets
    used : dict, optional
        Tokens a real projection actually used per part (same names), shown beside the budget.
    """
    import pandas as pd

    parts = [
        ("system", budgets.system),
        ("tools", budgets.tools),
        ("history", budgets.history),
        ("evidence", budgets.evidence),
        ("summary", budgets.summary),
        ("tail", budgets.tail),
        ("margin", budgets.margin),
    ]
    rows = [{"part": p, "budget": int(v), "used": (used or {}).get(p)} for p, v in parts]
    rows.append({"part": "headroom", "budget": int(max(0, budgets.effective - sum(v for _, v in parts))), "used": None})
    return pd.DataFrame(rows)
