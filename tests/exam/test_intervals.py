"""The interval primitives computed without `scipy.stats` equal what `scipy.stats` gives."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hst
from scipy import stats as st

from compaction_lab.exam.statistics import intervals


@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.99])
def test_clopper_pearson_is_scipys_beta_quantiles_to_the_last_bit(confidence):
    alpha = 1 - confidence
    for n in range(1, 120):
        for k in range(n + 1):
            low = 0.0 if k == 0 else st.beta.ppf(alpha / 2, k, n - k + 1)
            high = 1.0 if k == n else st.beta.ppf(1 - alpha / 2, k + 1, n - k)
            assert intervals.clopper_pearson(k, n, confidence) == (low, high), (k, n)
    for k, n in [(0, 1), (1, 1), (0, 9), (4, 9), (9, 9), (13, 40), (39, 40)]:
        ci = st.binomtest(k, n).proportion_ci(confidence, method="exact")  # scipy's own root-finding
        assert intervals.clopper_pearson(k, n, confidence) == pytest.approx((ci.low, ci.high), rel=1e-9, abs=1e-12)


def test_fractional_counts_take_the_same_beta_quantiles():
    for k, n in [(2.5, 7.0), (0.3, 1.0), (11.75, 12.0)]:
        low, high = intervals.clopper_pearson(k, n)
        assert low == pytest.approx(st.beta.ppf(0.025, k, n - k + 1), rel=1e-13)
        assert high == pytest.approx(st.beta.ppf(0.975, k + 1, n - k), rel=1e-13)


def test_cluster_t_uses_students_quantile_to_the_last_bit():
    y, n = np.array([3.0, 5.0, 2.0, 7.0]), np.array([5.0, 6.0, 4.0, 9.0])
    low, high = intervals.cluster_t(y, n, 0.95)
    p = y.sum() / n.sum()
    se = np.sqrt(4 / 3 * np.sum((y - p * n) ** 2)) / n.sum()
    assert (low, high) == (max(0.0, p - st.t.ppf(0.975, 3) * se), min(1.0, p + st.t.ppf(0.975, 3) * se))


@given(hst.integers(0, 400).flatmap(lambda n: hst.tuples(hst.integers(0, n), hst.just(n))))
def test_the_exact_binomial_p_value_is_scipys_binomtest(kn):
    k, n = kn
    expected = 1.0 if n == 0 else st.binomtest(k, n, 0.5).pvalue
    assert intervals.binomial_half_p(k, n) == pytest.approx(expected, rel=1e-12, abs=0)


def test_the_exact_binomial_p_value_at_known_points():
    assert intervals.binomial_half_p(0, 0) == 1.0
    assert intervals.binomial_half_p(5, 10) == 1.0  # the most likely outcome
    assert intervals.binomial_half_p(0, 10) == 2 / 1024  # both tails of 1/1024
    assert intervals.binomial_half_p(10, 10) == 2 / 1024
    assert intervals.binomial_half_p(1, 3) == 1.0  # 1 and 2 of 3 are equally likely: every outcome counts
    assert intervals.binomial_half_p(0, 3) == 0.25


def test_importing_the_intervals_and_using_them_leaves_scipy_stats_unloaded():
    code = (
        "import sys\n"
        "from compaction_lab.exam.statistics import intervals, power, stats\n"
        "intervals.clopper_pearson(3, 9); intervals.binomial_half_p(2, 9); power._z(0.05, 0.8)\n"
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
