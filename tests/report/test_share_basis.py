"""share (issue 45): a headline that states its basis; a best named only where the data separate it;
one wording for rank agreement; rediscoveries and state checks apart, with what their cost is priced as."""

from __future__ import annotations

import html
import json
import re
from types import SimpleNamespace

import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.exam.statistics import stats
from compaction_lab.report import render, share

VERBATIM = "verbatim reader (retention ceiling)"
NEXT_READER = "needed-next recall (verbatim presence, stand-in)"
NAN = float("nan")


def _recall(rows):
    """exam_recall rows from (strategy, label, k, n, low, high, tokens[, over_window[, compacted]])."""
    out = []
    for r in rows:
        strategy, label, k, n, low, high, tokens, *rest = r
        row = {
            "strategy": strategy,
            "strategy_label": label,
            "reader": "verbatim",
            "reader_label": VERBATIM,
            "retained": k,
            "n": n,
            "recall": k / n,
            "ci_low": low,
            "ci_high": high,
            "ci_method": "one session: cluster bootstrap ∪ cluster t over 17 records ∪ Clopper–Pearson",
            "n_sessions": 1,
            "n_records": 17,
            "top_session_share": 1.0,
            "projection_tokens": tokens,
            "over_window": rest[0] if rest else False,
        }
        if len(rest) > 1:
            row["compacted"] = rest[1]
        out.append(row)
    return pd.DataFrame(out)


def _cost(per_point):
    return pd.DataFrame(
        [
            {
                "strategy": s,
                "price_table": "t1",
                "simulator": "deepseek",
                "compaction_cost_cold": cold,
                "compaction_cost_cached": cold,
                "break_even": "3",
                "cost_per_point": cpp,
                "currency": "CNY",
            }
            for s, (cold, cpp) in per_point.items()
        ]
    )


@pytest.fixture
def run(tmp_path):
    d = runfolder.resolve(tmp_path / "run")
    runfolder.save_table(
        _recall(
            [
                ("full", "full (uncompacted reference)", 20, 20, 0.83, 1.0, 170_000, True),
                ("trunc", "truncate-oldest", 17, 20, 0.62, 1.0, 146_000),
                ("mask", "observation-masking", 14, 20, 0.46, 0.94, 97_000),
                ("pi", "pi (extractive stand-in)", 2, 20, 0.0, 0.32, 20_000),
            ]
        ),
        d,
        "exam_recall",
    )
    sessions = pd.DataFrame(
        {
            "session_id": ["a", "b", "c", "d"],
            "tokens": [400_000, 3_000, 1_000, 900],
            "would_compact": [True, False, False, False],
            "cut": [497, 0, 0, 0],
            "questions": [20, 0, 0, 0],
            "reason": ["", "would not compact", "would not compact", "would not compact"],
        }
    )
    runfolder.save_table(sessions, d, "exam_sessions")
    next_recall = {"block": "closed", "strategy": "trunc", "reader_label": NEXT_READER, "retained": 0, "n": 0}
    runfolder.save_table(
        pd.DataFrame([{**next_recall, "recall": NAN, "ci_low": NAN, "ci_high": NAN}]), d, share.CONTINUATION_RECALL
    )
    runfolder.save_table(
        _cost({"full": (0.0, 0.009), "trunc": (0.0, 0.012), "mask": (0.0, 0.013), "pi": (0.006, 0.066)}), d, "cost"
    )
    return d


# --------------------------------------------------------------------------- the basis line


def test_the_basis_line_states_sessions_records_questions_readers_and_stand_in_summaries(run):
    h = share.headline_table(run)
    text = share.measured_text(h)
    assert text[0] == (
        "Basis: 20 questions from 17 records, 1 session examined of 4 imported (3 would not compact at this "
        f"window), 4 arms; reader: {VERBATIM} — an offline stand-in, not a model; needed-next recall: "
        f"{NEXT_READER} — an offline stand-in, not a model; summaries: extractive stand-in for 1 of 4 arms (no "
        "model wrote them). 95% intervals: one session: cluster bootstrap ∪ cluster t over 17 records ∪ "
        "Clopper–Pearson."
    )
    assert text[1] == share.VERBATIM_FAVOURS and "cannot credit a paraphrase" in text[1] and "upper bound" in text[1]
    # A model reader is told what exact-value grading favours, without the verbatim reader's upper bound.
    model = h.assign(reader_label="model reader: tiny")
    assert share.measured_text(model)[1] == share.EXACT_FAVOURS


def test_a_headline_saved_before_the_basis_columns_says_what_it_carries(run):
    h = share.headline_table(run).drop(
        columns=["sessions_imported", "sessions_would_not_compact", "needed_next_reader_label", "compacted"]
    )
    basis = share.measured_text(h)[0]
    assert basis.startswith("Basis: 20 questions from 17 records, 1 session examined, 4 arms; reader:")
    assert "imported" not in basis and "needed-next" not in basis


def test_report_html_states_the_basis_above_the_headline(run):
    (run / runfolder.RUN_JSON).write_text(json.dumps({"started": "now", "parameters": {}}))
    page = render.build_index(run, SimpleNamespace(name="t", description="d", redact=False)).read_text("utf-8")
    basis = page.index(
        html.escape("Basis: 20 questions from 17 records, 1 session examined of 4 imported", quote=False)
    )
    assert basis < page.index('<h2 id="headline">Headline</h2>') < page.index("retained of N (95% CI)")


# --------------------------------------------------------------------------- a best, only where separated


def _said(h, start):
    return [line for line in share.measured_text(h) if line.startswith(start)]


def test_overlapping_intervals_name_no_best_and_say_which_arms_cannot_be_told_apart(run):
    h = share.headline_table(run)
    (most,) = _said(h, "Most retained")
    assert most == (
        "Most retained: the data cannot tell apart truncate-oldest 17/20 (62%–100%), observation-masking 14/20 "
        "(46%–94%) — their 95% intervals overlap."
    )
    (per,) = _said(h, "Lowest cost")
    assert "cannot tell apart truncate-oldest 0.0120 CNY, observation-masking 0.0130 CNY" in per
    joined = "\n".join(share.measured_text(h))
    assert "full" not in joined.replace(
        "Not sendable at this window (the projection is larger than W − O; shown for reference, never ranked): full (uncompacted reference).",
        "",
    )


def test_a_separated_arm_is_named(run):
    recall = pd.read_parquet(runfolder.table_path(run, "exam_recall"))
    recall.loc[recall["strategy"] == "mask", ["retained", "recall", "ci_low", "ci_high"]] = [4, 0.2, 0.05, 0.45]
    runfolder.save_table(recall, run, "exam_recall")
    # the same total cost over a fifth of the recall: 0.013 x 14/4 per point
    cost = {"full": (0.0, 0.009), "trunc": (0.0, 0.012), "mask": (0.0, 0.0455), "pi": (0.006, 0.066)}
    runfolder.save_table(_cost(cost), run, "cost")
    h = share.headline_table(run)
    assert _said(h, "Most retained") == [
        "Most retained of the arms that compacted and fit: truncate-oldest, 17/20 (62%–100%); its 95% interval "
        "lies above every other arm's."
    ]
    (per,) = _said(h, "Lowest cost")
    assert per.startswith("Lowest cost of one compaction + T turns per point of recall: truncate-oldest, 0.0120 CNY;")


def test_an_arm_that_did_not_compact_is_never_named_best(run):
    recall = pd.read_parquet(runfolder.table_path(run, "exam_recall"))
    recall["compacted"] = recall["strategy"].isin(["mask", "pi"])  # trunc's projection is the whole history
    recall.loc[recall["strategy"] == "mask", ["ci_low"]] = 0.5
    runfolder.save_table(recall, run, "exam_recall")
    h = share.headline_table(run)
    assert list(h["strategy"]) == ["mask", "pi", "trunc", "full"]  # unranked arms last
    lines = share.measured_text(h)
    assert (
        "Did not compact (the projection is the uncompacted history; shown for reference, never ranked): "
        "truncate-oldest." in lines
    )
    assert _said(h, "Most retained")[0].startswith(
        "Most retained of the arms that compacted and fit: observation-masking"
    )
    assert not any("Free to compact" in line and "truncate-oldest" in line for line in lines)
    # Without the column, an arm as large as the uncompacted reference did not compact either.
    same = recall.drop(columns="compacted")
    same.loc[same["strategy"] == "trunc", "projection_tokens"] = 170_000
    assert not share.compacted(same).set_axis(same["strategy"])[["full", "trunc"]].any()


def test_nothing_is_ranked_when_no_arm_compacted_and_fits(run):
    recall = pd.read_parquet(runfolder.table_path(run, "exam_recall"))
    recall["over_window"] = recall["strategy"] != "trunc"
    recall["compacted"] = False
    runfolder.save_table(recall, run, "exam_recall")
    lines = share.measured_text(share.headline_table(run))
    assert "No arm that compacted fits the usable capacity W − O at this window: nothing is ranked." in lines
    assert not any(line.startswith(("Most retained", "Lowest cost", "Cheapest", "Free")) for line in lines)


# --------------------------------------------------------------------------- the recorded block's best other arm


def _recorded_run(tmp_path, rows):
    from compaction_lab.exam.exams import recorded

    found = pd.DataFrame(
        [
            {
                "case_id": "s-recorded-0",
                "session_id": "s",
                "agent": "pi",
                "model": "m1",
                "compaction": 0,
                "eligible_values": 0,
                "eligible_in_summary": 0,
                "recorded_pool_recall": 0.0,
            }
        ],
        columns=recorded.FOUND_COLUMNS,
    )
    table = pd.DataFrame(
        [
            {
                "case_id": "s-recorded-0",
                "session_id": "s",
                "agent": "pi",
                "model": "m1",
                "compaction": 0,
                "strategy": s,
                "strategy_label": label,
                "recorded": s == "recorded",
                "own_agent": s == "pi",
                "retained": k,
                "n": 4,
                "recall": k / 4,
                "ci_low": 0.0,
                "ci_high": 1.0,
                "projection_tokens": tokens,
                "over_window": over,
                **({} if compacted is None else {"compacted": compacted}),
            }
            for s, label, k, tokens, over, compacted in rows
        ]
    )
    runfolder.save_table(found, tmp_path, "recorded_compactions")
    runfolder.save_table(table, tmp_path, "exam_recorded")
    (r,) = share.recorded_block(tmp_path).table.to_dict("records")
    return r["best other arm"]


def test_best_other_arm_is_never_the_reference_nor_an_arm_that_did_not_compact(tmp_path):
    base = [("recorded", "recorded (pi, m1)", 1, 50.0, False, None), ("pi", "pi (stand-in)", 2, 60.0, False, None)]
    # `full` fits here and retained most; truncate-oldest equals it (did not compact): neither is named.
    rows = base + [
        ("full", "full (uncompacted reference)", 4, 400.0, False, None),
        ("trunc", "truncate-oldest", 4, 400.0, False, None),
        ("codex", "codex", 3, 90.0, False, None),
    ]
    assert _recorded_run(tmp_path, rows) == "codex: 3/4 (0%–100%)"
    # H1's column, where present, decides.
    rows = base + [("trunc", "truncate-oldest", 4, 100.0, False, False), ("codex", "codex", 3, 90.0, False, True)]
    assert _recorded_run(tmp_path, rows) == "codex: 3/4 (0%–100%)"
    rows = base + [
        ("full", "full (uncompacted reference)", 4, 400.0, False, False),
        ("codex", "codex", 3, 90.0, True, True),
    ]
    assert _recorded_run(tmp_path, rows) == share.NO_BEST_OTHER == "none that compacted and fits"


# --------------------------------------------------------------------------- one wording for rank agreement


@pytest.mark.parametrize(
    ("agreement", "sentence"),
    [
        (
            stats.RankAgreement(NAN, NAN, NAN, 1, 3, "1 arm scored in both exams: nothing to rank"),
            "Closed-book and continuation rankings: not measured (1 arm scored in both exams: nothing to rank).",
        ),
        (
            stats.RankAgreement(
                0.88,
                NAN,
                NAN,
                10,
                1,
                "Spearman ρ of per-arm recall over 10 arms; all rows from one of the sessions: nothing to resample "
                "between, no interval",
            ),
            "Closed-book and continuation rankings: cannot tell (Spearman ρ = 0.88, 10 arms, 1 session: all rows "
            "from one of the sessions: nothing to resample between, no interval).",
        ),
        (
            stats.RankAgreement(0.2, -0.45, 0.8, 5, 6, "m"),
            "Closed-book and continuation rankings: cannot tell (Spearman ρ = 0.20, 95% CI −0.45 to 0.80, 5 arms, "
            "6 sessions: the interval holds 0).",
        ),
        (
            stats.RankAgreement(0.51, 0.12, 1.0, 5, 3, "m"),
            "Closed-book and continuation rankings agree (Spearman ρ = 0.51, 95% CI 0.12–1.00, 5 arms, 3 sessions).",
        ),
        (
            stats.RankAgreement(-0.7, -0.95, -0.1, 5, 6, "m"),
            "Closed-book and continuation rankings disagree (Spearman ρ = −0.70, 95% CI −0.95 to −0.10, 5 arms, "
            "6 sessions): the arms that keep most facts keep least of what the next step needs.",
        ),
    ],
)
def test_every_verdict_has_one_wording(agreement, sentence):
    said = share.agreement_sentence(agreement)
    assert said == sentence
    # "not measured" never comes with a ρ; "agree"/"disagree" only with an interval that excludes 0.
    assert not ("not measured" in said and re.search(r"ρ = [−\d]", said))
    assert ("agree (" in said or "disagree (" in said) == (agreement.verdict in (stats.AGREE, stats.DISAGREE))


# --------------------------------------------------------------------------- rediscoveries and state checks


def _compactions(split):
    row = {
        "session_id": "s",
        "agent": "pi",
        "model": "m1",
        "compaction": 0,
        "calls_after": 128,
        "repeats": 2,
        "repeats_kept": 1,
        "repeat_output_tokens": 5321,
        "repeat_cost": 0.0187,
        "currency": "CNY",
        "price_table": None,
        "priced_as": "the log's own cost",
    }
    if split:
        row.update({"state_checks": 3, "repeats_other": 1, "state_check_cost": 0.002, "state_check_output_tokens": 900})
    return pd.DataFrame([row])


def test_rediscoveries_and_state_checks_are_shown_apart_with_what_the_cost_is_priced_as(tmp_path):
    runfolder.save_table(_compactions(True), tmp_path, "rediscovery_compactions")
    block = share.continuation_block(tmp_path)
    assert block.rediscovery_lines == (
        "Recorded compactions in this run's logs: 1; after them the agents made 128 tool calls. Of their exact "
        "repeats of a call made before the compaction (same tool, identical arguments): 2 rediscoveries (a lookup "
        "whose earlier output the compaction dropped), 1 held (the earlier output was still kept), 3 state checks "
        "(a command re-run to see the state now) and 1 other repeats.",
        "Their cost is priced as: the log's own cost.",
    )
    (row,) = block.rediscovery.to_dict("records")
    assert row["rediscoveries (earlier output dropped)"] == 2 and row["state checks"] == 3
    assert row["what the rediscoveries cost"] == "0.0187 CNY" and row["what the state checks cost"] == "0.0020 CNY"
    assert row["priced as"] == "the log's own cost"


def test_a_table_from_before_the_split_keeps_its_wording_and_shows_the_pricing(tmp_path):
    runfolder.save_table(_compactions(False).drop(columns="priced_as"), tmp_path, "rediscovery_compactions")
    block = share.continuation_block(tmp_path)
    assert "2 of them exact repeats" in block.rediscovery_lines[0]
    assert "priced as" not in block.rediscovery.columns and "state checks" not in block.rediscovery.columns
    runfolder.save_table(_compactions(False), tmp_path, "rediscovery_compactions")
    (row,) = share.continuation_block(tmp_path).rediscovery.to_dict("records")
    assert row["what they cost"] == "0.0187 CNY" and row["priced as"] == "the log's own cost"
