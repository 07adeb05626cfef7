"""share (issue 47): the headline's scope and summary recall, and the report's sentences that use the split."""

from __future__ import annotations

import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.core.projection import STAND_IN_LABEL
from compaction_lab.report import share

READER = "verbatim reader (retention ceiling)"
MODEL = "model: deepseek-chat"

#: (strategy, label, retained, scope, summary, scope on assistant-pointer questions, summary_by, tokens)
#: over 100 questions, 40 of them pointing at assistant text. "sumheavy" retains most in total, nearly all of
#: it through its summary; "keeper" keeps most by design; "full" is the uncompacted reference.
ARMS = [
    ("full", "full (uncompacted reference)", 100, 100, 0, 40, "", 90_000.0),
    ("sumheavy", "sumheavy (extractive stand-in)", 90, 10, 80, 0, STAND_IN_LABEL, 4_000.0),
    ("keeper", "keeper", 60, 60, 0, 30, "", 12_000.0),
    ("mixed", "mixed (extractive stand-in)", 50, 20, 30, 5, STAND_IN_LABEL, 8_000.0),
]


def _interval(k: int, n: int = 100) -> tuple[float, float]:
    # a narrow, made-up interval: ± 5 points, enough to separate 90 from 60 and 60 from 20
    return max(0.0, k / n - 0.05), min(1.0, k / n + 0.05)


def _exam_recall(summary_by: str | None = STAND_IN_LABEL, parts: bool = True) -> pd.DataFrame:
    rows = []
    for strategy, label, k, scope, summ, scope_a, by, tokens in ARMS:
        low, high = _interval(k)
        row = {
            "strategy": strategy,
            "strategy_label": label if summary_by == STAND_IN_LABEL else label.replace(f" ({STAND_IN_LABEL})", ""),
            "reader_label": READER,
            "retained": k,
            "n": 100,
            "recall": k / 100,
            "ci_low": low,
            "ci_high": high,
            "projection_tokens": tokens,
            "over_window": False,
            "n_assistant": 40,
        }
        if parts:
            s_low, s_high = _interval(scope)
            m_low, m_high = _interval(summ)
            row |= {
                "scope_retained": scope,
                "scope_recall": scope / 100,
                "scope_ci_low": s_low,
                "scope_ci_high": s_high,
                "summary_retained": summ,
                "summary_recall": summ / 100,
                "summary_ci_low": m_low,
                "summary_ci_high": m_high,
                "scope_retained_assistant": scope_a,
                "summary_retained_assistant": 0,
                "summary_by": (summary_by if by else "") if summary_by is not None else by,
            }
        rows.append(row)
    return pd.DataFrame(rows)


def _run(tmp_path, recall: pd.DataFrame):
    d = runfolder.resolve(tmp_path / "run")
    runfolder.save_table(recall, d, "exam_recall")
    return d


def _said(lines: list[str], start: str) -> list[str]:
    return [line for line in lines if line.startswith(start)]


def test_offline_the_ranking_sentence_names_the_scope_ranking_not_the_total(tmp_path):
    h = share.headline_table(_run(tmp_path, _exam_recall()))
    lines = share.measured_text(h)
    # total recall would name sumheavy (90 of 100, nearly all through the stand-in's summary) ...
    assert not _said(lines, "Most retained")
    # ... the scope ranking names the arm that keeps most by design
    assert _said(lines, "Most kept by design") == [
        "Most kept by design (scope recall) of the arms that compacted and fit: keeper, 60/100 (55%–65%); "
        "its 95% interval lies above every other arm's."
    ]
    assert share.STAND_IN_SUMMARY_RECALL in lines
    assert "measures the stand-in, not the strategy" in share.STAND_IN_SUMMARY_RECALL


def test_with_a_model_summariser_both_rankings_are_said(tmp_path):
    h = share.headline_table(_run(tmp_path, _exam_recall(summary_by=MODEL)))
    lines = share.measured_text(h)
    assert _said(lines, "Most retained") == [
        "Most retained of the arms that compacted and fit: sumheavy, 90/100 (85%–95%); its 95% interval lies "
        "above every other arm's."
    ]
    (scope,) = _said(lines, "Most kept by design")
    assert scope.startswith("Most kept by design (scope recall) of the arms that compacted and fit: keeper, 60/100")
    assert share.STAND_IN_SUMMARY_RECALL not in lines
    assert f"Summary recall here measures the summaries of {MODEL}." in lines


def test_scope_ranking_says_when_the_data_cannot_tell(tmp_path):
    recall = _exam_recall()
    recall.loc[recall["strategy"] == "mixed", ["scope_ci_high"]] = 0.7  # reaches keeper's 55%
    lines = share.measured_text(share.headline_table(_run(tmp_path, recall)))
    (scope,) = _said(lines, "Most kept by design")
    assert scope == (
        "Most kept by design (scope recall): the data cannot tell apart keeper 60/100 (55%–65%), "
        "mixed (extractive stand-in) 20/100 (15%–70%) — their 95% intervals overlap."
    )


def test_the_by_design_sentence_lists_scope_recall_on_assistant_pointer_questions(tmp_path):
    lines = share.measured_text(share.headline_table(_run(tmp_path, _exam_recall())))
    assert _said(lines, "Kept by design") == [
        "Kept by design (scope recall), of the 40 questions pointing at assistant text: "
        "sumheavy (extractive stand-in) 0 (0%), mixed (extractive stand-in) 5 (12%), keeper 30 (75%). "
        "sumheavy (extractive stand-in) keeps none of them outside its summary."
    ]  # the uncompacted reference is left out
    recall = _exam_recall()
    recall["n_assistant"] = 0  # no question points at assistant text: no sentence
    assert not _said(share.measured_text(share.headline_table(_run(tmp_path / "b", recall))), "Kept by design")


def test_the_headline_carries_the_split_and_the_view_shows_it(tmp_path):
    run = _run(tmp_path, _exam_recall())
    cont = pd.DataFrame(
        [
            {
                "block": "closed",
                "strategy": s,
                "retained": 8,
                "n": 10,
                "recall": 0.8,
                "ci_low": 0.5,
                "ci_high": 0.95,
                "reader_label": "needed-next recall (verbatim presence, stand-in)",
                "scope_retained": 3,
                "scope_recall": 0.3,
                "scope_ci_low": 0.1,
                "scope_ci_high": 0.6,
                "summary_retained": 5,
                "summary_recall": 0.5,
                "summary_ci_low": 0.2,
                "summary_ci_high": 0.8,
            }
            for s, *_ in ARMS
        ]
    )
    runfolder.save_table(cont, run, share.CONTINUATION_RECALL)
    h = share.headline_table(run)
    assert list(h.columns) == share.HEADLINE_COLUMNS
    r = h.set_index("strategy").loc["sumheavy"]
    assert (r["scope_retained"], r["summary_retained"], r["summary_by"]) == (10, 80, STAND_IN_LABEL)
    assert r["scope_of_n"] == share.retained_of_n(10, 100, 0.05, 0.15) == "10/100 (5%–15%)"
    assert r["summary_of_n"] == "80/100 (75%–85%)"
    assert (r["scope_retained_assistant"], r["n_assistant"]) == (0, 40)
    assert r["needed_next_scope_of_n"] == "3/10 (10%–60%)" and r["needed_next_summary_of_n"] == "5/10 (20%–80%)"
    assert r["needed_next_scope_recall"] == pytest.approx(0.3)
    view = share.headline_view(h).set_index("strategy")
    summary_col = f"only in the summary (summary recall, 95% CI), written by {STAND_IN_LABEL}"
    assert list(view.columns[:4]) == [
        "retained of N (95% CI)",
        "kept by design (scope recall, 95% CI)",
        summary_col,
        "needed-next recall (95% CI)",
    ]
    assert view.loc["sumheavy (extractive stand-in)", summary_col] == "80/100 (75%–85%)"
    assert view.loc["keeper", summary_col] == share.NO_SUMMARY
    assert view.loc["keeper", "needed-next recall (95% CI)"] == "8/10 (50%–95%) · scope 3/10 · summary 5/10"


def test_the_view_names_each_summariser_in_its_cell_when_they_differ(tmp_path):
    recall = _exam_recall()
    recall.loc[recall["strategy"] == "mixed", "summary_by"] = MODEL
    view = share.headline_view(share.headline_table(_run(tmp_path, recall))).set_index("strategy")
    col = "only in the summary (summary recall, 95% CI)"
    assert view.loc["mixed (extractive stand-in)", col] == f"30/100 (25%–35%) · written by {MODEL}"
    assert view.loc["sumheavy (extractive stand-in)", col] == f"80/100 (75%–85%) · written by {STAND_IN_LABEL}"
    # a model wrote some summary of an arm that ranks: both rankings are said
    lines = share.measured_text(share.headline_table(_run(tmp_path / "b", recall)))
    assert _said(lines, "Most retained") and _said(lines, "Most kept by design")


def test_a_run_folder_before_the_split_reads_it_as_not_measured(tmp_path):
    h = share.headline_table(_run(tmp_path, _exam_recall(parts=False)))
    assert list(h.columns) == share.HEADLINE_COLUMNS
    assert (h["scope_of_n"] == share.NOT_MEASURED).all() and (h["summary_of_n"] == share.NOT_MEASURED).all()
    assert h["scope_recall"].isna().all() and h["summary_by"].isna().all()
    assert (h["needed_next_scope_of_n"] == share.NOT_MEASURED).all()
    lines = share.measured_text(h)
    assert _said(lines, "Most retained of the arms that compacted and fit: sumheavy")
    assert not _said(lines, "Most kept by design") and not _said(lines, "Kept by design")
    assert share.STAND_IN_SUMMARY_RECALL not in lines
    view = share.headline_view(h)
    assert (view["kept by design (scope recall, 95% CI)"] == share.NOT_MEASURED).all()


def test_a_headline_saved_before_the_split_still_renders(tmp_path):
    h = share.headline_table(_run(tmp_path, _exam_recall()))
    new = share.HEADLINE_COLUMNS[share.HEADLINE_COLUMNS.index("needed_next_reader_label") + 1 :]
    old = h.drop(columns=new)
    view = share.headline_view(old)
    assert list(view.columns[1:5]) == [
        "retained of N (95% CI)",
        "kept by design (scope recall, 95% CI)",
        "only in the summary (summary recall, 95% CI)",
        "needed-next recall (95% CI)",
    ]
    assert (view["only in the summary (summary recall, 95% CI)"] == share.NOT_MEASURED).all()
    lines = share.measured_text(old)
    assert _said(lines, "Most retained of the arms that compacted and fit: sumheavy")
    assert not _said(lines, "Kept by design")
    assert "cl-headline" in share.headline_html(old)


def test_the_recorded_block_shows_each_arms_split_where_the_table_has_it(tmp_path):
    from compaction_lab.exam.exams import recorded

    base = {"case_id": "s-recorded-0", "session_id": "s", "agent": "pi", "model": "m1", "compaction": 0}
    found = pd.DataFrame(
        [{**base, "label": "recorded (pi, m1)", "eligible_values": 0, "eligible_in_summary": 0}],
        columns=recorded.FOUND_COLUMNS,
    )

    def row(strategy, label, k, scope, summary, own=False):
        return {
            **base,
            "strategy": strategy,
            "strategy_label": label,
            "recorded": strategy == "recorded",
            "own_agent": own,
            "retained": k,
            "n": 4,
            "recall": k / 4,
            "ci_low": 0.0,
            "ci_high": 1.0,
            "projection_tokens": 100.0,
            "over_window": False,
            "scope_retained": scope,
            "summary_retained": summary,
        }

    table = pd.DataFrame(
        [
            row("recorded", "recorded (pi, m1)", 3, 1, 2),
            row("pi", "pi (extractive stand-in)", 2, 2, 0, own=True),
            row("codex", "codex (extractive stand-in)", 1, pd.NA, pd.NA),  # not measured: no split shown
        ]
    )
    runfolder.save_table(found, tmp_path, "recorded_compactions")
    runfolder.save_table(table, tmp_path, "exam_recorded")
    (r,) = share.recorded_block(tmp_path).table.to_dict("records")
    assert r["the agent's own (recorded)"] == (
        "recorded (pi, m1): 3/4 (0%–100%) · kept by design 1, only in the summary 2"
    )
    assert (
        r["its reimplementation"] == "pi (extractive stand-in): 2/4 (0%–100%) · kept by design 2, only in the summary 0"
    )
    assert r["best other arm"] == "codex (extractive stand-in): 1/4 (0%–100%)"


def test_offline_a_single_ranked_arm_gets_its_scope_recall_and_the_stand_in_sentence(tmp_path):
    recall = _exam_recall()
    recall = recall[recall["strategy"].isin(["full", "sumheavy"])]
    lines = share.measured_text(share.headline_table(_run(tmp_path, recall)))
    assert _said(lines, "Only one arm") == [
        "Only one arm compacted and fits: sumheavy (extractive stand-in), 90/100 (85%–95%); "
        "kept by design 10/100 (5%–15%)."
    ]
    assert share.STAND_IN_SUMMARY_RECALL in lines


def test_offline_the_cost_per_point_says_its_recall_includes_the_stand_ins_summaries(tmp_path):
    """Cost per point of recall is per point of the total: offline the sentence says the stand-in's
    summaries are in it; with a model summariser it does not."""

    def lines(summary_by):
        h = share.headline_table(_run(tmp_path / str(summary_by), _exam_recall(summary_by)))
        priced = h.assign(
            compaction_cost_cold=0.1,
            compaction_cost_cached=0.01,
            break_even="5",
            cost_per_point=[0.5, 0.2, 0.3, 0.4],
            currency="USD",
            price_table="t",
            simulator="s",
        )
        return _said(share.measured_text(priced), "Lowest cost of one compaction + T turns per point of recall")

    (offline,) = lines(STAND_IN_LABEL)
    assert share.PER_POINT_STAND_IN in offline
    (model,) = lines(MODEL)
    assert share.PER_POINT_STAND_IN not in model
