"""Issue 26, "Feasible arms only" and "Decoys honest": what the exam figures show of an arm that could never
be sent, and of decoys a reader could not have fallen for."""

import json

import pandas as pd
import pytest
import vl_convert as vlc

from compaction_lab.exam import readers
from compaction_lab.exam.exams import closed, recorded
from compaction_lab.exam.statistics import stats
from compaction_lab.report import charts

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FULL = "full (uncompacted reference)"
FULL_OVER = FULL + charts.NOT_SENDABLE

#: Per strategy: (label, over the window, real answers right of four, decoys fallen for of two).
ARMS = {
    "full": (FULL, True, 4, 0),
    "codex": ("codex (extractive stand-in)", False, 2, 1),
    "futureos": ("futureos (extractive stand-in)", False, 3, 0),
}
READER_LABELS = {
    "verbatim": "verbatim reader (retention ceiling)",
    "searcher": "searcher stand-in",
    "model": "model reader: m1",
}


def answers_frame(reader="verbatim", over_window=True):
    """Closed-book answers (`closed.ANSWER_COLUMNS`): four real questions from two sessions and two decoys
    per arm; `full` answers every real question and, with `over_window`, was larger than W − O."""
    rows = []
    for strategy, (label, over, right, fallen) in ARMS.items():
        for i in range(6):
            decoy = i >= 4
            rows.append(
                {
                    "strategy": strategy,
                    "strategy_label": label,
                    "reader": reader,
                    "reader_label": READER_LABELS[reader],
                    "session_id": f"s{i % 2}",
                    "case_id": f"s{i % 2}@9",
                    "question_id": f"q{i}",
                    "source_order": -1 if decoy else i,
                    "pointer": ["assistant", "tool", "user", "assistant"][i % 4],
                    "category": "path",
                    "decoy": decoy,
                    "answer": f"v{i}",
                    "given": "",
                    # a decoy is graded right when the reader abstained: the first `fallen` decoys were not
                    "correct": (i - 4 >= fallen) if decoy else i < right,
                    "projection_tokens": 9000 if strategy == "full" else 1200,
                    "over_window": over and over_window,
                }
            )
    return pd.DataFrame(rows, columns=closed.ANSWER_COLUMNS)


def recall_frame(**kw):
    return stats.recall_table(answers_frame(**kw), n_boot=50, seed=7, unit="session")


def dataset_rows(spec, part):
    """The rows `part` of `spec` (a layer, a panel, or the whole spec) draws."""
    return spec["datasets"][part["data"]["name"]]


def assert_unsendable_look(encoding):
    """The encoding draws rows whose ``over_window`` is true faded, with a dashed outline."""
    for channel in ("fillOpacity", "strokeDash", "stroke"):
        cond = encoding[channel]["condition"]
        assert "over_window" in cond["test"], channel
        assert cond["value"] != encoding[channel]["value"], channel


def png_ok(chart):
    return vlc.vegalite_to_png(chart.to_dict(), scale=1).startswith(PNG_SIGNATURE)


# --------------------------------------------------------------------------- over the window: marked, never best


def test_fig1_over_window_arm_is_labelled_drawn_apart_and_last_despite_the_highest_recall():
    chart = charts.fig1_retained(answers_frame())
    spec = chart.to_dict()
    bars, text = spec["layer"]
    order = bars["encoding"]["y"]["sort"]
    # full retains every question (4/4), more than any other arm, and is still listed after all of them.
    assert order == ["futureos (extractive stand-in)", "codex (extractive stand-in)", FULL_OVER]
    assert text["encoding"]["y"]["sort"] == order
    assert_unsendable_look(bars["encoding"])
    assert bars["encoding"]["stroke"]["condition"]["value"]  # the dashed outline has a colour to be drawn in
    flagged = {r["strategy_shown"] for r in dataset_rows(spec, bars) if r["over_window"]}
    assert flagged == {FULL_OVER}
    assert {r["strategy_shown"] for r in dataset_rows(spec, text) if r["over_window"]} == {FULL_OVER}
    assert charts.NOT_SENDABLE_NOTE in spec["title"]["subtitle"]
    assert png_ok(chart)


@pytest.mark.parametrize(
    "make",
    [
        charts.fig3_recall_tokens,
        lambda r: charts.fig3_complete(r, pd.DataFrame(columns=["strategy_label", "cost_per_point", "currency"])),
    ],
    ids=["fig3", "fig3_complete"],
)
def test_fig3_panels_mark_the_over_window_arm_and_list_it_last(make):
    recall = recall_frame()
    assert recall.set_index("strategy")["over_window"].to_dict() == {"full": True, "codex": False, "futureos": False}
    chart = make(recall)
    spec = chart.to_dict()
    for panel in spec["hconcat"][:2]:  # retained, tokens
        assert panel["encoding"]["y"]["sort"][-1] == FULL_OVER
        assert panel["encoding"]["y"]["sort"][0] == "futureos (extractive stand-in)"
        assert_unsendable_look(panel["encoding"])
    assert charts.NOT_SENDABLE_NOTE in spec["title"]["subtitle"]
    assert png_ok(chart)


def test_fig3_complete_money_panel_takes_the_flag_from_recall():
    recall = recall_frame()
    cost = pd.DataFrame(
        {
            "strategy_label": [FULL, "codex (extractive stand-in)"],
            "cost_per_point": [0.5, 0.1],
            "currency": ["CNY", "CNY"],
        }
    )
    spec = charts.fig3_complete(recall, cost).to_dict()
    money = spec["hconcat"][2]
    assert money["encoding"]["y"]["sort"][-1] == FULL_OVER
    assert_unsendable_look(money["encoding"])
    rows = {r["strategy_shown"]: r["over_window"] for r in dataset_rows(spec, money)}
    assert rows == {FULL_OVER: True, "codex (extractive stand-in)": False}


def test_fig4_labels_the_over_window_point_and_dashes_its_interval():
    chart = charts.fig4_size_recall(recall_frame())
    spec = chart.to_dict()
    rule, pts, *labels = spec["layer"]
    texts = [layer for layer in labels if layer["mark"]["type"] == "text"]  # and a leader to a moved label
    assert texts and all(layer["encoding"]["text"]["field"] == "strategy_shown" for layer in texts)
    rows = dataset_rows(spec, pts)
    assert [r["strategy_shown"] for r in rows][-1] == FULL_OVER  # drawn after (over) the sendable arms
    assert [r["strategy_shown"] for r in rows if r["over_window"]] == [FULL_OVER]
    assert_unsendable_look(pts["encoding"])
    assert "over_window" in rule["encoding"]["strokeDash"]["condition"]["test"]
    assert any("not sendable" in line for line in spec["title"]["subtitle"])
    assert png_ok(chart)


def test_recall_figures_state_the_units_and_method_of_their_intervals():
    recall = recall_frame()
    method = recall["ci_method"].iloc[0]
    for chart in (charts.fig3_recall_tokens(recall), charts.fig4_size_recall(recall)):
        sub = chart.to_dict()["title"]["subtitle"]
        assert f"n = 4 questions from 4 records of 2 sessions; 95% interval: {method}" in sub


def test_units_note_without_records_and_with_one_dominant_session():
    answers = answers_frame().drop(columns=["source_order"])  # records unknown: n_records is <NA>
    answers.loc[answers["question_id"] == "q1", "session_id"] = "s0"  # s0 now gives 3 of the 4 questions
    recall = stats.recall_table(answers, n_boot=50, seed=7, unit="session")
    assert recall["n_records"].isna().all()
    sub = charts.fig4_size_recall(recall).to_dict()["title"]["subtitle"]
    assert "n = 4 questions from 2 sessions (one session gives 75% of them); 95% interval: " in sub[1]


@pytest.mark.parametrize("drop", [True, False], ids=["no_column", "none_over"])
def test_without_an_arm_over_the_window_nothing_is_marked(drop):
    """Older run folders have no ``over_window``; a run where every arm fits draws as before."""
    answers = answers_frame(over_window=False)
    recall = recall_frame(over_window=False)
    if drop:
        answers = answers.drop(columns=["over_window"])
        recall = recall.drop(columns=["over_window", "n_sessions", "n_records", "ci_method"])
    figs = {
        "fig1": charts.fig1_retained(answers),
        "fig3": charts.fig3_recall_tokens(recall),
        "fig4": charts.fig4_size_recall(recall),
        "fig3_complete": charts.fig3_complete(recall, pd.DataFrame(columns=["strategy_label", "cost_per_point"])),
    }
    for name, chart in figs.items():
        text = json.dumps(chart.to_dict())
        assert "not sendable" not in text and "fillOpacity" not in text and "strokeDash" not in text, name
    assert figs["fig1"].to_dict()["layer"][0]["encoding"]["y"]["sort"][0] == FULL  # best first, as before
    if drop:
        assert figs["fig4"].to_dict()["title"]["subtitle"].startswith("bars: 95% bootstrap intervals over questions")
    assert png_ok(figs["fig1"]) and png_ok(figs["fig4"])


def test_a_real_closed_run_flags_full_and_the_figures_list_it_last():
    """End to end: `full` on a synthetic chain larger than W − O keeps everything, and is drawn not sendable."""
    from compaction_lab.exam.readers import VerbatimReader
    from compaction_lab.exam.types import Case
    from compaction_lab.ingest import synthetic
    from compaction_lab.strategies import CompactionContext
    from tests.helpers import question_of

    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=20000))
    s = chain.session
    facts = [f for f in chain.facts if f.source_order < len(s.records) // 2][:6]
    case_id = f"{s.id}@{len(s.records)}"
    qs = tuple(question_of(f, case_id) for f in [*facts, chain.decoys[0]])
    case = Case(id=case_id, session_id=s.id, cut=len(s.records), tail_start=len(s.records) // 2, questions=qs)
    ctx = CompactionContext(window=8000, output_ceiling=1000, params={"on_failure": "placeholder"})  # Codex compacts
    res = closed.run_closed([case], {s.id: s}, ["full", "codex"], ctx, VerbatimReader())
    recall = stats.recall_table(res.answers, n_boot=50, seed=7)
    by = recall.set_index("strategy")
    assert by.loc["full", "over_window"] and not by.loc["codex", "over_window"]
    assert by.loc["full", "recall"] >= by.loc["codex", "recall"]
    full_label = by.loc["full", "strategy_label"] + charts.NOT_SENDABLE
    spec1 = charts.fig1_retained(res.answers).to_dict()
    assert spec1["layer"][0]["encoding"]["y"]["sort"][-1] == full_label
    assert "decoys fallen for" not in json.dumps(spec1)  # the verbatim reader cannot fall for a decoy
    spec3 = charts.fig3_recall_tokens(recall).to_dict()
    retained = spec3["hconcat"][0]
    retained = retained["layer"][0] if "layer" in retained else retained  # split into scope and summary parts
    assert retained["encoding"]["y"]["sort"][-1] == full_label


# --------------------------------------------------------------------------- decoys: shown only when measured


@pytest.mark.parametrize("reader", ["verbatim", "searcher"])
def test_fig1_offline_readers_say_decoys_not_measured_once(reader):
    assert not readers.measures_decoys(reader)
    chart = charts.fig1_retained(answers_frame(reader))
    spec = chart.to_dict()
    text = json.dumps(spec, ensure_ascii=False)
    assert "decoys fallen for" not in text and "/2)" not in text
    assert text.count(readers.DECOYS_NOT_MEASURED) == 1
    assert readers.DECOYS_NOT_MEASURED in spec["title"]["subtitle"]
    # The bar labels still carry the retained counts.
    labels = {r["strategy_shown"]: r["label"] for r in dataset_rows(spec, spec["layer"][1])}
    assert labels["codex (extractive stand-in)"] == "2/4 (50%)"
    assert png_ok(chart)


def test_fig1_model_reader_shows_the_decoy_counts_per_bar():
    assert readers.measures_decoys("model")
    spec = charts.fig1_retained(answers_frame("model")).to_dict()
    labels = {r["strategy_shown"]: r["label"] for r in dataset_rows(spec, spec["layer"][1])}
    assert labels["codex (extractive stand-in)"] == "2/4 (50%) · decoys fallen for: 1/2"
    assert labels["futureos (extractive stand-in)"] == "3/4 (75%) · decoys fallen for: 0/2"
    assert readers.DECOYS_NOT_MEASURED not in json.dumps(spec, ensure_ascii=False)


def test_fig1_counts_decoys_only_over_the_readers_that_measure_them():
    both = pd.concat([answers_frame("verbatim"), answers_frame("model")], ignore_index=True)
    spec = charts.fig1_retained(both).to_dict()
    labels = {r["strategy_shown"]: r["label"] for r in dataset_rows(spec, spec["layer"][1])}
    assert labels["codex (extractive stand-in)"].endswith("decoys fallen for: 1/2")  # not 1/4


# --------------------------------------------------------------------------- the recorded figure


def recorded_table(with_new_columns=True):
    rows = []
    for case, agent, records in (("s0-recorded-0", "pi", 3), ("s1-recorded-0", "claude-code", 4)):
        for strategy, label, over, right, pool in (
            ("recorded", f"recorded ({agent}, m1)", False, 2, 30),
            (agent, f"{agent} (extractive stand-in)", False, 3, 40),
            ("full", FULL, case == "s0-recorded-0", 5, 78),
        ):
            rows.append(
                {
                    "case_id": case,
                    "session_id": case.split("-")[0],
                    "agent": agent,
                    "model": "m1",
                    "compaction": 0,
                    "strategy": strategy,
                    "strategy_label": label,
                    "recorded": strategy == "recorded",
                    "own_agent": strategy == agent,
                    "retained": right,
                    "n": 5,
                    "recall": right / 5,
                    "ci_low": right / 5 - 0.2 if right < 5 else 0.5,
                    "ci_high": 1.0,
                    "decoys_fallen": 0,
                    "decoys_n": 2,
                    "projection_tokens": 9000 if strategy == "full" else 1000,
                    "over_window": over,
                    "pool_retained": pool,
                    "pool_n": 78,
                    "pool_recall": pool / 78,
                    "kept_from": "",
                    "kept_match": pd.NA,
                    "kept_note": "",
                    "n_records": records,
                    "ci_method": f"one session: cluster bootstrap over {records} records",
                }
            )
    table = pd.DataFrame(rows, columns=recorded.TABLE_COLUMNS)
    if not with_new_columns:
        table = table.drop(
            columns=["over_window", "pool_retained", "pool_n", "pool_recall", "kept_from", "kept_match", "kept_note"]
        ).drop(columns=["n_records", "ci_method"])
    return table


def test_fig_recorded_marks_the_over_window_arm_and_draws_the_pool():
    chart = charts.fig_recorded(recorded_table())
    spec = chart.to_dict()
    layers = spec["spec"]["layer"]
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in layers]
    assert marks == ["rule", "tick", "point", "text", "text"]  # "k/n" right of its point, or left near the edge
    order = layers[0]["encoding"]["y"]["sort"]
    assert order[-1] == FULL_OVER and order[0] == "recorded (pi, m1)"
    assert FULL in order  # in the other compaction full fits, and keeps its plain label there
    assert_unsendable_look(layers[2]["encoding"])
    rows = dataset_rows(spec, spec)
    assert {r["strategy_shown"] for r in rows if r["over_window"]} == {FULL_OVER}
    assert {r["pool_of"] for r in rows if r["strategy"] == "full"} == {"78/78"}
    assert any("5 questions from 3 records" in r["compaction_label"] for r in rows)
    sub = json.dumps(spec["title"]["subtitle"], ensure_ascii=False)
    assert charts.POOL_NOTE in sub and charts.NOT_SENDABLE_NOTE in sub
    # One method line for both panels (each panel's label gives its own record count).
    assert "(one session: cluster bootstrap over records)" in sub and sub.count("cluster bootstrap") == 1
    assert any("5 questions from 4 records" in r["compaction_label"] for r in rows)
    assert "decoys fallen for" not in json.dumps(spec)
    assert png_ok(chart)


def test_fig_recorded_without_the_new_columns_draws_as_before():
    chart = charts.fig_recorded(recorded_table(with_new_columns=False))
    spec = chart.to_dict()
    marks = [layer["mark"]["type"] for layer in spec["spec"]["layer"]]
    assert marks == ["rule", "point", "text", "text"]
    text = json.dumps(spec)
    assert "not sendable" not in text and "fillOpacity" not in text
    assert spec["title"]["subtitle"].startswith("questions mined from the records before each compaction")
    assert png_ok(chart)


def test_saved_figures_with_an_over_window_arm_are_pngs(tmp_path):
    written = charts.save_chart(charts.fig1_retained(answers_frame("model")), tmp_path / "fig1")
    assert written["png"].read_bytes()[:8] == PNG_SIGNATURE
    assert "not sendable" in written["svg"].read_text(encoding="utf-8")
