"""Figure 11 splits the calls after a real compaction by the class of each exact repeat (issue 45)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import vl_convert as vlc

from compaction_lab import ingest
from compaction_lab.exam.actions import rediscovery as rd
from compaction_lab.report.figures import continuation as fig
from tests.helpers import PUBLIC_FIXTURES

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _rows(spec, key):
    return [row for rows in spec.get("datasets", {}).values() for row in rows if key in row]


@pytest.fixture(scope="module")
def pi_public():
    (session,) = list(ingest.load_sessions(PUBLIC_FIXTURES / "pi" / "before-compaction.jsonl"))
    return rd.rediscovery([session], price_table="deepseek-flash")


def test_fig11_splits_rediscoveries_from_state_checks_on_the_public_pi_session(pi_public):
    chart = fig.fig11_rediscovery(pi_public.compactions, pi_public.repeats)
    spec = chart.to_dict()
    by_bar: dict[str, dict[str, int]] = {}
    for p in _rows(spec, "part"):
        by_bar.setdefault(p["compaction_label"], {})[p["part"]] = p["calls"]
    first, second = (by_bar[k] for k in sorted(by_bar))
    assert sum(first.values()) == 128 and sum(second.values()) == 157
    assert first["rediscovery (a lookup whose output was dropped)"] == 2
    assert first["state check (re-run to see the state now)"] == 2
    assert second["rediscovery (a lookup whose output was dropped)"] == 0
    assert second["state check (re-run to see the state now)"] == 1
    assert all(v >= 0 for bar in by_bar.values() for v in bar.values())
    labels = [r["label"] for r in _rows(spec, "label")]
    assert any(t.startswith("2 rediscoveries · 2 state checks") and "USD" in t for t in labels), labels
    assert any("read (rediscovery) ×2" in p["tools"] for p in _rows(spec, "part"))
    subtitle = json.dumps(spec["title"]["subtitle"])
    assert "the log's own rate" in subtitle and "deepseek" not in subtitle and "CNY" not in subtitle
    assert vlc.vegalite_to_png(spec, scale=1).startswith(PNG_SIGNATURE)


def test_fig11_says_why_a_compaction_was_not_priced(pi_public):
    unpriced = pi_public.compactions.assign(
        repeat_cost=pd.NA, currency=pd.NA, priced_as="not priced: no recorded cost and no price table for Google (g)"
    )
    spec = fig.fig11_rediscovery(unpriced).to_dict()
    labels = [r["label"] for r in _rows(spec, "label")]
    assert all("cost n/a" in t for t in labels)
    assert "not priced: no recorded cost and no price table for Google (g)" in json.dumps(spec["title"]["subtitle"])
