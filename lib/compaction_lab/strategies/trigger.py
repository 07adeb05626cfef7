"""When each strategy compacts, and the budgets inside a FutureOS projection.

FutureOS (evaluated before every model step)::

    economic  = floor(W * 0.8)
    margin    = min(2048, W // 16)
    effective = min(economic, W - O - margin)

so a model that reserves a large output is bounded by its own limit, not a
fixed number. Codex compacts at 90% of the window (hard cap 95%). OpenCode
compacts when usage reaches ``usable``: ``limit.input - reserved`` when the
model declares an input limit (``reserved = min(20,000, maxOutput)``), else
``context - maxOutput``, with ``maxOutput = min(limit.output, 32,000)`` (1.18;
OpenCode ``main`` also subtracts ``reserved`` there: ``opencode_trigger(version=)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas only for the figure tables
    import pandas as pd

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


# --------------------------------------------------------------------------- tables for figure 8


def trigger_table(windows, output_ceilings) -> pd.DataFrame:
    """Each strategy's trigger across windows W and output ceilings O (figure 8, top).

    Returns
    -------
    DataFrame
        strategy, window, output_ceiling, trigger (tokens), share (trigger / W),
        bound (which term binds, for FutureOS).
    """
    import pandas as pd

    rows = []
    for w in windows:
        for o in output_ceilings:
            if o >= w:
                continue
            f = futureos_trigger(w, o)
            rows.append(
                {"strategy": "futureos", "window": w, "output_ceiling": o, "trigger": f.effective, "bound": f.bound}
            )
            rows.append(
                {
                    "strategy": "codex",
                    "window": w,
                    "output_ceiling": o,
                    "trigger": codex_trigger(w).auto_compact,
                    "bound": "90% of W",
                }
            )
            rows.append(
                {
                    "strategy": "opencode",
                    "window": w,
                    "output_ceiling": o,
                    "trigger": opencode_trigger(w, o).usable,
                    "bound": "W - maxOutput",
                }
            )
    df = pd.DataFrame(rows)
    df["share"] = df["trigger"] / df["window"]
    return df


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
