"""Price tables: every shipped table loads with its provenance; `price` bills by hand-checked rules."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from compaction_lab.core import paths
from compaction_lab.endpoints import prices
from compaction_lab.endpoints.prices import UnknownPriceTable, convert, load_price_table, price, rates

SHIPPED = ("claude-sonnet-4-6", "deepseek-flash", "deepseek-v4-pro", "gpt-4.1")


def test_shipped_tables_are_listed():
    assert set(SHIPPED) <= set(prices.list_price_tables())


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_table_loads_with_source_and_date(name):
    t = load_price_table(name)
    assert t.name == name and t.model and t.provider
    assert t.source.strip() and t.date_read
    dt.date.fromisoformat(t.date_read)  # an ISO date
    assert t.cache_rule in prices.CACHE_RULES
    assert len(t.currency) == 3
    # Each file says plainly that its prices are as read and may have changed.
    text = (paths.PRICES_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    assert "as read on date_read" in text and "may have changed" in text


def test_deepseek_tables_match_the_spec():
    flash = load_price_table("deepseek-flash")
    assert flash.currency == "CNY"
    assert rates(flash) == prices.Rates(input=1.0, cache_read=0.02, cache_write=None, output=4.0)
    assert rates(flash, "peak") == prices.Rates(input=2.0, cache_read=0.04, cache_write=None, output=8.0)
    assert "UTC" in flash.peak.periods
    pro = load_price_table("deepseek-v4-pro")
    off, peak = rates(pro), rates(pro, "peak")
    assert (off.cache_read, off.input, off.output) == (0.15, 4.5, 13.5)
    assert (peak.cache_read, peak.input, peak.output) == pytest.approx((0.30, 9.0, 27.0))


def test_price_cny_off_peak_and_peak_by_hand():
    flash = load_price_table("deepseek-flash")
    # 4,000 misses x 1 + 6,000 hits x 0.02 + 1,000 output x 4 = 8,120 per 1M.
    assert price(flash, input_tokens=10_000, cached_tokens=6_000, output_tokens=1_000) == pytest.approx(0.00812)
    assert price(flash, input_tokens=10_000, cached_tokens=6_000, output_tokens=1_000, period="peak") == pytest.approx(
        0.01624
    )
    pro = load_price_table("deepseek-v4-pro")
    # 200,000 x 4.5 + 800,000 x 0.15 + 100,000 x 13.5 = 2,370,000 per 1M.
    assert price(pro, input_tokens=1_000_000, cached_tokens=800_000, output_tokens=100_000) == pytest.approx(2.37)
    assert price(
        pro, input_tokens=1_000_000, cached_tokens=800_000, output_tokens=100_000, period="peak"
    ) == pytest.approx(4.74)


def test_price_usd_openai_by_hand():
    gpt = load_price_table("gpt-4.1")
    assert gpt.currency == "USD" and gpt.cache_write is None and gpt.cache_rule == "openai"
    # 1,024 x 2.00 + 1,024 x 0.50 + 500 x 8.00 = 6,560 per 1M.
    assert price(gpt, input_tokens=2_048, cached_tokens=1_024, output_tokens=500) == pytest.approx(0.00656)
    # No peak prices: peak falls back to off-peak.
    assert rates(gpt, "peak") == rates(gpt)
    # Writes are not billed separately: written tokens cost plain input.
    assert price(gpt, input_tokens=2_000, cached_tokens=0, cache_write_tokens=1_000, output_tokens=0) == pytest.approx(
        0.004
    )


def test_price_usd_anthropic_write_premium_by_hand():
    claude = load_price_table("claude-sonnet-4-6")
    assert claude.cache_rule == "anthropic" and claude.cache_write == pytest.approx(3.75)
    kw = dict(input_tokens=10_000, cached_tokens=2_000, cache_write_tokens=5_000, output_tokens=1_000)
    # 3,000 x 3 + 2,000 x 0.30 + 5,000 x 3.75 + 1,000 x 15 = 43,350 per 1M (5-minute writes).
    assert price(claude, **kw) == pytest.approx(0.04335)
    # 1-hour writes cost 2x input: 5,000 x 6.00 instead.
    assert rates(claude, ttl="1h").cache_write == pytest.approx(6.0)
    assert price(claude, **kw, ttl="1h") == pytest.approx(0.0546)


def test_price_rejects_impossible_counts_and_periods():
    flash = load_price_table("deepseek-flash")
    with pytest.raises(ValueError, match="exceed"):
        price(flash, input_tokens=10, cached_tokens=8, cache_write_tokens=5, output_tokens=0)
    with pytest.raises(ValueError, match=">= 0"):
        price(flash, input_tokens=-1, cached_tokens=0, output_tokens=0)
    with pytest.raises(ValueError, match="period"):
        price(flash, input_tokens=1, cached_tokens=0, output_tokens=0, period="night")
    with pytest.raises(ValueError, match="write multiplier"):
        rates(flash, ttl="1h")


def test_convert_needs_an_explicit_rate():
    assert convert(7.5, "CNY", "cny") == 7.5
    with pytest.raises(ValueError, match="explicit rate"):
        convert(7.5, "CNY", "USD")
    assert convert(7.5, "CNY", "USD", rate=0.14) == pytest.approx(1.05)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="rate"):
            convert(1.0, "USD", "CNY", rate=bad)


def test_unknown_table_names_the_available_ones():
    with pytest.raises(UnknownPriceTable) as exc:
        load_price_table("deepseek-nonexistent")
    assert "deepseek-flash" in str(exc.value) and "gpt-4.1" in str(exc.value)


def _write(tmp_path, name, **overrides):
    data = yaml.safe_load((paths.PRICES_DIR / "claude-sonnet-4-6.yaml").read_text(encoding="utf-8"))
    data.update(name=name, **overrides)
    for k in [k for k, v in overrides.items() if v is ...]:
        del data[k]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_load_by_path_and_malformed_tables_fail_clearly(tmp_path):
    t = load_price_table(_write(tmp_path, "mine"))
    assert t.name == "mine" and t.output == 15.0
    with pytest.raises(ValueError, match="missing source"):
        load_price_table(_write(tmp_path, "nosource", source=...))
    with pytest.raises(ValueError, match="non-negative"):
        load_price_table(_write(tmp_path, "negative", output=-1))
    with pytest.raises(ValueError, match="cache rule"):
        load_price_table(_write(tmp_path, "rule", cache="gemini"))
    with pytest.raises(ValueError, match="write multiplier"):
        load_price_table(_write(tmp_path, "premium", cache_write=4.0))
    with pytest.raises(ValueError, match="unknown keys"):
        load_price_table(_write(tmp_path, "typo", ouptut=1.0))
    with pytest.raises(UnknownPriceTable):
        load_price_table(tmp_path / "absent.yaml")
