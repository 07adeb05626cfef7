"""Figure 8's triggers come from the registry: every listed strategy, a new one with nothing else edited (issue 49).

`trigger.trigger_table` bisects each listed strategy's own ``fires`` for the smallest input it compacts at.
A throwaway strategy module in a package in a temporary folder (`Registry.add_package`, as a plug-in
would) appears in the table and in figure 8; the derived triggers equal the ones Codex, OpenCode and
FutureOS declare (`codex_trigger`, `opencode_trigger`, `futureos_trigger`); one that never fires up to W
(``full``) says so; a ``fires`` that is not monotone is refused. Spec: docs/strategies.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from compaction_lab import strategies
from compaction_lab.report import charts
from compaction_lab.strategies import STRATEGIES, CompactionContext, trigger
from tests.helpers import forget_package, plugin_package

ARM = "three-quarters"
RULED = "three-quarters-ruled"
WINDOWS = [8_000, 16_000, 50_000, 128_000, 200_000, 1_000_000]
CEILINGS = [4_000, 32_000, 64_000, 100_000]

STRATEGY_MODULE = f'''"""A throwaway strategy: compacts from three quarters of the window on; it never projects here."""
from compaction_lab.strategies.base import STRATEGIES


class ThreeQuarters:
    name = "{ARM}"
    algorithm_version = "{ARM}-1"
    estimator = "tiktoken"

    def fires(self, tokens, ctx):
        return tokens >= 3 * ctx.window // 4

    def compact(self, session, cut, ctx):
        raise NotImplementedError


class Ruled(ThreeQuarters):
    name = "{RULED}"


STRATEGIES.add("{ARM}", ThreeQuarters(), rank=65)
STRATEGIES.add("{RULED}", Ruled(), rank=66, trigger_rule="75% of W")
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The throwaway package, importable; the strategy registry sees it for this test only."""
    name = plugin_package(tmp_path, monkeypatch, {"three_quarters": STRATEGY_MODULE}, STRATEGIES)
    yield name
    STRATEGIES.remove(ARM)
    STRATEGIES.remove(RULED)
    forget_package(name)
    assert ARM not in strategies.names() and RULED not in strategies.names()


def _at(table: pd.DataFrame, strategy: str, w: int, o: int) -> pd.Series:
    (row,) = table[(table["strategy"] == strategy) & (table["window"] == w) & (table["output_ceiling"] == o)].index
    return table.loc[row]


def test_a_new_strategy_module_reaches_figure_8(plugin: str):
    before = trigger.trigger_table(WINDOWS, CEILINGS)
    assert ARM not in set(before["strategy"])

    STRATEGIES.add_package(plugin)
    table = trigger.trigger_table(WINDOWS, CEILINGS)
    # Listed at its rank: between pi (60) and gemini-cli (70).
    order = list(dict.fromkeys(table["strategy"]))
    assert order == list(strategies.names())
    assert order.index("pi") < order.index(ARM) < order.index(RULED) < order.index("gemini-cli")
    pairs = [(w, o) for w in WINDOWS for o in CEILINGS if o < w]
    for w, o in pairs:
        row = _at(table, ARM, w, o)
        assert row["trigger"] == 3 * w // 4 and row["share"] == pytest.approx((3 * w // 4) / w)
        assert row["bound"] == f"fires at >= {3 * w // 4:,} tokens"  # derived: the module declares no rule
        assert _at(table, RULED, w, o)["bound"] == "75% of W"  # declared in its registration
    # Same trigger everywhere: one curve, named after both in rank order.
    assert set(table.loc[table["strategy"].isin([ARM, RULED]), "curve"]) == {f"{ARM} = {RULED}"}

    budgets = trigger.budget_table(trigger.futureos_budgets(trigger.futureos_trigger(128_000, 32_000), 100, 100))
    spec = charts.fig8_trigger_budgets(table, budgets).to_dict()
    lines = spec["vconcat"][0]["layer"][0]
    domain = lines["encoding"]["color"]["scale"]["domain"]
    assert f"{ARM} = {RULED}" in domain
    colors = lines["encoding"]["color"]["scale"]["range"]
    assert len(set(colors)) == len(domain)  # every curve its own colour


def test_derived_triggers_equal_the_declared_ones():
    table = trigger.trigger_table(WINDOWS, CEILINGS)
    pairs = [(w, o) for w in WINDOWS for o in CEILINGS if o < w]
    assert len(table) == len(strategies.names()) * len(pairs)
    for w, o in pairs:
        codex = _at(table, "codex", w, o)
        assert codex["trigger"] == trigger.codex_trigger(w).auto_compact == int(0.9 * w)
        assert codex["bound"] == "90% of W"
        opencode = _at(table, "opencode", w, o)
        assert opencode["trigger"] == trigger.opencode_trigger(w, o).usable == w - min(o, 32_000)
        assert opencode["bound"] == "W - maxOutput"
        f = trigger.futureos_trigger(w, o)
        for name in ("futureos-summarized", "futureos-deterministic"):
            fo = _at(table, name, w, o)
            # ``fires`` is ``tokens > effective``: the first input it fires at is one more.
            expected = max(0, f.effective + 1)
            assert fo["trigger"] == expected and fo["bound"] == f.bound
    fo = table[table["strategy"].str.startswith("futureos")]
    assert set(fo["curve"]) == {"futureos-summarized = futureos-deterministic"}
    assert set(table.loc[table["strategy"] == "codex", "curve"]) == {"codex"}


def test_every_listed_strategy_has_a_trigger_row_and_full_never_fires():
    table = trigger.trigger_table([16_000, 128_000], [4_000, 32_000])
    assert list(dict.fromkeys(table["strategy"])) == list(strategies.names())
    assert "recorded" not in set(table["strategy"])  # registered, not listed
    full = table[table["strategy"] == "full"]
    assert full["trigger"].isna().all() and full["share"].isna().all() and set(full["bound"]) == {trigger.NEVER}
    fired = table[table["strategy"] != "full"]
    assert fired["trigger"].notna().all() and ((fired["trigger"] >= 0) & (fired["trigger"] <= fired["window"])).all()
    budgets = trigger.budget_table(trigger.futureos_budgets(trigger.futureos_trigger(128_000, 32_000), 100, 100))
    spec = charts.fig8_trigger_budgets(table, budgets).to_dict()
    top = spec["vconcat"][0]
    domain = top["layer"][0]["encoding"]["color"]["scale"]["domain"]
    named = {n for curve in domain for n in curve.split(" = ")}
    assert named == set(strategies.names()) - {"full"}
    assert "never up to W: full" in top["title"]["subtitle"]


@pytest.mark.parametrize("name", strategies.names())
def test_each_listed_strategy_fires_monotonically_from_its_trigger(name: str):
    """The bisection's premise, probed densely around the found trigger and across [0, W]."""
    impl = strategies.get(name)
    for w in WINDOWS:
        for o in CEILINGS:
            if o >= w:
                continue
            ctx = CompactionContext(window=w, output_ceiling=o)
            t = trigger.first_firing(impl, ctx)
            edge = w + 1 if t is None else t
            probes = {*range(max(0, edge - 3), min(w, edge + 3) + 1), *(w * i // 97 for i in range(98))}
            assert all(impl.fires(p, ctx) == (p >= edge) for p in probes), (name, w, o, t)


@dataclass(frozen=True)
class _Band:
    """A trigger that fires only inside a band: not monotone."""

    name: str = "band"

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        return ctx.window // 2 <= tokens < 3 * ctx.window // 4


def test_a_fires_that_is_not_monotone_is_refused():
    with pytest.raises(ValueError, match=r"strategy 'band': fires is not monotone in tokens at W=1,000"):
        trigger.first_firing(_Band(), CompactionContext(window=1_000, output_ceiling=100))


def test_only_the_named_strategies_and_an_unknown_name():
    table = trigger.trigger_table([128_000], [32_000], names=["codex", "aider"])
    assert list(table["strategy"]) == ["codex", "aider"]
    assert table["trigger"].iloc[1] == math.floor(128_000 / 16) + 1  # aider: more than its history cap
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        trigger.trigger_table([128_000], [32_000], names=["nope"])
