"""Figures 10 and 11 (issue 29): can the agent still continue, and what real compactions cost their agents."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import vl_convert as vlc

from compaction_lab.report import charts, figures
from compaction_lab.report.figures import _common
from compaction_lab.report.figures import continuation as fig

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: Reader labels as the two tables carry them; the figure must take them from the tables.
NEXT_READER = "needed-next recall (verbatim presence, stand-in)"
CLOSED_READER = "verbatim reader (retention ceiling)"

#: (strategy, label, closed-book recall, needed-next recall, projection tokens, over the window)
ARMS = [
    ("full", "full", 1.0, 0.95, 90_000, True),
    ("codex", "codex (extractive stand-in)", 0.55, 0.40, 4_000, False),
    ("det", "det", 0.90, 0.70, 16_000, False),
    ("pi", "pi (extractive stand-in)", 0.60, 0.50, 5_000, False),
]


def _continuation(arms=ARMS, reader=NEXT_READER, n=20):
    rows = []
    for strategy, label, _, nxt, tokens, over in arms:
        row = {
            "block": "closed",
            "strategy": strategy,
            "strategy_label": label,
            "reader": "verbatim_presence",
            "reader_label": reader,
            "retained": round(nxt * n),
            "n": n,
            "recall": round(nxt * n) / n,
            "ci_low": max(0.0, nxt - 0.2),
            "ci_high": min(1.0, nxt + 0.1),
            "ci_method": "cluster bootstrap ∪ cluster t over 6 sessions ∪ Clopper–Pearson",
            "n_sessions": 6,
            "n_records": 14,
            "over_window": over,
            "projection_tokens": float(tokens),
            "n_predicted": float("nan"),
        }
        rows.append(row)
        # The recorded block's rows (other cases) must not be drawn: a recall no closed-book arm has.
        rows.append({**row, "block": "recorded", "recall": 0.123, "retained": 1, "n": 7})
    return pd.DataFrame(rows)


def _closed(arms=ARMS, reader=CLOSED_READER, n=40):
    return pd.DataFrame(
        [
            {
                "strategy": strategy,
                "strategy_label": label,
                "reader_label": reader,
                "retained": round(closed * n),
                "n": n,
                "recall": round(closed * n) / n,
                "ci_low": max(0.0, closed - 0.15),
                "ci_high": min(1.0, closed + 0.05),
                "projection_tokens": float(tokens),
                "over_window": over,
            }
            for strategy, label, closed, _, tokens, over in arms
        ]
    )


def _rows(spec, key):
    """The rows of the spec's datasets that carry `key` (the layer's data)."""
    return [row for rows in spec.get("datasets", {}).values() for row in rows if key in row]


def _png(chart) -> bytes:
    return vlc.vegalite_to_png(chart.to_dict(), scale=1)


def test_both_figures_are_registered_for_notebook_07_after_figure_9():
    stems = [f.stem for f in figures.run_figures()]
    assert stems[stems.index("fig9_open_book") + 1 : stems.index("fig9_open_book") + 3] == [
        "fig10_continuation",
        "fig11_rediscovery",
    ]
    assert figures.figure("fig10_continuation").notebook == fig.NOTEBOOK == "06_continuation_exam"
    assert figures.figure("fig11_rediscovery").notebook == fig.NOTEBOOK
    assert figures.title_of("fig10_continuation").endswith("can the agent still continue?")
    assert figures.title_of("fig11_rediscovery").endswith("what real compactions cost the agents that made them")


def test_fig10_draws_each_closed_block_arm_at_both_recalls_and_names_both_readers():
    chart = fig.fig10_continuation(_continuation(), _closed())
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    assert spec["title"]["text"] == figures.title_of("fig10_continuation")
    subtitle = json.dumps(spec["title"]["subtitle"], ensure_ascii=False)
    assert NEXT_READER in subtitle and CLOSED_READER in subtitle
    points = {r["strategy"]: r for r in _rows(spec, "recall_closed")}
    assert set(points) == {a[0] for a in ARMS}
    for strategy, _, closed, nxt, tokens, _ in ARMS:
        p = points[strategy]
        assert p["recall"] == pytest.approx(round(nxt * 20) / 20)  # the closed block's, never 0.123
        assert p["recall_closed"] == pytest.approx(round(closed * 40) / 40)
        assert p["projection_tokens"] == tokens
        assert p["ci_low"] <= p["recall"] <= p["ci_high"] and p["ci_low_closed"] <= p["recall_closed"]
    text = json.dumps(spec, ensure_ascii=False)
    assert '"field": "projection_tokens"' in text  # point size
    assert "ci_low_closed" in text and "ci_high" in text  # both intervals drawn
    assert "20 targets from 6 sessions" in subtitle
    assert _png(chart).startswith(PNG_SIGNATURE)


def test_fig10_an_arm_over_the_window_is_marked_and_never_drawn_like_the_best():
    spec = fig.fig10_continuation(_continuation(), _closed()).to_dict()
    points = {r["strategy"]: r for r in _rows(spec, "recall_closed")}
    full = points["full"]  # the highest recall in both exams, but its request could not be sent
    assert full["over_window"] and full["status"] == fig.OVER_WINDOW and "over window" in full["label"]
    assert not any(points[s]["over_window"] for s in ("det", "codex", "pi"))
    assert all(points[s]["status"] == fig.SENDABLE for s in ("det", "codex", "pi"))
    assert fig.OVER_WINDOW in json.dumps(spec["title"]["subtitle"])
    # Flagged in one table only (the closed book's cases), it is still over the window.
    closed = _closed()
    nxt = _continuation().assign(over_window=False)
    points = {r["strategy"]: r for r in _rows(fig.fig10_continuation(nxt, closed).to_dict(), "recall_closed")}
    assert points["full"]["over_window"] and points["full"]["status"] == fig.OVER_WINDOW
    # Without any over-window arm the note is not written.
    calm = [a[:-1] + (False,) for a in ARMS]
    spec = fig.fig10_continuation(_continuation(calm), _closed(calm)).to_dict()
    assert fig.OVER_WINDOW not in json.dumps(spec["title"]["subtitle"])


def test_fig10_labels_of_arms_at_the_same_place_never_print_over_each_other():
    """Two arms at the same closed-book and needed-next recall (issue 48: "codex and claude-code labels print
    over each other"): every label gets a place of its own, inside the plot (`_common.place_labels`)."""
    arms = [*ARMS, ("pi2", "pi2 (extractive stand-in)", 0.60, 0.50, 5_000, False)]
    spec = fig.fig10_continuation(_continuation(arms), _closed(arms), width=460).to_dict()
    texts = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"]
    boxes = []
    for layer in texts:
        assert layer["encoding"]["x"]["field"] == "label_x" and layer["encoding"]["x"]["scale"] is None
        for r in spec["datasets"][layer["data"]["name"]]:
            w = _common.text_px(r["label"])
            left = r["label_x"] if layer["mark"]["align"] == "left" else r["label_x"] - w
            boxes.append((left, r["label_y"] - 6, left + w, r["label_y"] + 6))
    assert len(boxes) == len(arms)
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[2] <= 460 and 0 <= a[1] and a[3] <= 460, a
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_fig10_a_reader_label_is_read_from_the_table_not_written_in():
    other = "needed-next recall (some other stand-in)"
    subtitle = json.dumps(fig.fig10_continuation(_continuation(reader=other), _closed()).to_dict()["title"])
    assert other in subtitle and NEXT_READER not in subtitle


def test_fig10_arms_without_needed_targets_or_without_closed_recall_are_left_out():
    nxt = _continuation()
    nxt.loc[(nxt["strategy"] == "pi") & (nxt["block"] == "closed"), ["retained", "n", "recall"]] = [0, 0, float("nan")]
    closed = _closed()[lambda d: d["strategy"] != "codex"]
    points = {r["strategy"] for r in _rows(fig.fig10_continuation(nxt, closed).to_dict(), "recall_closed")}
    assert points == {"full", "det"}


@pytest.mark.parametrize(
    "continuation, closed",
    [
        (pd.DataFrame(), pd.DataFrame()),
        (_continuation(), pd.DataFrame()),  # the closed book asked nothing: the notebook passes an empty frame
        (_continuation()[lambda d: d["block"] == "recorded"], _closed()),  # only recorded compactions
        (_continuation().assign(n=0, retained=0, recall=float("nan")), _closed()),  # nothing needed from memory
        (_continuation(ARMS[:2]), _closed(ARMS[2:])),  # no arm in both
    ],
    ids=["empty", "no-closed-book", "recorded-only", "nothing-needed", "no-common-arm"],
)
def test_fig10_says_not_measured_never_raises(continuation, closed):
    chart = fig.fig10_continuation(continuation, closed)
    text = json.dumps(chart.to_dict())
    assert "not measured" in text and "Not measured" in text
    assert chart.to_dict()["title"]["text"] == figures.title_of("fig10_continuation")


def test_fig10_not_measured_chart_renders_a_png():
    assert _png(fig.fig10_continuation(pd.DataFrame(), pd.DataFrame())).startswith(PNG_SIGNATURE)


def _compactions(cost=(0.016, 0.0024), price_table="anthropic-sonnet"):
    base = {"session_id": "before-compaction", "agent": "pi", "model": "claude-sonnet-4", "currency": "USD"}
    return pd.DataFrame(
        [
            {
                **base,
                "compaction": 0,
                "cut": 100,
                "after": 102,
                "until": 400,
                "calls_after": 128,
                "repeats": 4,
                "repeats_kept": 1,
                "repeat_output_tokens": 5321,
                "repeat_cost": cost[0],
                "price_table": price_table,
                "priced_as": "output tokens once as uncached input",
            },
            {
                **base,
                "compaction": 1,
                "cut": 400,
                "after": 402,
                "until": 800,
                "calls_after": 157,
                "repeats": 1,
                "repeats_kept": 0,
                "repeat_output_tokens": 800,
                "repeat_cost": cost[1],
                "price_table": price_table,
                "priced_as": "output tokens once as uncached input",
            },
        ]
    )


def test_fig11_one_bar_per_compaction_split_into_repeats_kept_dropped_and_the_rest():
    repeats = pd.DataFrame(
        {
            "session_id": "before-compaction",
            "compaction": [0, 0, 0, 0, 1],
            "tool": ["read", "read", "bash", "read", "read"],
        }
    )
    chart = fig.fig11_rediscovery(_compactions(), repeats)
    spec = chart.to_dict()
    assert spec["title"]["text"] == figures.title_of("fig11_rediscovery")
    parts = _rows(spec, "part")
    by_bar: dict[str, dict[str, int]] = {}
    for p in parts:
        by_bar.setdefault(p["compaction_label"], {})[p["part"]] = p["calls"]
    assert len(by_bar) == 2
    first, second = (by_bar[k] for k in sorted(by_bar))
    assert sum(first.values()) == 128 and sum(second.values()) == 157  # each bar is the calls after it
    assert first == {"repeat, earlier output kept": 1, "repeat, earlier output dropped": 3, "other calls after": 124}
    assert second["repeat, earlier output kept"] == 0 and second["repeat, earlier output dropped"] == 1
    labels = [r["label"] for r in _rows(spec, "label")]
    assert any("4 of 128" in t and "5,321 tokens" in t and "0.0160 USD" in t for t in labels), labels
    assert any(p["tools"] == "read ×3, bash ×1" for p in parts)
    subtitle = json.dumps(spec["title"]["subtitle"])
    assert "anthropic-sonnet" in subtitle and "uncached input" in subtitle
    assert _png(chart).startswith(PNG_SIGNATURE)


def test_fig11_without_a_price_table_says_no_cost_never_zero():
    spec = fig.fig11_rediscovery(_compactions(cost=(float("nan"), float("nan")), price_table=None)).to_dict()
    labels = [r["label"] for r in _rows(spec, "label")]
    assert all("cost n/a" in t for t in labels) and not any("0.0000" in t for t in labels)
    assert "no price table" in json.dumps(spec["title"]["subtitle"])


def test_fig11_says_not_measured_without_a_recorded_compaction():
    chart = fig.fig11_rediscovery(pd.DataFrame(columns=list(_compactions().columns)))
    text = json.dumps(chart.to_dict())
    assert "not measured" in text and "no recorded compaction" in text
    assert _png(fig.fig11_rediscovery(pd.DataFrame())).startswith(PNG_SIGNATURE)


def test_draw_saves_figure_10_under_its_stem(tmp_path):
    chart = charts.draw(tmp_path / "run", "fig10_continuation", _continuation(), _closed())
    assert chart.to_dict()["title"]["text"] == figures.title_of("fig10_continuation")
    saved = tmp_path / "run" / "figures"
    assert (saved / "fig10_continuation.png").read_bytes().startswith(PNG_SIGNATURE)
    assert (saved / "fig10_continuation.svg").read_text(encoding="utf-8").lstrip().startswith("<svg")
