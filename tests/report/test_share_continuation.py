"""share (issue 29): the headline's needed-next column, the rankings sentence, and the report's notebook 06 block."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.exam.statistics import stats
from compaction_lab.report import render, share

NEXT_READER = "needed-next recall (verbatim presence, stand-in)"

#: (strategy, label, closed-book recall, retained, n) of the closed book's recall table.
CLOSED = [
    ("full", "full", 1.0, 40, 40),
    ("det", "det", 0.9, 36, 40),
    ("codex", "codex (extractive stand-in)", 0.55, 22, 40),
]


def _exam_recall():
    return pd.DataFrame(
        [
            {
                "strategy": s,
                "strategy_label": label,
                "retained": k,
                "n": n,
                "recall": r,
                "ci_low": max(0.0, r - 0.15),
                "ci_high": min(1.0, r + 0.05),
                "projection_tokens": 1000.0,
                "reader_label": "verbatim reader (retention ceiling)",
            }
            for s, label, r, k, n in CLOSED
        ]
    )


def _continuation_recall():
    def row(block, strategy, label, k, n, low, high, over=False):
        return {
            "block": block,
            "strategy": strategy,
            "strategy_label": label,
            "reader": "verbatim_presence",
            "reader_label": NEXT_READER,
            "retained": k,
            "n": n,
            "recall": k / n if n else float("nan"),
            "ci_low": low,
            "ci_high": high,
            "over_window": over,
            "projection_tokens": 1000.0,
            "n_predicted": float("nan"),
        }

    return pd.DataFrame(
        [
            row("closed", "full", "full", 19, 20, 0.7, 1.0, over=True),
            row("closed", "det", "det", 14, 20, 0.45, 0.88),
            row("closed", "codex", "codex (extractive stand-in)", 0, 0, float("nan"), float("nan")),
            # The recorded block's rows are other cases: never the headline's.
            row("recorded", "det", "det", 1, 9, 0.0, 0.5),
        ]
    )


@pytest.fixture
def run(tmp_path):
    d = runfolder.resolve(tmp_path / "run")
    runfolder.save_table(_exam_recall(), d, "exam_recall")
    return d


def test_headline_gains_the_needed_next_column_from_the_closed_block(run):
    runfolder.save_table(_continuation_recall(), run, share.CONTINUATION_RECALL)
    h = share.headline_table(run).set_index("strategy")
    assert list(share.headline_table(run).columns) == share.HEADLINE_COLUMNS
    assert h.loc["det", "needed_next_of_n"] == share.retained_of_n(14, 20, 0.45, 0.88) == "14/20 (45%–88%)"
    assert (h.loc["det", "needed_next_retained"], h.loc["det", "needed_next_n"]) == (14, 20)
    assert h.loc["det", "needed_next_recall"] == pytest.approx(0.7)
    assert h.loc["full", "needed_next_of_n"] == f"19/20 (70%–100%) · {share.NOT_SENDABLE}"
    # An arm whose next actions needed nothing from memory: not measured, never 0/0.
    assert h.loc["codex", "needed_next_of_n"] == share.NOT_MEASURED and h.loc["codex", "needed_next_n"] == 0
    assert math.isnan(h.loc["codex", "needed_next_recall"])
    view = share.headline_view(share.headline_table(run))
    assert list(view.columns[:5]) == [
        "strategy",
        "retained of N (95% CI)",
        "kept by design (scope recall, 95% CI)",
        "only in the summary (summary recall, 95% CI)",
        "needed-next recall (95% CI)",
    ]
    assert "needed-next recall (95% CI)" in share.headline_html(share.headline_table(run))


def test_an_older_run_folder_renders_with_the_column_not_measured(run):
    h = share.headline_table(run)  # no continuation_recall: notebook 06 did not run
    assert (h["needed_next_of_n"] == share.NOT_MEASURED).all() and h["needed_next_recall"].isna().all()
    # A headline notebook 07 saved before the column existed still renders, the column n/a.
    old = h.drop(columns=[c for c in h.columns if c.startswith("needed_next")])
    view = share.headline_view(old)
    assert list(view["needed-next recall (95% CI)"]) == [share.NOT_MEASURED] * 3
    assert share.continuation_block(run) is None
    assert share.rankings_agreement(run) == f"{share.RANKINGS}: not measured (no continuation exam in this run)."


def _answers(rates, n_sessions=6, n=12, seed=0, decoy=None):
    """Answer rows of `rates` {strategy: p} in `n_sessions` sessions (hits drawn per session, so they vary)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_sessions):
        for strategy, p in rates.items():
            k = int(rng.binomial(n, p))
            rows += [
                {"strategy": strategy, "session_id": f"s{s}", "case_id": f"c{s}", "correct": i < k} for i in range(n)
            ]
    df = pd.DataFrame(rows)
    if decoy is not None:
        df["decoy"] = decoy
    return df


RATES = {"full": 0.95, "det": 0.75, "codex": 0.5, "pi": 0.3, "none": 0.1}


def _save_exams(run, closed_rates, next_rates, *, over=()):
    closed = _answers(closed_rates, seed=1, decoy=False).assign(reader="verbatim")
    closed["over_window"] = closed["strategy"].isin(over)
    targets = _answers(next_rates, seed=2).assign(block="closed")
    recorded = _answers(dict(zip(next_rates, reversed(list(next_rates.values())), strict=True)), seed=3)
    targets = pd.concat([targets, recorded.assign(block="recorded")], ignore_index=True)
    runfolder.save_table(closed, run, "exam_closed")
    runfolder.save_table(targets, run, share.CONTINUATION_TARGETS)
    return closed, targets


def test_the_rankings_sentence_agrees_when_both_exams_rank_alike(run):
    closed, targets = _save_exams(run, RATES, RATES)
    sentence = share.rankings_agreement(run, n_boot=300, seed=3)
    # The closed block only (the recorded block, ranked the other way, would pull ρ down).
    expected = stats.rank_agreement(closed, targets[targets["block"] == "closed"], n_boot=300, seed=3)
    assert expected.verdict == "agree"
    assert sentence == (
        f"{share.RANKINGS} agree (Spearman ρ = {expected.rho:.2f}, 95% CI {expected.ci_low:.2f}–"
        f"{expected.ci_high:.2f}, 5 arms, 6 sessions)."
    )
    # The run's own n_boot and stats_seed are the default.
    (run / runfolder.RUN_JSON).write_text(json.dumps({"parameters": {"n_boot": 300, "stats_seed": 3}}))
    assert share.rankings_agreement(run) == sentence


def test_the_rankings_sentence_says_reversed_and_leaves_an_over_window_arm_out(run):
    backwards = dict(zip(RATES, reversed(list(RATES.values())), strict=True))
    _save_exams(run, RATES, backwards, over=("none",))
    sentence = share.rankings_agreement(run, n_boot=300)
    assert sentence.startswith(f"{share.RANKINGS} disagree (Spearman ρ = −")
    assert "4 arms, 6 sessions" in sentence and " to −" in sentence  # negative bounds: "to", a real minus


def test_the_rankings_sentence_words_every_verdict():
    unclear = stats.RankAgreement(0.2, -0.45, 0.8, 5, 6, "m")
    assert share.agreement_sentence(unclear) == (
        f"{share.RANKINGS}: cannot tell (Spearman ρ = 0.20, 95% CI −0.45 to 0.80, 5 arms, 6 sessions: "
        "the interval holds 0)."
    )
    two = stats.RankAgreement(1.0, float("nan"), float("nan"), 2, 6, "two arms give ±1 by construction")
    assert share.agreement_sentence(two) == (
        f"{share.RANKINGS}: cannot tell (Spearman ρ = 1.00, 2 arms, 6 sessions: two arms give ±1 by construction)."
    )
    none = stats.RankAgreement(float("nan"), float("nan"), float("nan"), 1, 3, "1 arm scored in both exams")
    assert share.agreement_sentence(none) == f"{share.RANKINGS}: not measured (1 arm scored in both exams)."


def _compactions():
    return pd.DataFrame(
        [
            {
                "session_id": "<script>alert(1)</script>",
                "agent": "pi",
                "model": "m1",
                "compaction": 0,
                "cut": 10,
                "after": 12,
                "until": 90,
                "calls_after": 128,
                "repeats": 4,
                "repeats_kept": 1,
                "repeat_output_tokens": 5321,
                "repeat_cost": float("nan"),  # no price table: no cost, never 0
                "currency": None,
                "price_table": None,
            }
        ]
    )


def test_continuation_block_gathers_the_sentence_the_reader_and_the_rediscovery(run):
    runfolder.save_table(_continuation_recall(), run, share.CONTINUATION_RECALL)
    runfolder.save_table(_compactions(), run, "rediscovery_compactions")
    _save_exams(run, RATES, RATES)
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'
    (run / runfolder.FIGURES / "fig10_continuation.svg").write_text(svg)
    block = share.continuation_block(run)
    assert block.lines[0] == share.rankings_agreement(run)
    assert NEXT_READER in block.lines[1]  # the stand-in, named from the table
    assert block.rediscovery_lines == (
        "Recorded compactions in this run's logs: 1; after them the agents made 128 tool calls, 4 of them exact "
        "repeats of a call made before the compaction (same tool, identical arguments); the earlier output of 1 "
        "of those was still in what the agent kept.",
    )
    (row,) = block.rediscovery.to_dict("records")
    assert row["what they cost"] == share.NOT_MEASURED and row["tokens the repeats added"] == "5,321"
    assert "<script>" not in block.html() and "&lt;script&gt;" in block.html()
    assert block.figures == (("fig10_continuation", "can the agent still continue?"),)  # only saved ones


def test_continuation_block_without_a_recorded_compaction_or_a_needed_target(run):
    table = _continuation_recall().assign(n=0, retained=0)
    runfolder.save_table(table, run, share.CONTINUATION_RECALL)
    runfolder.save_table(_compactions().iloc[:0], run, "rediscovery_compactions")
    block = share.continuation_block(run)
    assert "not measured" in block.lines[0]  # no continuation_targets table
    assert block.lines[1].startswith("Needed-next recall: not measured")
    assert block.rediscovery_lines[0].startswith("Not measured: no recorded compaction")
    assert block.html() == "" and block.figures == ()


def test_model_grades_are_said_per_arm_when_a_model_predicted(run):
    table = _continuation_recall()
    table.loc[table["strategy"] == "det", ["n_predicted", "tool_match", "target_match", "exact_match"]] = [
        12,
        0.75,
        0.5,
        0.25,
    ]
    table["decoy_actions"] = [float("nan"), 1.0, float("nan"), float("nan")]
    table["model_reader_label"] = [None, "model reader: tiny", None, None]
    runfolder.save_table(table, run, share.CONTINUATION_RECALL)
    lines = share.continuation_block(run).lines
    (said,) = [line for line in lines if "the next call of" in line]
    assert said == (
        "det: the next call of model reader: tiny over 12 cases named the right tool in 75%, a needed target in 50%, "
        "the exact arguments in 25%; it acted on a look-alike that never existed 1 times."
    )
    # a table from before the label was kept (no model_reader_label) still says it was a model
    runfolder.save_table(table.drop(columns="model_reader_label"), run, share.CONTINUATION_RECALL)
    assert any(
        line.startswith("det: the next call of the model over 12") for line in share.continuation_block(run).lines
    )


def test_report_html_has_notebook_07_section_after_the_figures(run):
    runfolder.save_table(_continuation_recall(), run, share.CONTINUATION_RECALL)
    runfolder.save_table(_compactions(), run, "rediscovery_compactions")
    _save_exams(run, RATES, RATES)
    (run / runfolder.RUN_JSON).write_text(json.dumps({"started": "now", "parameters": {"n_boot": 200}}))
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="5" height="5"/></svg>'
    for stem in ("fig9_open_book", "fig10_continuation", "fig11_rediscovery"):
        (run / runfolder.FIGURES / f"{stem}.svg").write_text(svg)
    profile = SimpleNamespace(name="t", description="d", redact=False)
    page = render.build_index(run, profile).read_text(encoding="utf-8")
    section = page.index('<h2 id="continuation">Can the agent still continue?</h2>')
    # The page reads headline, figures, then each notebook's block with its tables (issue 48).
    assert page.index('<h2 id="headline">Headline</h2>') < page.index('<h2 id="figures">Figures</h2>') < section
    assert share.rankings_agreement(run) in page
    assert 'href="#fig10_continuation"' in page and 'id="fig10_continuation"' in page
    assert (
        page.index('id="fig9_open_book"') < page.index('id="fig10_continuation"') < page.index('id="fig11_rediscovery"')
    )
    assert "needed-next recall (95% CI)" in page
    assert "<script>alert(1)" not in page
