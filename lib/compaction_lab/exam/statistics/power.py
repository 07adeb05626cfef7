"""Several draws per question: recall intervals that know it, and whether a difference is resolvable.

A model reader above temperature zero may answer a question differently each time; asking each question
``draws`` times separates what an arm kept (question to question) from the reader's noise (draw to
draw). The rows stay one per draw, treated as nested: clusters (sessions, or cases) → questions → draws.

Key names: `hierarchical_interval` (union of a hierarchical bootstrap, a cluster-robust t and
Clopper–Pearson over the effective number of answers), `components`, `minimum_detectable_difference`,
`pair_power` / `PairPower`, `power_table`, `draw_recall_table`, `question_consistency`.

Design: docs/exams.md#several-draws-per-question-powerpy (formulas, estimators, simulated coverage).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from compaction_lab.exam.statistics.intervals import (
    CLOPPER_PEARSON,
    Interval,
    clopper_pearson,
    cluster_t,
    scipy_special,
)

#: Power the minimum detectable difference is computed for (80%: the usual planning value).
POWER = 0.8
#: Two-sided level of the test behind it.
ALPHA = 0.05


# --------------------------------------------------------------------------- the interval


def _per_question(
    correct: np.ndarray, question: np.ndarray, cluster: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per question: correct draws, draws, and the code of its cluster (its own code without clusters)."""
    q_codes, q_uniques = pd.factorize(pd.Series(question, dtype=object), sort=False)
    n_q = len(q_uniques)
    hits = np.bincount(q_codes, weights=correct.astype(float), minlength=n_q)
    draws = np.bincount(q_codes, minlength=n_q).astype(float)
    if cluster is None:
        return hits, draws, np.arange(n_q)
    c_codes, _ = pd.factorize(pd.Series(cluster, dtype=object), sort=False)
    first = np.full(n_q, -1)
    first[q_codes[::-1]] = c_codes[::-1]  # the cluster of each question's first row
    mixed = np.zeros(n_q, dtype=bool)
    np.logical_or.at(mixed, q_codes, c_codes != first[q_codes])
    if mixed.any():
        raise ValueError("a question's draws name more than one cluster: questions must nest in clusters")
    return hits, draws, first


def _hierarchical_bootstrap(
    hits: np.ndarray, draws: np.ndarray, cluster_of: np.ndarray, n_boot: int, seed: int, confidence: float
) -> tuple[float, float]:
    """Percentile interval of Σhits/Σdraws resampling clusters, then their questions, then each question's draws."""
    rng = np.random.default_rng(seed)
    order = np.argsort(cluster_of, kind="stable")  # questions grouped by cluster
    size = np.bincount(cluster_of)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    g = size.size
    picks = rng.integers(0, g, size=(n_boot, g))
    # Every resample's questions at once: for each picked cluster, as many picks among its own questions.
    n_of = size[picks].ravel()
    replicate = np.repeat(np.arange(n_boot), size[picks].sum(axis=1))
    first = np.repeat(start[picks].ravel(), n_of)
    width = np.repeat(n_of, n_of)
    questions = order[first + (rng.random(width.size) * width).astype(np.int64)]
    d = draws[questions]
    right = rng.binomial(d.astype(np.int64), hits[questions] / d)
    means = np.bincount(replicate, weights=right, minlength=n_boot) / np.bincount(
        replicate, weights=d, minlength=n_boot
    )
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def hierarchical_interval(
    correct: Sequence[bool] | np.ndarray,
    question: Sequence[Hashable] | np.ndarray | pd.Series,
    cluster: Sequence[Hashable] | np.ndarray | pd.Series | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 7,
    confidence: float = 0.95,
    cluster_name: str = "sessions",
) -> Interval:
    """Interval for an arm's recall from rows of one draw each, questions nested in clusters (module docstring).

    Parameters
    ----------
    correct : sequence of bool
        One outcome per draw.
    question : sequence of hashable
        The question each draw answered (aligned with `correct`).
    cluster : sequence of hashable, optional
        The independent unit each draw's question belongs to (its session or
        case). None: the questions are independent.
    n_boot : int
    seed : int
        Seeds a fresh `numpy.random.Generator`: the same rows and seed give the same interval.
    confidence : float
    cluster_name : str
        What the clusters are, for ``method``.

    Returns
    -------
    Interval
        NaN bounds without rows; otherwise within [0, 1] and never of zero width.

    Raises
    ------
    ValueError
        When the sequences differ in length, or a question's draws name two clusters.
    """
    x = np.asarray(correct, dtype=bool)
    q = np.asarray(question, dtype=object)
    c = None if cluster is None else np.asarray(cluster, dtype=object)
    if q.shape != x.shape or (c is not None and c.shape != x.shape):
        raise ValueError(f"{x.size} outcomes, {q.size} question labels, {'no' if c is None else c.size} cluster labels")
    if x.size == 0:
        return Interval(float("nan"), float("nan"), "no questions")
    hits, draws, cluster_of = _per_question(x, q, c)
    n_q = hits.size
    n_eff = _effective_questions(hits, draws)
    floor = clopper_pearson(float(hits.sum() / draws.sum()) * n_eff, n_eff, confidence)
    g = int(cluster_of.max()) + 1
    unit = cluster_name if c is not None and g > 1 else "questions"
    if c is not None and g < 2:
        cluster_of = np.arange(n_q)  # one cluster: nothing varies between clusters; its questions are the units
        g = n_q
    depth = f"{unit} → questions → draws" if unit != "questions" else "questions → draws"
    if g < 2:
        return Interval(*floor, f"{CLOPPER_PEARSON} over 1 question (its share of {int(draws[0])} draws)")
    boot = _hierarchical_bootstrap(hits, draws, cluster_of, n_boot, seed, confidence)
    tint = cluster_t(np.bincount(cluster_of, weights=hits), np.bincount(cluster_of, weights=draws), confidence)
    low, high = min(boot[0], tint[0], floor[0]), max(boot[1], tint[1], floor[1])
    return Interval(
        low,
        high,
        f"hierarchical bootstrap ({depth}) ∪ t over {g} {unit} ∪ {CLOPPER_PEARSON} over {n_eff:.3g} effective answers",
    )


def _effective_questions(hits: np.ndarray, draws: np.ndarray) -> float:
    """Independent answers the draws are worth: draws / (1 + (d̄ − 1)·ρ), ρ the share of variance between questions.

    The design effect of draws nested in questions. ρ is estimated (`components`); where it cannot be
    (one draw, or every answer alike) it is taken as 1, so the draws count as their questions alone.
    """
    c = _components(hits / draws, draws, _within_of(hits, draws))
    spread = c.between + c.within
    rho = c.between / spread if spread > 0 and not math.isnan(spread) else 1.0
    return float(draws.sum()) / (1.0 + (float(np.mean(draws)) - 1.0) * rho)


# --------------------------------------------------------------------------- power


@dataclass(frozen=True)
class Components:
    """Variance components of one arm's (or one difference's) per-question results.

    Attributes
    ----------
    n_questions : int
    draws : float
        Mean draws per question.
    mean : float
        Mean over questions of each question's share of correct draws (the pooled recall when draws are equal).
    between : float
        Variance across questions of the true per-question accuracy (or
        difference); NaN when it cannot be told apart from `within` (one draw).
    within : float
        The reader's draw-to-draw variance, mean of p(1 − p) over questions;
        NaN with one draw per question.
    total : float
        Variance across questions of the observed per-question shares
        (= between + within / draws).
    """

    n_questions: int
    draws: float
    mean: float
    between: float
    within: float
    total: float


def components(correct: Sequence[bool] | np.ndarray, question: Sequence[Hashable] | np.ndarray) -> Components:
    """Estimate one arm's variance components from its rows (one per draw)."""
    x = np.asarray(correct, dtype=bool)
    hits, draws, _ = _per_question(x, np.asarray(question, dtype=object), None)
    return _components(hits / draws, draws, _within_of(hits, draws))


def _within_of(hits: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Unbiased draw-to-draw variance of each question, d/(d−1)·p̂(1−p̂); NaN where it was asked once."""
    share = hits / draws
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(draws > 1, draws / (draws - 1) * share * (1 - share), np.nan)


def _components(values: np.ndarray, draws: np.ndarray, within_q: np.ndarray) -> Components:
    n = values.size
    total = float(np.var(values, ddof=1)) if n > 1 else float("nan")
    asked_twice = ~np.isnan(within_q)
    within = float(np.mean(within_q[asked_twice])) if asked_twice.any() else float("nan")
    mean_inverse = float(np.mean(1.0 / draws))
    between = max(0.0, total - within * mean_inverse) if not math.isnan(within) and n > 1 else float("nan")
    return Components(n, float(np.mean(draws)), float(np.mean(values)), between, within, total)


def _z(alpha: float, power: float) -> float:
    ndtri = scipy_special().ndtri  # the normal quantile (`scipy.stats.norm.ppf`)
    return float(ndtri(1 - alpha / 2) + ndtri(power))


def minimum_detectable_difference(
    between: float, within: float, n_questions: int, draws: float, *, alpha: float = ALPHA, power: float = POWER
) -> float:
    """Smallest true difference a two-sided paired test at `alpha` detects with probability `power`.

    Parameters
    ----------
    between : float
        Variance across questions of the difference of the arms' per-question accuracies.
    within : float
        The draw-to-draw variances of the two arms, added.
    n_questions, draws : number
        Questions both arms answered, and draws per question.
    """
    if n_questions <= 0 or draws <= 0:
        return float("nan")
    return _z(alpha, power) * math.sqrt((between + within / draws) / n_questions)


@dataclass(frozen=True)
class PairPower:
    """Whether two arms' difference in recall is resolvable at this sample size (`pair_power`).

    Attributes
    ----------
    a, b : str
    n_questions : int
        Questions both answered.
    draws : float
        Mean draws per question.
    difference : float
        Recall of `a` minus recall of `b` over those questions.
    mdd : float
        Minimum detectable difference at `POWER` (two-sided `ALPHA`).
    between, within : float
        The difference's variance across questions, and the two arms' draw-to-draw variances added
        (NaN with one draw: they cannot be told apart).
    resolvable : bool
        ``|difference| >= mdd``.
    questions_needed : int or None
        Questions (at these draws) for the observed difference to reach the
        minimum detectable difference; None when there is no difference.
    draws_needed : int or None
        Draws (at these questions) for the same; None when more draws cannot
        get there (the questions' own spread is too large) or cannot be told
        (one draw: `note`).
    note : str
    """

    a: str
    b: str
    n_questions: int
    draws: float
    difference: float
    mdd: float
    between: float
    within: float
    resolvable: bool
    questions_needed: int | None
    draws_needed: int | None
    note: str


def pair_power(
    rows: pd.DataFrame,
    a: str,
    b: str,
    *,
    strategy_column: str = "strategy",
    question: Sequence[str] = ("case_id", "question_id"),
    alpha: float = ALPHA,
    power: float = POWER,
) -> PairPower:
    """Minimum detectable difference of arms `a` and `b` on the questions both answered, and what would resolve theirs.

    Parameters
    ----------
    rows : DataFrame
        One row per draw: `strategy_column`, the `question` columns, ``correct``.
    a, b : str
        Values of `strategy_column`.
    question : sequence of str
        The columns that identify a question.
    """
    keys = list(question)
    per = rows.groupby([strategy_column, *keys], sort=False)["correct"].agg(["sum", "count"])
    try:
        qa, qb = per.loc[a], per.loc[b]
    except KeyError as exc:
        raise ValueError(f"{strategy_column} {exc.args[0]!r} has no rows") from None
    both = qa.add_suffix("_a").join(qb.add_suffix("_b"), how="inner")
    n = len(both)
    if n < 2:
        nan = float("nan")
        return PairPower(a, b, n, nan, nan, nan, nan, nan, False, None, None, "fewer than 2 shared questions")
    sa, sb = both["sum_a"].to_numpy(float), both["sum_b"].to_numpy(float)
    da, db = both["count_a"].to_numpy(float), both["count_b"].to_numpy(float)
    delta = sa / da - sb / db
    within_q = _within_of(sa, da) / da + _within_of(sb, db) / db  # what the draws add to each question's difference
    total = float(np.var(delta, ddof=1))
    draws = float(np.mean(np.concatenate([da, db])))
    difference = float(np.mean(delta))
    z = _z(alpha, power)
    mdd = z * math.sqrt(total / n)
    notes = ["questions assumed independent (clustered questions make it optimistic)"]
    if np.isnan(within_q).all():
        between, within = float("nan"), float("nan")
        notes.append("one draw per question: the reader's noise cannot be told from the questions' spread")
    else:
        # within / draws was added per question; back out the per-draw within variance of the two arms together.
        within = float(np.nanmean(within_q)) * draws
        between = max(0.0, total - within / draws)
    questions_needed = math.ceil(z**2 * total / difference**2) if difference != 0 else None
    draws_needed: int | None = None
    if difference != 0 and not math.isnan(within):
        room = difference**2 * n / z**2 - between  # what within / draws may be at most
        draws_needed = math.ceil(within / room) if room > 0 and within > 0 else (1 if room > 0 else None)
        if draws_needed is None:
            notes.append("no number of draws resolves it at these questions: they differ too much among themselves")
    return PairPower(
        a,
        b,
        n,
        draws,
        difference,
        mdd,
        between,
        within,
        abs(difference) >= mdd,
        questions_needed,
        draws_needed,
        "; ".join(notes),
    )


def power_table(
    rows: pd.DataFrame,
    *,
    strategy_column: str = "strategy",
    question: Sequence[str] = ("case_id", "question_id"),
    alpha: float = ALPHA,
    power: float = POWER,
) -> pd.DataFrame:
    """`pair_power` for every pair of arms, in the order the arms first appear: one row per pair."""
    compared = list(dict.fromkeys(rows[strategy_column]))
    out = [
        pair_power(rows, x, y, strategy_column=strategy_column, question=question, alpha=alpha, power=power)
        for i, x in enumerate(compared)
        for y in compared[i + 1 :]
    ]
    return pd.DataFrame([p.__dict__ for p in out])


def _joined(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Each row's values in `columns` as one label (joined by U+001F), column by column rather than row by row."""
    label = frame[columns[0]].astype(str)
    for col in columns[1:]:
        label = label + "\x1f" + frame[col].astype(str)
    return label.to_numpy(object)


def question_consistency(
    rows: pd.DataFrame,
    *,
    by: Sequence[str] = ("strategy",),
    question: Sequence[str] = ("case_id", "question_id"),
) -> pd.DataFrame:
    """Per arm (the `by` columns) and draws asked: how many questions were right in 0, 1, ... of their draws.

    What shows which questions are noisy: a question right in some of its draws and not in others is one
    the reader's sampling decides, not the arm's retention.

    Returns
    -------
    DataFrame
        One row per arm x draws x right (``right`` from 0 to ``draws``, every count listed, zeros too): the
        `by` columns, ``draws``, ``right``, ``questions`` (how many), ``share`` (of the arm's questions asked
        that many times) and ``noisy`` (0 < right < draws).
    """
    keys = list(question)
    per = rows.assign(_q=_joined(rows, keys), correct=rows["correct"].astype(bool))
    per = per.groupby([*by, "_q"], sort=False)["correct"].agg(right="sum", draws="count").reset_index()
    out = []
    for key, g in per.groupby([*by, "draws"], sort=False):
        *names, draws = key
        counts = g["right"].value_counts()
        for right in range(int(draws) + 1):
            n = int(counts.get(right, 0))
            out.append(
                {
                    **dict(zip(by, names, strict=True)),
                    "draws": int(draws),
                    "right": right,
                    "questions": n,
                    "share": n / len(g),
                    "noisy": 0 < right < draws,
                }
            )
    return pd.DataFrame(out, columns=[*by, "draws", "right", "questions", "share", "noisy"])


def draw_recall_table(
    rows: pd.DataFrame,
    *,
    by: Sequence[str] = ("strategy",),
    question: Sequence[str] = ("case_id", "question_id"),
    cluster: str | None = None,
    n_boot: int = 2000,
    seed: int = 7,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per arm (the `by` columns): recall over rows of one draw each, its `hierarchical_interval`, and consistency.

    Parameters
    ----------
    rows : DataFrame
        One row per draw: the `by` and `question` columns, ``correct``, and `cluster` when given.
    cluster : str, optional
        The column naming each question's independent unit (``session_id`` for questions mined from
        real sessions); None: questions independent (synthetic chains).
    n_boot, seed, confidence
        See `hierarchical_interval` (every arm from the same seed: a row does not depend on the others).

    Returns
    -------
    DataFrame
        One row per arm, in order of first appearance: the `by` columns, ``n_questions``, ``draws``
        (mean per question), ``correct`` (draws right), ``recall`` (pooled), ``ci_low``, ``ci_high``,
        ``ci_method``, and ``consistent`` -- the share of questions whose draws all agree (all right or
        all wrong): 1.0 for a reader that never changes its answer; questions asked once count as agreeing.
    """
    keys = list(question)
    out = []
    for key, g in rows.groupby(list(by), sort=False):
        qid = _joined(g, keys)
        iv = hierarchical_interval(
            g["correct"].to_numpy(bool),
            qid,
            None if cluster is None else g[cluster].to_numpy(object),
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
            cluster_name="sessions",
        )
        per = g.assign(_q=qid).groupby("_q", sort=False)["correct"].agg(["sum", "count"])
        agree = (per["sum"] == 0) | (per["sum"] == per["count"])
        out.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                "n_questions": len(per),
                "draws": float(per["count"].mean()),
                "correct": int(per["sum"].sum()),
                "recall": float(per["sum"].sum() / per["count"].sum()),
                "ci_low": iv.low,
                "ci_high": iv.high,
                "ci_method": iv.method,
                "consistent": float(agree.mean()),
            }
        )
    return pd.DataFrame(out)
