"""share: the headline table, the values-only text, the figures of a run, its facts."""

import json

import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.report import share


def _recall(rows):
    cols = [
        "strategy",
        "strategy_label",
        "retained",
        "n",
        "recall",
        "ci_low",
        "ci_high",
        "projection_tokens",
        "reader_label",
    ]
    return pd.DataFrame(rows, columns=cols)


def _cost(rows):
    cols = [
        "strategy",
        "price_table",
        "simulator",
        "compaction_cost_cold",
        "compaction_cost_cached",
        "break_even",
        "cost_per_point",
        "currency",
    ]
    return pd.DataFrame(rows, columns=cols)


@pytest.fixture
def run(tmp_path):
    d = runfolder.resolve(tmp_path / "run")
    runfolder.save_table(
        _recall(
            [
                ("full", "full", 40, 40, 1.0, 1.0, 1.0, 90_000, "verbatim reader (retention ceiling)"),
                (
                    "codex",
                    "codex (extractive stand-in)",
                    22,
                    40,
                    0.55,
                    0.4,
                    0.7,
                    4_000,
                    "verbatim reader (retention ceiling)",
                ),
                ("det", "det", 36, 40, 0.9, 0.8, 0.975, 16_000, "verbatim reader (retention ceiling)"),
            ]
        ),
        d,
        "exam_recall",
    )
    runfolder.save_table(
        _cost(
            [
                ("full", "t1", "deepseek", 0.0, 0.0, "0", 0.02, "CNY"),
                ("codex", "t1", "deepseek", 0.14, 0.13, "never", 0.03, "CNY"),
                ("det", "t1", "deepseek", 0.0, 0.0, "3", 0.01, "CNY"),
                ("full", "t1", "none", 0.0, 0.0, "0", 0.5, "CNY"),
                ("codex", "t1", "none", 0.14, 0.14, "never", 0.6, "CNY"),
                ("det", "t1", "none", 0.0, 0.0, "0", 0.2, "CNY"),
            ]
        ),
        d,
        "cost",
    )
    return d


def test_headline_joins_recall_and_the_chosen_cost_view(run):
    h = share.headline_table(run)
    assert list(h.columns) == share.HEADLINE_COLUMNS
    assert list(h["strategy"]) == ["det", "codex", "full"]  # best recall first; the uncompacted reference last
    assert set(h["simulator"]) == {"deepseek"}  # the table's own rule, not "none", by default
    assert h.set_index("strategy").loc["codex", "retained_of_n"] == "22/40 (40%–70%)"
    h2 = share.headline_table(run, "t1", "none")
    assert h2.set_index("strategy").loc["det", "cost_per_point"] == 0.2
    with pytest.raises(ValueError, match="not in the run's cost table"):
        share.headline_table(run, "nope")
    with pytest.raises(ValueError, match="not priced"):
        share.headline_table(run, "t1", "openai")


def test_headline_without_cost_or_recall(tmp_path, run):
    (run / "cost.parquet").unlink()
    h = share.headline_table(run)
    assert h["compaction_cost_cold"].isna().all() and len(h) == 3
    assert "money" not in " ".join(share.measured_text(h)).lower()
    empty = share.headline_table(runfolder.resolve(tmp_path / "empty"))
    assert empty.empty and share.measured_text(empty) == [share.NO_HEADLINE]
    assert "no headline" in share.headline_html(empty)


def test_measured_text_states_values_from_the_table(run):
    text = share.measured_text(share.headline_table(run))
    joined = "\n".join(text)
    assert text[0].startswith("Basis: 40 questions, 3 arms; reader: verbatim reader (retention ceiling) — an offline")
    assert text[1] == share.VERBATIM_FAVOURS
    # `full` did not compact: shown for reference, never named most retained, free or cheapest.
    assert (
        "Did not compact (the projection is the uncompacted history; shown for reference, never ranked): full."
        in joined
    )
    assert "Most retained of the arms that compacted and fit: det, 36/40 (80%–98%)" in joined
    assert "Most retained: full" not in joined
    assert "from 4,000 tokens (codex (extractive stand-in)) to 16,000 (det)" in joined
    assert "Free to compact (no model request): det." in joined
    assert "codex (extractive stand-in), 0.1300 CNY (cold 0.1400 CNY)" in joined
    assert "per point of recall: det, 0.0100 CNY; the interval its recall gives it lies below" in joined
    assert "Never repays its compaction against continuing uncompacted: codex (extractive stand-in)." in joined


def test_an_arm_over_the_window_is_flagged_listed_last_and_never_named_best(run):
    """The old run folder above has no feasibility column: nothing is flagged. With `full` over W − O (it
    retained all 40), it is listed last, its retained-of-N says it could not be sent, and the sentences name
    `det` most retained, never `full`; the units and method of the intervals are stated."""
    old = share.headline_table(run)
    assert not old["over_window"].any() and old["strategy"].iloc[-1] == "full"  # did not compact: last
    recall = pd.read_parquet(runfolder.table_path(run, "exam_recall"))
    recall["over_window"] = recall["strategy"] == "full"
    recall["n_sessions"], recall["n_records"] = 3, 17
    recall["ci_method"], recall["top_session_share"] = "cluster bootstrap over 3 sessions ∪ Clopper–Pearson", 0.6
    runfolder.save_table(recall, run, "exam_recall")
    h = share.headline_table(run)
    assert list(h["strategy"]) == ["det", "codex", "full"]
    assert h["retained_of_n"].iloc[-1] == f"40/40 (100%–100%) · {share.NOT_SENDABLE}"
    joined = "\n".join(share.measured_text(h))
    assert "Basis: 40 questions from 17 records, 3 sessions examined, 3 arms;" in joined
    assert "95% intervals: cluster bootstrap over 3 sessions ∪ Clopper–Pearson." in joined
    assert "One session gives 60% of the questions" in joined
    assert "Not sendable at this window" in joined and "never ranked): full." in joined
    assert "Most retained of the arms that compacted and fit: det, 36/40" in joined
    assert "Most retained: full" not in joined and "Did not compact" not in joined  # over the window says it
    assert "per point of recall: det" in joined


def test_overlapping_intervals_are_said(run):
    h = share.headline_table(run)
    h.loc[h["strategy"] == "codex", "ci_high"] = 1.0
    (said,) = [line for line in share.measured_text(h) if line.startswith("Most retained")]
    assert said == (
        "Most retained: the data cannot tell apart det 36/40 (80%–98%), codex (extractive stand-in) 22/40 (40%–70%)"
        " — their 95% intervals overlap."
    )


def test_figures_in_order_with_inline_svg(run):
    figs = run / "figures"
    svg = '<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'
    for stem in ("fig9_open_book", "fig1_retained", "fig3_recall_tokens", "fig3_complete", "zz_extra"):
        (figs / f"{stem}.svg").write_text(svg)
        (figs / f"{stem}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    found = share.figures(run)
    # The report's order: notebook by notebook in chain order (03 before 04), then any figure it does not know.
    assert [f.stem for f in found] == [
        "fig1_retained",
        "fig3_recall_tokens",
        "fig3_complete",
        "fig9_open_book",
        "zz_extra",
    ]
    html = share.figure_html(found[0], number=4)
    assert html.startswith('<figure class="cl-figure" id="fig1_retained"><svg') and "<?xml" not in html
    assert 'href="figures/fig1_retained.png"' in html and "Figure 4 — " in html
    # Numbered down the page whatever the run measured: the numbers follow the figures shown.
    assert [n for n, _ in share.page_order(found)] == [1, 2, 3, 4, 5]


def test_run_facts(run):
    assert share.run_facts(run)["value"].str.contains("missing").any()
    (run / "run.json").write_text(
        json.dumps(
            {
                "run": "r1",
                "profile": "smoke",
                "parameters": {"seed": 7},
                "packages": {"pandas": "2"},
                "git": {"commit": "abc"},
            }
        )
    )
    facts = share.run_facts(run).set_index("what")["value"]
    assert facts["parameter: seed"] == "7" and facts["package: pandas"] == "2" and facts["commit"] == "abc"


def test_recorded_block_per_compaction(tmp_path):
    """The report's real-compactions block: the agent's own, its reimplementation and the best other arm."""
    assert share.recorded_block(tmp_path) is None  # notebook 03 did not look
    from compaction_lab.exam.exams import recorded

    found = pd.DataFrame(
        [
            {
                "case_id": "s-recorded-0",
                "session_id": "s",
                "agent": "pi",
                "model": "m1",
                "label": "recorded (pi, m1)",
                "compaction": 0,
                "compaction_entry": "e9",
                "cut": 9,
                "after": 10,
                "tail_start": 7,
                "kept_from": "e7",
                "eligible_values": 12,
                "eligible_in_summary": 5,
                "recorded_pool_recall": 0.5,
                "questions": 4,
                "decoys": 1,
            }
        ],
        columns=recorded.FOUND_COLUMNS,
    )
    skipped = pd.DataFrame(
        [{"session_id": "x", "source_format": "swe_agent", "reason": "its format (swe_agent) records no compactions"}]
        * 2,
        columns=recorded.SKIP_COLUMNS,
    )

    def row(strategy, label, k, own=False, over=False):
        return {
            "case_id": "s-recorded-0",
            "session_id": "s",
            "agent": "pi",
            "model": "m1",
            "compaction": 0,
            "strategy": strategy,
            "strategy_label": label,
            "recorded": strategy == "recorded",
            "own_agent": own,
            "retained": k,
            "n": 4,
            "recall": k / 4,
            "ci_low": 0.0,
            "ci_high": 1.0,
            "decoys_fallen": 0,
            "decoys_n": 1,
            "projection_tokens": 100.0,
            "over_window": over,
            "kept_match": False if own else pd.NA,
            "kept_note": "not a like-for-like check: the log kept from entry e7, the reimplementation from entry e5"
            if own
            else "",
        }

    table = pd.DataFrame(
        [
            row("recorded", "recorded (pi, m1)", 1),
            row("pi", "pi (extractive stand-in)", 2, True),
            {**row("full", "full (uncompacted reference)", 4, over=True), "projection_tokens": 400.0},  # not sendable
            row("codex", "codex (extractive stand-in)", 3),
        ],
        columns=recorded.TABLE_COLUMNS,
    )
    for name, df in (("recorded_compactions", found), ("recorded_skipped", skipped), ("exam_recorded", table)):
        runfolder.save_table(df, tmp_path, name)
    block = share.recorded_block(tmp_path)
    assert block.count == 1
    assert block.lines == (
        "Real compactions found in your logs: 1 (in 1 session; agents: pi)",
        "Skipped: 2 sessions — its format (swe_agent) records no compactions",
        "s #1: 12 eligible values (before the cut, outside what the agent kept verbatim); its real summary holds "
        "5 of them (the agent's whole next request holds 50%).",
        "s #1: not a like-for-like check: the log kept from entry e7, the reimplementation from entry e5",
    )
    (r,) = block.table.to_dict("records")
    assert r == {
        "compaction": "s #1 (pi, m1)",
        "the agent's own (recorded)": "recorded (pi, m1): 1/4 (0%–100%)",
        "its reimplementation": "pi (extractive stand-in): 2/4 (0%–100%)",
        "best other arm": "codex (extractive stand-in): 3/4 (0%–100%)",
    }
    assert "recorded (pi, m1): 1/4" in block.html()


def test_recorded_block_says_an_opaque_summary_is_not_readable(tmp_path):
    """Issue 27 item 2: a Codex remote compaction's encrypted summary is neither credited nor counted as 0."""
    from compaction_lab.exam.exams import recorded

    base = {"session_id": "s", "agent": "codex", "model": "m", "compaction": 0, "eligible_values": 10}
    found = pd.DataFrame(
        [
            {
                **base,
                "case_id": "s-recorded-0",
                "eligible_in_summary": pd.NA,
                "recorded_pool_recall": 0.2,
                "summary_readable": False,
                "opaque_summary_tokens": 588,
            }
        ],
        columns=recorded.FOUND_COLUMNS,
    )
    row = {
        **base,
        "case_id": "s-recorded-0",
        "strategy": "recorded",
        "strategy_label": "recorded (codex, m)",
        "recorded": True,
        "own_agent": False,
        "retained": 1,
        "n": 4,
        "recall": 0.25,
        "ci_low": 0.0,
        "ci_high": 1.0,
        "projection_tokens": 100.0,
        "over_window": False,
        "summary_opaque": True,
    }
    table = pd.DataFrame([row], columns=recorded.TABLE_COLUMNS)
    runfolder.save_table(found, tmp_path, "recorded_compactions")
    runfolder.save_table(table, tmp_path, "exam_recorded")
    block = share.recorded_block(tmp_path)
    assert block.lines[1] == (
        "s #1: 10 eligible values (before the cut, outside what the agent kept verbatim); its real summary is "
        "opaque (encrypted, about 588 tokens): the model reads it, this suite cannot — not readable (the readable "
        "rest of its next request holds 20%, a lower bound)."
    )
    (r,) = block.table.to_dict("records")
    assert r["the agent's own (recorded)"] == (
        "recorded (codex, m): 1/4 (0%–100%) (summary opaque: not readable, a lower bound)"
    )
