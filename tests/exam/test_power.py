"""Several draws per question: the hierarchical interval's coverage and the minimum detectable difference (issue 31)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from compaction_lab.exam.statistics import power
from compaction_lab.exam.statistics.stats import clopper_pearson


def _draws(p: np.ndarray, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes of `d` draws of each question of accuracy `p`, and the question of each row."""
    x = rng.random((p.size, d)) < p[:, None]
    return x.ravel(), np.repeat(np.arange(p.size), d)


@pytest.mark.parametrize(("n", "d", "a", "b"), [(20, 3, 3.5, 1.5), (12, 5, 8.0, 2.0), (30, 1, 2.0, 2.0)])
def test_interval_covers_a_reader_of_known_accuracy(n, d, a, b):
    """Questions of accuracy ~ Beta(a, b), asked d times: the interval covers the true recall >= 90% at 95%."""
    rng = np.random.default_rng(31)
    truth = a / (a + b)
    sims = 200
    covered = 0
    for s in range(sims):
        x, q = _draws(rng.beta(a, b, n), d, rng)
        iv = power.hierarchical_interval(x, q, n_boot=400, seed=s)
        covered += iv.low <= truth <= iv.high
    assert covered / sims >= 0.90


@pytest.mark.parametrize("n_clusters", [3, 8])
def test_interval_covers_with_questions_nested_in_sessions(n_clusters):
    """Sessions whose questions share their difficulty (intra-session correlation): still >= 90% at 95%."""
    rng = np.random.default_rng(7)
    mean, d, sims = 0.7, 3, 200
    covered = 0
    for s in range(sims):
        mu = rng.beta(mean * 6, (1 - mean) * 6, n_clusters)
        xs, qs, cs = [], [], []
        for g in range(n_clusters):
            m = int(rng.integers(4, 16))
            x, q = _draws(rng.beta(mu[g] * 8, (1 - mu[g]) * 8, m), d, rng)
            xs.append(x)
            qs.append(q + 1000 * g)
            cs.append(np.full(x.size, g))
        iv = power.hierarchical_interval(np.concatenate(xs), np.concatenate(qs), np.concatenate(cs), n_boot=400, seed=s)
        covered += iv.low <= mean <= iv.high
    assert covered / sims >= 0.90


def test_clusters_widen_the_interval_where_sessions_differ():
    rng = np.random.default_rng(3)
    mu = np.repeat([0.2, 0.9, 0.5, 0.95], 10)
    x, q = _draws(mu, 3, rng)
    flat = power.hierarchical_interval(x, q, seed=1)
    nested = power.hierarchical_interval(x, q, q // 10, seed=1)
    assert nested.high - nested.low > flat.high - flat.low
    assert "sessions → questions → draws" in nested.method
    assert "questions → draws" in flat.method


def test_every_draw_right_is_not_a_certainty():
    """20 questions right in all 3 draws: the questions alone bound it, not 60 independent answers."""
    iv = power.hierarchical_interval([True] * 60, np.repeat(np.arange(20), 3))
    assert iv.high == 1.0
    assert iv.low == pytest.approx(sps.beta.ppf(0.025, 20, 1))  # Clopper-Pearson of 20/20
    assert iv.low < 0.9


def test_reader_noise_makes_draws_worth_more_than_one_answer_each():
    """Questions alike, answers varying by draw only: the draws count (nearly) as independent answers."""
    rng = np.random.default_rng(5)
    x, q = _draws(np.full(20, 0.6), 5, rng)
    iv = power.hierarchical_interval(x, q)
    k = int(np.sum(x))
    per_question = clopper_pearson(k / 5, 20, 0.95)
    assert iv.high - iv.low < per_question[1] - per_question[0]


def test_interval_is_seeded_and_checks_its_input():
    rng = np.random.default_rng(0)
    x, q = _draws(rng.random(15), 3, rng)
    assert power.hierarchical_interval(x, q, seed=4) == power.hierarchical_interval(x, q, seed=4)
    empty = power.hierarchical_interval([], [])
    assert math.isnan(empty.low) and math.isnan(empty.high)
    with pytest.raises(ValueError, match="question labels"):
        power.hierarchical_interval(x, q[:-1])
    with pytest.raises(ValueError, match="more than one cluster"):
        power.hierarchical_interval([True, False], [1, 1], ["s1", "s2"])


def _pair_rows(pa: np.ndarray, pb: np.ndarray, d: int, rng: np.random.Generator) -> pd.DataFrame:
    frames = []
    for arm, p in (("a", pa), ("b", pb)):
        x, q = _draws(p, d, rng)
        frames.append(pd.DataFrame({"strategy": arm, "case_id": "c", "question_id": q, "correct": x}))
    return pd.concat(frames, ignore_index=True)


def _closed_form(pa: np.ndarray, pb: np.ndarray, d: int) -> float:
    """(z_{1-a/2} + z_{power}) * sqrt((Var(pa - pb) + (E pa(1-pa) + E pb(1-pb)) / d) / n), from the true accuracies."""
    z = sps.norm.ppf(1 - power.ALPHA / 2) + sps.norm.ppf(power.POWER)
    within = np.mean(pa * (1 - pa)) + np.mean(pb * (1 - pb))
    return float(z * math.sqrt((np.var(pa - pb) + within / d) / pa.size))


def test_minimum_detectable_difference_matches_the_closed_form():
    """Estimated from simulated draws, the minimum detectable difference is within 10% of the closed form."""
    rng = np.random.default_rng(11)
    n, d = 300, 4
    pa = rng.beta(4, 2, n)
    pb = np.clip(pa - rng.normal(0.05, 0.1, n), 0, 1)
    expected = _closed_form(pa, pb, d)
    estimates = [power.pair_power(_pair_rows(pa, pb, d, rng), "a", "b").mdd for _ in range(20)]
    assert np.mean(estimates) == pytest.approx(expected, rel=0.10)
    # The same formula from the components directly.
    within = np.mean(pa * (1 - pa)) + np.mean(pb * (1 - pb))
    assert power.minimum_detectable_difference(np.var(pa - pb), within, n, d) == pytest.approx(expected)


def test_a_difference_the_size_of_the_mdd_is_detected_about_80_percent_of_the_time():
    """What the power line means: a paired test finds a true difference of one MDD in ~80% of samples."""
    rng = np.random.default_rng(2)
    n, d, sims = 80, 3, 400
    base = rng.beta(3, 2, 100_000)
    pa_pop, pb0 = base, np.clip(base - rng.normal(0, 0.08, base.size), 0.01, 0.99)
    mdd = _closed_form(pa_pop, pb0, d) / math.sqrt(n / pa_pop.size)  # the same variances at n questions
    hits = 0
    for _ in range(sims):
        idx = rng.integers(0, base.size, n)
        pa, pb = pa_pop[idx], np.clip(pb0[idx] - mdd, 0, 1)
        xa, _ = _draws(pa, d, rng)
        xb, _ = _draws(pb, d, rng)
        delta = xa.reshape(n, d).mean(axis=1) - xb.reshape(n, d).mean(axis=1)
        hits += sps.ttest_1samp(delta, 0).pvalue < power.ALPHA
    assert 0.70 <= hits / sims <= 0.90


def test_what_would_resolve_a_difference():
    """Arms that differ only by the reader's noise: the draws and the questions it asks for reach the difference."""
    rng = np.random.default_rng(8)
    n, d = 40, 2
    pp = power.pair_power(_pair_rows(np.full(n, 0.7), np.full(n, 0.62), d, rng), "a", "b")
    assert pp.n_questions == n and pp.draws == d
    assert pp.resolvable == (abs(pp.difference) >= pp.mdd)
    z = sps.norm.ppf(1 - power.ALPHA / 2) + sps.norm.ppf(power.POWER)
    total = (pp.mdd / z) ** 2 * n  # the per-question variance the MDD was computed from
    assert pp.questions_needed is not None
    assert z * math.sqrt(total / pp.questions_needed) <= abs(pp.difference) + 1e-12
    assert z * math.sqrt(total / (pp.questions_needed - 1)) > abs(pp.difference)
    assert pp.draws_needed is not None
    mdd_at = power.minimum_detectable_difference(pp.between, pp.within, n, pp.draws_needed)
    assert mdd_at <= abs(pp.difference) + 1e-12
    if pp.draws_needed > 1:
        assert power.minimum_detectable_difference(pp.between, pp.within, n, pp.draws_needed - 1) > abs(pp.difference)


def test_draws_cannot_resolve_what_the_questions_spread():
    """Arms that differ question by question far more than on average: no number of draws is enough."""
    rng = np.random.default_rng(9)
    n = 30
    pa = np.where(np.arange(n) % 2 == 0, 0.95, 0.15)
    pb = np.where(np.arange(n) % 2 == 0, 0.15, 0.9)  # mean difference ~0.025, per-question differences +-0.8
    pp = power.pair_power(_pair_rows(pa, pb, 3, rng), "a", "b")
    assert not pp.resolvable
    assert pp.draws_needed is None
    assert "no number of draws" in pp.note
    assert pp.questions_needed is not None and pp.questions_needed > n


def test_one_draw_says_the_noise_cannot_be_separated():
    rng = np.random.default_rng(4)
    pp = power.pair_power(_pair_rows(rng.random(25), rng.random(25), 1, rng), "a", "b")
    assert pp.draws_needed is None
    assert "one draw per question" in pp.note
    assert pp.mdd > 0


def test_power_table_has_one_row_per_pair():
    rng = np.random.default_rng(1)
    rows = pd.concat(
        [_pair_rows(rng.random(10), rng.random(10), 2, rng), _pair_rows(rng.random(10), rng.random(10), 2, rng)]
    )
    rows.loc[rows.index.duplicated(keep="first") & (rows["strategy"] == "a"), "strategy"] = "c"
    table = power.power_table(rows.reset_index(drop=True))
    arms = list(dict.fromkeys(rows["strategy"]))
    assert len(table) == len(arms) * (len(arms) - 1) // 2
    assert {"a", "b", "mdd", "resolvable", "questions_needed", "draws_needed", "note"} <= set(table.columns)


def test_components_split_the_reader_noise_from_the_questions():
    rng = np.random.default_rng(12)
    p = rng.beta(2, 2, 2000)
    x, q = _draws(p, 4, rng)
    c = power.components(x, q)
    assert c.between == pytest.approx(np.var(p), rel=0.15)
    assert c.within == pytest.approx(np.mean(p * (1 - p)), rel=0.05)
    assert c.total == pytest.approx(c.between + c.within / 4, rel=0.05)
    one = power.components(x[::4], q[::4])
    assert math.isnan(one.within) and math.isnan(one.between)


def test_draw_recall_table_per_arm_with_consistency():
    rng = np.random.default_rng(21)
    steady_p = np.where(np.arange(20) < 12, 1.0, 0.0)  # a reader that never changes its answer
    noisy_p = np.full(20, 0.5)
    frames = []
    for arm, p in (("steady", steady_p), ("noisy", noisy_p)):
        x, q = _draws(p, 4, rng)
        frames.append(
            pd.DataFrame({"strategy": arm, "case_id": "c", "question_id": q, "session_id": q // 5, "correct": x})
        )
    rows = pd.concat(frames, ignore_index=True)
    table = power.draw_recall_table(rows)
    assert list(table["strategy"]) == ["steady", "noisy"]
    steady, noisy = table.iloc[0], table.iloc[1]
    assert (steady["n_questions"], steady["draws"], steady["correct"]) == (20, 4.0, 48)
    assert steady["recall"] == pytest.approx(0.6) and steady["consistent"] == 1.0
    assert noisy["consistent"] < 0.5  # a coin: all four draws agree on 1/8 of the questions
    g = rows[rows["strategy"] == "noisy"]
    direct = power.hierarchical_interval(g["correct"], "c\x1f" + g["question_id"].astype(str))
    assert (noisy["ci_low"], noisy["ci_high"]) == (direct.low, direct.high)
    nested = power.draw_recall_table(rows, cluster="session_id")
    assert "sessions → questions → draws" in nested["ci_method"].iloc[0]
