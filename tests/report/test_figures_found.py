"""Issue 47: figures 1, 3 and 4 draw recall split by where the answer was found.

The scope part (the value in what the arm keeps by design) solid, the summary part (only the summary held
it) hatched and labelled with its summariser, a model reader's right answer found in neither plain grey.
"""

import json
import math

import altair as alt
import pandas as pd
import pytest
import vl_convert as vlc

from compaction_lab.exam.exams import closed
from compaction_lab.exam.statistics import stats
from compaction_lab.report import charts
from compaction_lab.report.figures import _common
from compaction_lab.report.theme import POINTER_COLORS

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STAND_IN = "extractive stand-in"
CODEX = "codex (extractive stand-in)"
FULL = "full (uncompacted reference)"

#: Per arm: (label, per real question (pointer, found_in, correct)). codex: 1 scope (tool), 3 summary
#: (2 assistant, 1 user), 1 wrong; full: 5 scope. The model reader's extra answer is right "elsewhere".
ARMS = {
    "codex": (
        CODEX,
        [
            ("tool", "both", True),
            ("assistant", "summary", True),
            ("assistant", "summary", True),
            ("user", "summary", True),
            ("tool", "nowhere", False),
        ],
    ),
    "full": (FULL, [(p, "verbatim", True) for p in ("assistant", "assistant", "user", "tool", "tool")]),
}


def answers(*, elsewhere=False, found=True):
    """Closed-book answers (`closed.ANSWER_COLUMNS`) of two arms, five real questions and one decoy each."""
    rows = []
    for strategy, (label, qs) in ARMS.items():
        qs = list(qs)
        if elsewhere and strategy == "codex":
            qs[-1] = ("tool", "nowhere", True)  # a model reader right with the value in neither region
        for i, (pointer, where, right) in enumerate([*qs, ("tool", "nowhere", True)]):
            decoy = i == len(qs)
            rows.append(
                {
                    "strategy": strategy,
                    "strategy_label": label,
                    "reader": "verbatim",
                    "reader_label": "verbatim reader (retention ceiling)",
                    "session_id": f"s{i % 2}",
                    "case_id": f"s{i % 2}@9",
                    "question_id": f"q{i}",
                    "source_order": -1 if decoy else i,
                    "pointer": pointer,
                    "category": "path",
                    "decoy": decoy,
                    "answer": f"v{i}",
                    "given": "",
                    "correct": right,
                    "found_in": where,
                    "summary_by": STAND_IN if strategy == "codex" else "",
                    "projection_tokens": 9000 if strategy == "full" else 1200,
                    "over_window": False,
                }
            )
    out = pd.DataFrame(rows, columns=closed.ANSWER_COLUMNS)
    return out if found else out.drop(columns=["found_in", "summary_by"])


def recall(**kw):
    return stats.recall_table(answers(**kw), n_boot=50, seed=7, unit="session")


def rows_of(spec, part):
    """The rows a layer or panel of `spec` draws (its own dataset, else the top-level one)."""
    return spec["datasets"][(part.get("data") or spec["data"])["name"]]


def totals_layer(spec):
    """Figure 4's layer of filled points (each arm's total recall)."""
    (layer,) = [
        layer for layer in spec["layer"] if layer["mark"]["type"] == "point" and layer["mark"].get("filled") is True
    ]
    return layer


def fill_of(layer):
    mark = layer["mark"]
    return mark.get("fill") if isinstance(mark, dict) else None


def is_hatched(layer):
    fill = fill_of(layer)
    return isinstance(fill, dict) and fill.get("gradient") == "linear"


def renders(chart):
    spec = chart.to_dict()
    assert "<svg" in vlc.vegalite_to_svg(spec)
    assert vlc.vegalite_to_png(spec, scale=1).startswith(PNG_SIGNATURE)


# --------------------------------------------------------------------------- the hatch


def test_hatched_alternates_the_colour_and_white_with_hard_edges():
    fill = _common.hatched("#f58518").to_dict()
    assert fill["gradient"] == "linear" and (fill["x2"], fill["y2"]) == (1, 1)
    stops = fill["stops"]
    colours = [s["color"] for s in stops]
    assert set(colours) == {"#f58518", "white"}
    # every band is given by two stops of one colour; the next band starts where it ends (a hard edge)
    for a, b in zip(stops[::2], stops[1::2], strict=True):
        assert a["color"] == b["color"] and a["offset"] < b["offset"]
    for b, c in zip(stops[1::2], stops[2::2], strict=False):
        assert b["offset"] == c["offset"] and b["color"] != c["color"]
    assert stops[0]["offset"] == 0 and stops[-1]["offset"] == 1
    assert len(stops) >= 16  # stripes, not a fade


def test_hatched_with_a_size_runs_at_45_degrees_every_few_pixels():
    thin = _common.hatched("#888", size=(8, 200)).to_dict()
    assert thin["x2"] / thin["y2"] == pytest.approx(8 / 200, rel=1e-3)  # along (w, h) in the box: 45° in pixels
    assert len(thin["stops"]) > len(_common.hatched("#888", size=(8, 20)).to_dict()["stops"])


@pytest.mark.parametrize("bad", [{"color": ""}, {"color": "#888", "size": (0, 10)}])
def test_hatched_rejects_bad_input_naming_the_parameter(bad):
    name = "size" if "size" in bad else "color"
    with pytest.raises(ValueError, match=f"^{name} must"):
        _common.hatched(**bad)


# --------------------------------------------------------------------------- figure 1


def test_fig1_stacks_scope_solid_then_summary_hatched_per_pointer():
    chart = charts.fig1_retained(answers())
    spec = chart.to_dict()
    *bars, text = spec["layer"]
    solid, hatched = bars[0], bars[1:]
    assert not is_hatched(solid) and solid["encoding"]["color"]["field"] == "pointer"
    assert hatched and all(is_hatched(layer) for layer in hatched)
    scope = {}
    for r in rows_of(spec, solid):
        scope[r["strategy_shown"]] = scope.get(r["strategy_shown"], 0) + r["retained"]
    assert scope == {CODEX: 1, FULL: 5}
    summary = [r for layer in hatched for r in rows_of(spec, layer)]
    assert sum(r["retained"] for r in summary) == 3 and {r["strategy_shown"] for r in summary} == {CODEX}
    # one layer per pointer colour, filled with that pointer's colour
    for layer in hatched:
        (pointer,) = {r["pointer"] for r in rows_of(spec, layer)}
        assert {s["color"] for s in fill_of(layer)["stops"]} == {POINTER_COLORS[pointer], "white"}
    # the solid segments come first: the solid length reads as scope recall
    solid_end = max(r["x2"] for r in rows_of(spec, solid) if r["strategy_shown"] == CODEX)
    assert solid_end == 1 and min(r["x"] for r in summary) == solid_end
    assert max(r["x2"] for r in summary) == 4
    labels = {r["strategy_shown"]: r["label"] for r in rows_of(spec, text)}
    assert labels[CODEX] == "4/5 (80%) · scope 1 · summary 3"
    assert labels[FULL] == "5/5 (100%) · scope 5 · summary 0"
    assert f"hatched: found only in the summary, written by {STAND_IN}" in spec["title"]["subtitle"]
    assert "grey" not in json.dumps(spec["title"])
    renders(chart)


def test_fig1_draws_a_right_answer_found_nowhere_grey_and_says_so():
    chart = charts.fig1_retained(answers(elsewhere=True))
    spec = chart.to_dict()
    grey = [layer for layer in spec["layer"] if fill_of(layer) == _common.ELSEWHERE_COLOR]
    assert len(grey) == 1
    (row,) = rows_of(spec, grey[0])
    assert (row["strategy_shown"], row["retained"], row["x"], row["x2"]) == (CODEX, 1, 4, 5)
    labels = {r["strategy_shown"]: r["label"] for r in rows_of(spec, spec["layer"][-1])}
    assert labels[CODEX] == "5/5 (100%) · scope 1 · summary 3 · elsewhere 1"
    assert _common.ELSEWHERE_NOTE in spec["title"]["subtitle"]
    renders(chart)


def test_fig1_without_found_in_draws_as_before():
    spec = charts.fig1_retained(answers(found=False)).to_dict()
    assert len(spec["layer"]) == 2 and "gradient" not in json.dumps(spec)
    labels = {r["strategy_shown"]: r["label"] for r in rows_of(spec, spec["layer"][1])}
    assert labels[CODEX] == "4/5 (80%)"


# --------------------------------------------------------------------------- figure 3


@pytest.mark.parametrize(
    "make",
    [
        charts.fig3_recall_tokens,
        lambda r: charts.fig3_complete(r, pd.DataFrame(columns=["strategy_label", "cost_per_point", "currency"])),
    ],
    ids=["fig3", "fig3_complete"],
)
def test_fig3_retained_bar_is_scope_solid_and_summary_hatched(make):
    table = recall(elsewhere=True)
    chart = make(table)
    spec = chart.to_dict()
    panel = spec["hconcat"][0]
    layers = panel["layer"]
    parts = {}
    for layer in layers:
        for r in rows_of(spec, layer):
            parts[(r["strategy_shown"], r["part"])] = (r["retained"], r["x"], r["x2"], fill_of(layer))
    assert parts[(CODEX, "scope")][:3] == (1, 0, 1)
    assert parts[(CODEX, "summary")][:3] == (3, 1, 4)
    assert parts[(CODEX, "elsewhere")][:3] == (1, 4, 5)
    assert parts[(FULL, "scope")][:3] == (5, 0, 5)
    assert fill_of(layers[0]) == _common.RETAINED_COLOR
    assert is_hatched(layers[1]) and fill_of(layers[2]) == _common.ELSEWHERE_COLOR
    tips = {t["field"] for t in layers[1]["encoding"]["tooltip"]}
    assert {"label", "summary_by"} <= tips
    labels = {r["strategy_shown"]: r["label"] for r in rows_of(spec, layers[1])}
    assert labels[CODEX] == "5/5 (100%) · scope 1 · summary 3 · elsewhere 1"
    sub = spec["title"]["subtitle"]
    assert f"hatched: found only in the summary, written by {STAND_IN}; {_common.ELSEWHERE_NOTE}" in sub
    renders(chart)


def test_fig3_without_the_split_draws_as_before():
    """Old run folders (no part columns), and answers whose ``found_in`` is empty, draw one solid bar."""
    for table in (recall(found=False), recall(found=False).drop(columns=stats.PART_COLUMNS)):
        spec = charts.fig3_recall_tokens(table).to_dict()
        assert "layer" not in spec["hconcat"][0] and "gradient" not in json.dumps(spec)
        assert "hatched" not in json.dumps(spec["title"])


# --------------------------------------------------------------------------- figure 4


def test_fig4_adds_open_scope_points_their_intervals_and_a_hatched_gap():
    table = recall()
    chart = charts.fig4_size_recall(table)
    spec = chart.to_dict()
    layers = spec["layer"]
    gaps = [layer for layer in layers if is_hatched(layer)]
    assert len(gaps) == 1  # only codex: full's total is all scope
    gap = gaps[0]
    assert gap["transform"][-1]["filter"] == {"field": "strategy_shown", "equal": CODEX}
    assert (gap["encoding"]["y"]["field"], gap["encoding"]["y2"]["field"]) == ("scope_recall", "scope_and_summary")
    assert not any(fill_of(layer) == _common.ELSEWHERE_COLOR for layer in layers)
    scope_points = [
        layer
        for layer in layers
        if layer["mark"]["type"] == "point" and layer["encoding"]["y"]["field"] == "scope_recall"
    ]
    assert len(scope_points) == 1 and scope_points[0]["mark"]["filled"] is False
    intervals = [layer for layer in layers if layer["mark"]["type"] == "rule" and "label_y" not in json.dumps(layer)]
    assert {layer["encoding"]["y"]["field"] for layer in intervals} == {"ci_low", "scope_ci_low"}
    texts = [layer for layer in layers if layer["mark"]["type"] == "text"]
    assert {layer["encoding"]["y"]["field"] for layer in texts} == {"label_y"}  # the label: by the total only
    labels = {r["strategy_shown"]: r for layer in texts for r in rows_of(spec, layer)}
    assert set(labels) == {CODEX, FULL}
    # nothing in its way: beside its total, on its row (pixels of the 300-px axis)
    assert labels[CODEX]["label_y"] == pytest.approx(300 * (1 - 0.8))
    rows = {r["strategy_shown"]: r for r in rows_of(spec, totals_layer(spec))}
    assert rows[CODEX]["scope_recall"] == pytest.approx(0.2) and rows[CODEX]["recall"] == pytest.approx(0.8)
    sub = " ".join(spec["title"]["subtitle"])
    assert "filled: total recall; open: scope recall (kept by design)" in sub
    assert f"came only through the summary ({STAND_IN})" in sub
    renders(chart)


def test_fig4_draws_a_right_answer_found_nowhere_grey_above_the_hatched_gap():
    spec = charts.fig4_size_recall(recall(elsewhere=True)).to_dict()
    (grey,) = [layer for layer in spec["layer"] if fill_of(layer) == _common.ELSEWHERE_COLOR]
    assert (grey["encoding"]["y"]["field"], grey["encoding"]["y2"]["field"]) == ("scope_and_summary", "recall")
    rows = {r["strategy_shown"]: r for r in rows_of(spec, totals_layer(spec))}
    assert rows[CODEX]["scope_and_summary"] == pytest.approx(0.8) and rows[CODEX]["recall"] == pytest.approx(1.0)
    assert _common.ELSEWHERE_NOTE in " ".join(spec["title"]["subtitle"])


def test_fig4_without_the_split_draws_as_before():
    spec = charts.fig4_size_recall(recall(found=False)).to_dict()
    drawn = [layer["mark"]["type"] for layer in spec["layer"] if "label_y" not in json.dumps(layer)]
    assert drawn == ["rule", "point"] and "gradient" not in json.dumps(spec)
    assert "scope" not in json.dumps(spec["title"])


def test_the_hatch_is_not_the_over_window_look():
    """Hatched never fades or dashes: those say "not sendable"."""
    spec = charts.fig1_retained(answers()).to_dict()
    for layer in spec["layer"]:
        if is_hatched(layer):
            assert not {"fillOpacity", "strokeDash"} & set(layer["encoding"])
    assert isinstance(_common.hatched("#000"), alt.Gradient)


def test_hatched_bars_size_each_bar_s_stripes_and_skip_empty_ones():
    rows = pd.DataFrame({"strategy_shown": ["a", "b", "c"], "x": [0, 2, 5], "x2": [4, 2, 10], "over_window": False})
    layers = _common.hatched_bars(
        rows, lambda r: "#4c78a8", x_max=10, width=500, x="x:Q", x2="x2:Q", y="strategy_shown:N"
    )
    assert len(layers) == 2  # b has no length
    for layer, pixels in zip(layers, (200, 250), strict=True):
        fill = layer.to_dict()["mark"]["fill"]
        assert fill["x2"] / fill["y2"] == pytest.approx(pixels / _common.BAR_PX, rel=1e-3)
        assert "fillOpacity" not in layer.to_dict()["encoding"]
    with pytest.raises(ValueError, match="^x_max must"):
        _common.hatched_bars(rows, lambda r: "#000", x_max=0, width=500)


def test_fig4_labels_never_print_over_each_other():
    """Two arms at the same size and recall (the uncompacted reference and an arm that did not compact) and
    a third just beside: every label gets its own place, none overlapping another label or another point,
    none past the plot's edge (`place_labels`); a label with room stays beside its point, on its row."""
    texts = ["full (uncompacted reference)", "aider · not sendable", "pi (extractive stand-in)", "far"]
    x = [400.0, 400.0, 405.0, 10.0]
    y = [0.0, 0.0, 4.0, 150.0]
    spots = _common.place_labels(x, y, texts, width=480, height=300, radius=5)
    boxes = []
    for s, t in zip(spots, texts, strict=True):
        w = _common.text_px(t)
        left = s.x if s.align == "left" else s.x - w
        boxes.append((left, s.y - 6, left + w, s.y + 6))
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[2] <= 480 and 0 <= a[1] and a[3] <= 300, a
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
        for j in range(len(x)):  # no label over another arm's point
            if j != i:
                assert a[2] <= x[j] - 5 or x[j] + 5 <= a[0] or a[3] <= y[j] - 5 or y[j] + 5 <= a[1], (a, j)
    assert spots[3] == _common.LabelSpot(10 + 5 + 4, 150, "left", False)
    # Labels near the right edge go left of their point rather than past the edge.
    assert {spots[i].align for i in range(3)} == {"right"}


def test_log_axes_have_ticks_whose_labels_never_touch():
    """Vega's own log ticks printed "100,000200,000" (issue 48): `log_ticks` keeps every power of ten, then the
    1-2-5 steps only where a label has room; `log_domain` ends on 1-2-5 steps around the data."""
    assert _common.log_domain(pd.Series([4_300, 103_981])) == (2_000.0, 200_000.0)
    assert _common.log_domain(pd.Series([1_000, 10_000])) == (1_000.0, 10_000.0)
    for domain, width in (((2_000.0, 200_000.0), 480), ((1_000.0, 1_000_000.0), 200), ((5_000.0, 1e6), 520)):
        ticks = _common.log_ticks(domain, width)
        decades = [v for v in ticks if float(f"{v:.0e}".split("e")[0]) == 1]
        assert decades, ticks
        px = [width * math.log10(v / domain[0]) / math.log10(domain[1] / domain[0]) for v in ticks]
        for (a, pa), (b, pb) in zip(zip(ticks, px, strict=True), list(zip(ticks, px, strict=True))[1:], strict=False):
            room = (_common.text_px(f"{a:,.0f}", 11) + _common.text_px(f"{b:,.0f}", 11)) / 2
            assert pb - pa >= room + 2, (domain, width, a, b)
