import pytest

from compaction_lab import strategies
from compaction_lab.strategies import trigger


def test_futureos_at_one_million():
    t = trigger.futureos_trigger(1_000_000, 32_000)
    assert (t.economic, t.margin, t.effective, t.bound) == (800_000, 2_048, 800_000, "economic")


def test_futureos_small_window_output_binds():
    t = trigger.futureos_trigger(16_000, 8_000)
    assert (t.economic, t.margin, t.hard, t.effective, t.bound) == (12_800, 1_000, 7_000, 7_000, "output")
    assert not t.fires(7_000) and t.fires(7_001)


def test_bad_trigger_inputs():
    with pytest.raises(ValueError):
        trigger.futureos_trigger(0, 10)


def test_budgets_never_past_capacity():
    t = trigger.futureos_trigger(32_000, 8_000)
    b = trigger.futureos_budgets(t, 500, 500, history_target=131_072)
    assert b.capacity == t.effective - 500 - 500 - 8_192 - 2_048 - 0 - t.margin
    assert b.history == b.capacity
    roomy = trigger.futureos_budgets(trigger.futureos_trigger(1_000_000, 32_000), 500, 500, history_target=200_000)
    assert roomy.history == trigger.HISTORY_MAX


def test_codex_and_opencode_triggers():
    c = trigger.codex_trigger(200_000)
    assert (c.auto_compact, c.hard_cap) == (180_000, 190_000) and c.fires(180_000) and not c.fires(179_999)
    o = trigger.opencode_trigger(200_000, 64_000)
    assert (o.max_output, o.usable) == (32_000, 168_000)
    o2 = trigger.opencode_trigger(400_000, 128_000, input_limit=272_000)
    assert (o2.reserved, o2.usable) == (20_000, 252_000)
    assert [trigger.opencode_tail_budget(u) for u in (4_000, 20_000, 100_000)] == [2_000, 5_000, 15_000]


def test_opencode_main_subtracts_reserved_without_an_input_limit():
    """OpenCode main (sst/opencode@31e22f65) overflow.ts ``usable``; scenarios from
    packages/opencode/test/session/compaction.test.ts "session.compaction.isOverflow" (issue 13 item 6)."""
    m = trigger.opencode_trigger(100_000, 32_000, version="main")
    assert (m.max_output, m.reserved, m.usable) == (32_000, 20_000, 48_000)
    assert m.fires(80_000) and trigger.opencode_trigger(100_000, 32_000).usable == 68_000  # 1.18: no reserve
    assert not trigger.opencode_trigger(200_000, 32_000, version="main").fires(110_000)
    capped = trigger.opencode_trigger(400_000, 128_000, input_limit=272_000, version="main")
    assert capped.usable == 252_000 and capped.fires(274_000) and not capped.fires(230_000)
    assert trigger.opencode_trigger(200_000, 10_000, input_limit=120_000, version="main").usable == 110_000
    # "uses the bounded suffix output cap ...": usable is 0 (never negative) when the output fills the window
    assert trigger.opencode_trigger(10_000, 32_000, version="main").usable == 0
    with pytest.raises(ValueError):
        trigger.opencode_trigger(10_000, 1_000, version="2.0")


def test_trigger_and_budget_tables():
    t = trigger.trigger_table([16_000, 1_000_000], [8_000, 32_000])
    # O >= W is skipped; every listed strategy per (W, O), with the columns callers read.
    assert len(t) == len(strategies.names()) * 3
    assert list(t.columns) == ["strategy", "window", "output_ceiling", "trigger", "share", "bound", "curve"]
    fo = t[(t["strategy"] == "futureos-summarized") & (t["window"] == 1_000_000) & (t["output_ceiling"] == 32_000)]
    # FutureOS fires once the input is past ``effective`` (800,000): at 800,001.
    assert fo["trigger"].iloc[0] == 800_001 and fo["share"].iloc[0] == 800_001 / 1_000_000
    assert fo["bound"].iloc[0] == "economic"
    b = trigger.budget_table(trigger.futureos_budgets(trigger.futureos_trigger(128_000, 32_000), 100, 100))
    assert b["budget"].sum() == trigger.futureos_trigger(128_000, 32_000).effective
