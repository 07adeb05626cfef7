"""The primitives of the exam's intervals: `Interval`, the exact binomial bound and the cluster-robust t.

Shared by `compaction_lab.exam.statistics.stats` (one answer per question) and `compaction_lab.exam.statistics.power`
(several draws per question), which build their intervals from them; stats also re-exports them.
`records_floor` keeps an interval from few records (fewer than `MIN_RECORDS`) at least as wide as the
Clopper–Pearson bound over those records: questions mined from one record are one observation, however
many there are.

See docs/exams.md#9-statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

#: The exact binomial interval's name, as ``method`` strings print it.
CLOPPER_PEARSON = "Clopper–Pearson"


def scipy_special() -> Any:
    """Return `scipy.special`, imported on first use (the runner imports this module through the report).

    The quantiles the intervals need are its functions, which `scipy.stats`' distributions call
    (`scipy.stats.beta.ppf` is `betaincinv`, `t.ppf` is `stdtrit`, `norm.ppf` is `ndtri`: equal to the
    last bit, tested): importing it costs a kernel a fraction of what `scipy.stats` costs.
    """
    from scipy import special

    return special


def binomial_half_p(k: int, n: int) -> float:
    """Exact two-sided p-value of k successes in n trials at probability 1/2 (1.0 when n is 0).

    The sum of the probabilities of the outcomes no more likely than k, in exact rational arithmetic and
    then rounded once: `scipy.stats.binomtest(k, n, 0.5).pvalue` to within its floating-point rounding
    (tested), without importing `scipy.stats`.
    """
    if n <= 0:
        return 1.0
    low = min(k, n - k)
    if 2 * low == n:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(low + 1))
    return min(1.0, float(Fraction(2 * tail, 2**n)))


@dataclass(frozen=True)
class Interval:
    """An interval for a proportion and how it was made.

    Parameters
    ----------
    low, high : float
        Within [0, 1]; NaN when there were no observations.
    method : str
        Short, human-readable: what the report prints beside the interval.
    """

    low: float
    high: float
    method: str


def clopper_pearson(k: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial (Clopper–Pearson) interval for k successes in n: beta quantiles; (NaN, NaN) when n is 0.

    Equals `scipy.stats.binomtest(k, n).proportion_ci(confidence, method="exact")`
    (computed from the beta quantiles directly, `betaincinv`: the coverage simulation calls it thousands of times).
    The quantiles take fractional counts too: `exam.statistics.power` counts draws as their effective answers.
    """
    if n <= 0:
        return float("nan"), float("nan")
    alpha = 1.0 - confidence
    low = 0.0 if k <= 0 else float(scipy_special().betaincinv(k, n - k + 1, alpha / 2))
    high = 1.0 if k >= n else float(scipy_special().betaincinv(k + 1, n - k, 1 - alpha / 2))
    return low, high


#: Below this many records, an interval is at least as wide as Clopper–Pearson over the records (`records_floor`).
MIN_RECORDS = 10


def records_floor(
    interval: Interval, recall: float, n_records: int | None, confidence: float = 0.95, min_records: int = MIN_RECORDS
) -> Interval:
    """Return `interval` widened to at least the Clopper–Pearson interval over records, below `min_records` records.

    Questions mined from one record are not independent: 33 of 33 from 3 records is three observations,
    not 33. With ``n_records`` below `min_records`, the interval returned is the hull of `interval` and
    `clopper_pearson` with ``k = recall × n_records`` successes in ``n_records`` trials (the beta quantiles
    take a fractional k), its method naming both; otherwise `interval` unchanged.

    Parameters
    ----------
    interval : Interval
        The interval made over sessions, records or questions.
    recall : float
        The share retained (NaN: no questions, `interval` unchanged).
    n_records : int or None
        Distinct records the questions were mined from (None: unknown, `interval` unchanged).
    confidence : float
    min_records : int
        From this many records on, nothing is widened.

    Examples
    --------
    >>> iv = records_floor(Interval(0.894, 1.0, "cluster t"), 1.0, 3)
    >>> round(iv.low, 3), iv.high, iv.method
    (0.292, 1.0, 'cluster t ∪ Clopper–Pearson over 3 records')
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_records is None or n_records <= 0 or n_records >= min_records or math.isnan(recall):
        return interval
    if not 0.0 <= recall <= 1.0:
        raise ValueError(f"recall must lie in [0, 1], got {recall}")
    low, high = clopper_pearson(recall * n_records, n_records, confidence)
    if math.isnan(interval.low) or math.isnan(interval.high):
        return Interval(low, high, f"{CLOPPER_PEARSON} over {n_records} records")
    return Interval(
        min(interval.low, low),
        max(interval.high, high),
        f"{interval.method} ∪ {CLOPPER_PEARSON} over {n_records} record{'s' if n_records != 1 else ''}",
    )


def cluster_t(y: np.ndarray, n: np.ndarray, confidence: float) -> tuple[float, float]:
    """Cluster-robust t interval of Σy/Σn: linearised (CR1) variance, t with G − 1 degrees of freedom, clipped."""
    g = y.size
    p = y.sum() / n.sum()
    se = np.sqrt(g / (g - 1) * np.sum((y - p * n) ** 2)) / n.sum()
    half = float(scipy_special().stdtrit(g - 1, 1 - (1.0 - confidence) / 2)) * float(se)
    return max(0.0, float(p) - half), min(1.0, float(p) + half)


__all__ = [
    "CLOPPER_PEARSON",
    "MIN_RECORDS",
    "Interval",
    "binomial_half_p",
    "clopper_pearson",
    "cluster_t",
    "records_floor",
    "scipy_special",
]
