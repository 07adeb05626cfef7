"""decision: the Pareto set of recall against cost, the pairs the data cannot tell apart, what would change it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.exam.statistics import power
from compaction_lab.report import decision, share

READER = "verbatim reader (retention ceiling)"


def test_pareto_keeps_what_nothing_beats_on_every_axis():
    arms = pd.DataFrame(
        {
            "a": [0.9, 0.9, 0.5, 0.9, 0.2],
            "b": [0.1, 0.1, 0.9, 0.1, 0.1],
            "cost": [1.0, 2.0, 3.0, 1.0, 0.5],
        }
    )
    # 1 is dominated by 0 (same recall, dearer); 0 and 3 are equal on everything: both kept;
    # 2 recalls most on b; 4 is cheapest.
    assert decision.pareto(arms, ["a", "b"], "cost").tolist() == [True, False, True, True, True]
    # Without a price, only recall counts: 4 (0.2, 0.1) is now beaten by 0.
    assert decision.pareto(arms, ["a", "b"], None).tolist() == [True, True, True, True, False]


def test_separated_reads_only_the_intervals():
    a = {"x_low": 0.6, "x_high": 0.9}
    assert decision.separated(a, {"x_low": 0.1, "x_high": 0.5}, "x") == 1
    assert decision.separated({"x_low": 0.1, "x_high": 0.5}, a, "x") == -1
    assert decision.separated(a, {"x_low": 0.1, "x_high": 0.6}, "x") == 0


def _headline(rows):
    """A headline as `share.headline_table` writes it, from (strategy, k, n, low, high, nn_k, nn_n, nn_low,
    nn_high, compacted, over_window)."""
    out = []
    for s, k, n, low, high, nk, nn, nlow, nhigh, comp, over in rows:
        out.append(
            {
                "strategy": s,
                "strategy_label": s,
                "retained": k,
                "n": n,
                "recall": k / n,
                "ci_low": low,
                "ci_high": high,
                "projection_tokens": 1000,
                "reader_label": READER,
                "n_sessions": 4,
                "n_records": 40,
                "ci_method": "",
                "top_session_share": 0.25,
                "over_window": over,
                "compacted": comp,
                "needed_next_retained": nk,
                "needed_next_n": nn,
                "needed_next_recall": nk / nn,
                "needed_next_ci_low": nlow,
                "needed_next_ci_high": nhigh,
                "needed_next_reader_label": "needed-next",
                "price_table": "t1",
                "simulator": "deepseek",
                "currency": "CNY",
                "summary_by": None,
            }
        )
    return pd.DataFrame(out)


def _folder(tmp_path, headline, costs, answers=None):
    d = runfolder.resolve(tmp_path / "run")
    runfolder.save_table(headline, d, share.HEADLINE)
    runfolder.save_table(
        pd.DataFrame(
            [
                {"strategy": s, "price_table": "t1", "simulator": "deepseek", "total_cost": c, "turns": 50}
                for s, c in costs.items()
            ]
        ),
        d,
        "cost",
    )
    if answers is not None:
        runfolder.save_table(answers, d, "exam_closed")
    return d


def _answers(right: dict[str, list[bool]], sessions: int = 8) -> pd.DataFrame:
    rows = []
    for s, marks in right.items():
        for i, ok in enumerate(marks):
            rows.append(
                {
                    "strategy": s,
                    "reader_label": READER,
                    "session_id": f"s{i % sessions}",
                    "case_id": f"c{i % sessions}",
                    "question_id": f"q{i}",
                    "correct": ok,
                    "found_in": "verbatim" if ok else "nowhere",
                    "decoy": False,
                }
            )
    return pd.DataFrame(rows)


def test_the_pareto_set_is_named_and_each_pair_says_what_separates_it(tmp_path):
    h = _headline(
        [
            ("keep", 36, 40, 0.80, 0.97, 2, 10, 0.0, 0.45, True, False),
            ("mask", 35, 40, 0.78, 0.96, 10, 10, 0.70, 1.0, True, False),
            ("lossy", 20, 40, 0.35, 0.65, 5, 10, 0.2, 0.8, True, False),
            ("huge", 40, 40, 0.9, 1.0, 10, 10, 0.7, 1.0, False, True),
            ("idle", 40, 40, 0.9, 1.0, 10, 10, 0.7, 1.0, False, False),
        ]
    )
    d = _folder(tmp_path, h, {"keep": 1.0, "mask": 1.2, "lossy": 1.5, "huge": 3.0, "idle": 2.0})
    got = decision.decide(d)
    assert got.pareto == ["keep", "mask"]  # lossy costs more and recalls less on both exams
    assert got.verdict.startswith("Pareto set (recall on closed book and needed-next against cost of one compaction")
    assert "keep, mask" in got.verdict
    (pair,) = got.pairs
    assert "on needed-next mask recalls more" in pair and "cannot tell them apart on closed book" in pair
    assert "keep costs 0.2000 CNY less" in pair
    # Over the window or not compacted: never weighed, and said why.
    (left,) = got.left_out
    assert "huge: not sendable" in left and "idle: did not compact" in left
    assert set(got.weighed_strategies["strategy"]) == {"keep", "mask", "lossy"}
    assert got.currency == "CNY" and got.turns == 50
    html = got.html()
    assert "What would change the answer" in html and "keep, mask" in html


def test_no_arm_separable_says_so_and_names_the_cheapest(tmp_path):
    h = _headline(
        [
            ("a", 30, 40, 0.6, 0.9, 5, 10, 0.2, 0.8, True, False),
            ("b", 28, 40, 0.55, 0.85, 6, 10, 0.3, 0.85, True, False),
        ]
    )
    got = decision.decide(_folder(tmp_path, h, {"a": 2.0, "b": 1.0}))
    assert got.verdict.startswith("No arm is separable")
    assert "the cheapest is b" in got.verdict
    assert got.pairs == ()


def test_what_would_change_it_uses_the_power_analysis_of_the_answers(tmp_path):
    rng = np.random.default_rng(3)
    marks = {"keep": list(rng.random(40) < 0.9), "mask": list(rng.random(40) < 0.8)}
    k = {s: int(sum(v)) for s, v in marks.items()}
    h = _headline(
        [
            ("keep", k["keep"], 40, 0.7, 0.97, 2, 10, 0.0, 0.45, True, False),
            ("mask", k["mask"], 40, 0.6, 0.95, 10, 10, 0.70, 1.0, True, False),
        ]
    )
    d = _folder(tmp_path, h, {"keep": 1.0, "mask": 1.2}, _answers(marks))
    got = decision.decide(d)
    # Sessions are the unit the intervals resample: the count said is pair_power's with a session as the unit,
    # beside the count were questions independent.
    by_session = power.pair_power(_answers(marks), "keep", "mask", question=("session_id",))
    by_question = power.pair_power(_answers(marks), "keep", "mask")
    assert by_session.questions_needed is not None and by_question.questions_needed is not None
    (line,) = [c for c in got.changes if "on closed book" in c]
    assert f"were questions independent, about {by_question.questions_needed:,} would (this run asked 40)" in line
    assert by_session.questions_needed > by_session.n_questions == 8  # the data: 8 sessions are too few
    assert line.startswith(f"About {by_session.questions_needed:,} sessions would tell keep from mask")
    # The verbatim reader is an offline stand-in: a model reader is named as what would change it.
    assert any(c.startswith("A model reader") for c in got.changes)


def test_with_two_sessions_the_intervals_not_the_approximation_are_trusted(tmp_path):
    """Two sessions: a normal approximation over them may call them enough while the intervals that resample
    them overlap; the sentence says to trust the intervals and add sessions, never "about 1 sessions"."""
    # Per session keep 9/10 and 8/10, mask 5/10 and 5/10: the two differences agree closely.
    marks = {"keep": [True] * 17 + [False] * 3, "mask": [(i // 2) % 2 == 0 for i in range(20)]}
    h = _headline(
        [
            ("keep", 17, 20, 0.0, 1.0, 2, 10, 0.0, 0.45, True, False),
            ("mask", 10, 20, 0.0, 1.0, 10, 10, 0.70, 1.0, True, False),
        ]
    )
    got = decision.decide(_folder(tmp_path, h, {"keep": 1.0, "mask": 1.2}, _answers(marks, sessions=2)))
    unit = power.pair_power(_answers(marks, sessions=2), "keep", "mask", question=("session_id",))
    assert unit.questions_needed is not None and unit.questions_needed <= 2
    (line,) = [c for c in got.changes if "on closed book" in c]
    assert "a normal approximation says this run's 2 sessions would do" in line and "trust the intervals" in line
    assert not any("About 1 sessions" in c for c in got.changes)


def test_without_recall_there_is_nothing_to_decide(tmp_path):
    d = runfolder.resolve(tmp_path / "run")
    got = decision.decide(d, pd.DataFrame(columns=share.HEADLINE_COLUMNS))
    assert got.verdict == share.NO_HEADLINE and got.weighed_strategies.empty and got.pareto == []
    assert share.NO_HEADLINE in got.html()


@pytest.mark.slow
def test_the_report_opens_with_the_decision_and_numbers_figures_down_the_page(smoke_run):
    import re

    page = (smoke_run.run_dir / "report.html").read_text(encoding="utf-8")
    assert page.index('<h2 id="decision">') < page.index('<h2 id="headline">') < page.index('<h2 id="figures">')
    section = page.split('<h2 id="decision">', 1)[1].split("<h2", 1)[0]
    assert "Pareto set" in section or "No arm is separable" in section or "Only one arm" in section
    assert 'id="fig_decision"' in section  # notebook 07 drew it
    numbers = [int(n) for n in re.findall(r"<figcaption>Figure (\d+) — ", page)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 10
    # Every headline column is defined where it first appears.
    headline = page.split('<h2 id="headline">', 1)[1].split("<h2", 1)[0]
    assert headline.count("<th title=") >= 8 and 'class="terms"' in headline
