"""Statistics over exam answers: recall with bootstrap intervals, paired McNemar tests, pointer-mix sensitivity.

Every exam cell is one draw (one compaction, one reader answer per
question), so differences between strategies need a measure of how much
they could move by chance:

``recall_table``
    Per strategy: real questions retained of N, a bootstrap interval over
    questions, decoys fallen for, mean projection tokens, and the same counts
    by pointer.
``mcnemar_table``
    Every pair of strategies on the real questions both answered (same
    case_id and question_id): discordant counts and the exact McNemar p-value.
``sensitivity_table``
    How recall and the ranking of strategies move as the question mix moves
    from all-tool to all-assistant, plus the default 80/10/10 mix.

All functions are pure and deterministic (the bootstrap draws from a numpy
Generator seeded by the caller). They take the ``answers`` frame of
`closed.ClosedResult` (or any frame with its columns: ``strategy``,
``case_id``, ``question_id``, ``pointer``, ``decoy``, ``correct``; optionally
``strategy_label``, ``reader``, ``reader_label``, ``projection_tokens``).
When a ``reader`` column is present, each reader is its own unit: strategies
are compared and ranked within a reader, never across readers.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats as st

from compaction_lab.exam.bank import DEFAULT_POINTER_MIX
from compaction_lab.exam.types import POINTERS

#: The default question mix (the bank's): the seed's follow-up study (80% assistant, 10% user, 10% tool).
DEFAULT_MIX: Mapping[str, float] = DEFAULT_POINTER_MIX

_REQUIRED = ("strategy", "case_id", "question_id", "pointer", "decoy", "correct")

#: Rounding applied before ranking, so mixes that tie mathematically tie in floating point too.
_RANK_DECIMALS = 12


# --------------------------------------------------------------------------- helpers


def _check(answers: pd.DataFrame) -> None:
    missing = [c for c in _REQUIRED if c not in answers.columns]
    if missing:
        raise ValueError(f"answers frame lacks columns: {', '.join(missing)}")


def _unit_keys(answers: pd.DataFrame) -> list[str]:
    """Columns that identify one scored unit: the strategy, within its reader when there is one."""
    return ["reader", "strategy"] if "reader" in answers.columns else ["strategy"]


def _joined(values: pd.Series) -> str:
    """Distinct labels in order of appearance, joined: a strategy can fall back in some cases only."""
    return " / ".join(str(v) for v in pd.unique(values.dropna()))


def _units(answers: pd.DataFrame) -> list[tuple[dict[str, Hashable], pd.DataFrame]]:
    """(identifying columns, rows) per unit, in order of first appearance; labels included."""
    keys = _unit_keys(answers)
    out = []
    for key, g in answers.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        ident: dict[str, Hashable] = dict(zip(keys, key, strict=False))
        ident["strategy_label"] = _joined(g["strategy_label"]) if "strategy_label" in g else str(ident["strategy"])
        if "reader" in ident:
            ident["reader_label"] = _joined(g["reader_label"]) if "reader_label" in g else str(ident["reader"])
        out.append((ident, g))
    return out


def _id_columns(answers: pd.DataFrame) -> list[str]:
    cols = ["strategy", "strategy_label"]
    return cols + (["reader", "reader_label"] if "reader" in answers.columns else [])


def _real(g: pd.DataFrame) -> pd.DataFrame:
    return g[~g["decoy"].astype(bool)]


def pointer_recall(answers: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """(retained, N) of the real questions per pointer, for one unit's rows (all `POINTERS`, zeros included)."""
    real = _real(answers)
    out = {}
    for p in POINTERS:
        c = real.loc[real["pointer"] == p, "correct"].astype(bool)
        out[p] = (int(c.sum()), int(len(c)))
    return out


# --------------------------------------------------------------------------- recall


def bootstrap_interval(
    correct: Sequence[bool] | np.ndarray,
    n_boot: int = 2000,
    seed: int = 7,
    confidence: float = 0.95,
    method: str = "percentile",
) -> tuple[float, float]:
    """Bootstrap interval of the mean of 0/1 outcomes, resampling questions.

    Parameters
    ----------
    correct : sequence of bool
    n_boot : int
        Resamples.
    seed : int
        Seeds a fresh `numpy.random.Generator`, so the same data and seed give the same interval.
    confidence : float
    method : str
        ``percentile`` (default) or ``BCa``, passed to `scipy.stats.bootstrap`.

    Returns
    -------
    (low, high) : tuple of float
        Within [0, 1]. Degenerate data (no observations: NaN; all correct or
        all wrong, which includes a single observation) returns the point
        value as both bounds: every resample has the same mean, and scipy
        would warn and, for BCa, give NaN.
    """
    x = np.asarray(correct, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan")
    if x.min() == x.max():
        v = float(x[0])
        return v, v
    res = st.bootstrap(
        (x,),
        lambda a, axis: a.mean(axis=axis),
        n_resamples=n_boot,
        vectorized=True,
        confidence_level=confidence,
        method=method,
        rng=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    return float(np.clip(ci.low, 0.0, 1.0)), float(np.clip(ci.high, 0.0, 1.0))


def recall_table(
    answers: pd.DataFrame, n_boot: int = 2000, seed: int = 7, confidence: float = 0.95, method: str = "percentile"
) -> pd.DataFrame:
    """Per strategy: real questions retained of N with a bootstrap interval, decoys, tokens, by pointer.

    Parameters
    ----------
    answers : DataFrame
        `closed.ClosedResult.answers` (see the module docstring for the columns used).
    n_boot, seed, confidence, method
        See `bootstrap_interval`; every strategy's interval is drawn from a
        fresh Generator with the same seed, so a row does not depend on
        which other strategies are in the frame.

    Returns
    -------
    DataFrame
        One row per strategy (per reader, when there is a ``reader`` column),
        in order of first appearance: ``strategy``, ``strategy_label``
        (distinct labels joined by " / " when a strategy fell back in some
        cases only), [``reader``, ``reader_label``], ``retained``, ``n``,
        ``recall``, ``ci_low``, ``ci_high``, ``decoys_fallen`` (decoy rows
        graded wrong), ``decoys_n``, ``projection_tokens`` (mean over
        cases of the projection's size, each case counted once however many
        questions it has; NaN without that column), then ``retained_<p>``,
        ``n_<p>``, ``recall_<p>`` for each pointer (recall NaN when N is 0).
    """
    _check(answers)
    rows = []
    for ident, g in _units(answers):
        real = _real(g)
        correct = real["correct"].astype(bool).to_numpy()
        decoys = g[g["decoy"].astype(bool)]
        low, high = bootstrap_interval(correct, n_boot, seed, confidence, method)
        tokens = float("nan")
        if "projection_tokens" in g:
            tokens = float(g.drop_duplicates("case_id")["projection_tokens"].mean())
        row = {
            **ident,
            "retained": int(correct.sum()),
            "n": int(correct.size),
            "recall": float(correct.mean()) if correct.size else float("nan"),
            "ci_low": low,
            "ci_high": high,
            "decoys_fallen": int((~decoys["correct"].astype(bool)).sum()),
            "decoys_n": int(len(decoys)),
            "projection_tokens": tokens,
        }
        for p, (k, n) in pointer_recall(g).items():
            row.update({f"retained_{p}": k, f"n_{p}": n, f"recall_{p}": k / n if n else float("nan")})
        rows.append(row)
    cols = _id_columns(answers) + [
        "retained",
        "n",
        "recall",
        "ci_low",
        "ci_high",
        "decoys_fallen",
        "decoys_n",
        "projection_tokens",
    ]
    cols += [f"{kind}_{p}" for p in POINTERS for kind in ("retained", "n", "recall")]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------- McNemar


def _correct_by_question(g: pd.DataFrame) -> pd.Series:
    real = _real(g)
    s = real.set_index(["case_id", "question_id"])["correct"].astype(bool)
    if s.index.has_duplicates:
        dup = s.index[s.index.duplicated()][0]
        raise ValueError(f"question {dup} answered twice by strategy {g['strategy'].iloc[0]!r}")
    return s


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: binomial test of b successes in b + c at 1/2 (1.0 when b + c = 0)."""
    return 1.0 if b + c == 0 else float(st.binomtest(b, b + c, 0.5).pvalue)


def mcnemar_table(answers: pd.DataFrame) -> pd.DataFrame:
    """Paired exact McNemar test for every pair of strategies on the real questions both answered.

    Parameters
    ----------
    answers : DataFrame
        `closed.ClosedResult.answers`. Questions are paired on
        (case_id, question_id); decoys are left out (they measure
        abstention, not retention). With a ``reader`` column, pairs are
        formed within each reader.

    Returns
    -------
    DataFrame
        One row per pair (a before b in order of first appearance):
        [``reader``, ``reader_label``], ``strategy_a``, ``strategy_b``,
        ``label_a``, ``label_b``, ``n_paired``, ``both_correct``,
        ``both_wrong``, ``b`` (a right, b wrong), ``c`` (a wrong, b right),
        ``recall_a``, ``recall_b`` (on the paired questions), ``p_value``
        (exact, two-sided; 1.0 without discordant pairs) and ``ahead``
        (the strategy with more discordant wins, or "tie").
    """
    _check(answers)
    has_reader = "reader" in answers.columns
    by_reader: dict[object, list[tuple[dict[str, Hashable], pd.Series]]] = {}
    for ident, g in _units(answers):
        by_reader.setdefault(ident.get("reader"), []).append((ident, _correct_by_question(g)))
    rows = []
    for units in by_reader.values():
        for (ia, sa), (ib, sb) in combinations(units, 2):
            both = pd.concat([sa.rename("a"), sb.rename("b")], axis=1, join="inner")
            a, bb = both["a"].to_numpy(bool), both["b"].to_numpy(bool)
            b, c = int((a & ~bb).sum()), int((~a & bb).sum())
            n = int(len(both))
            row: dict[str, object] = (
                {"reader": ia.get("reader"), "reader_label": ia.get("reader_label")} if has_reader else {}
            )
            row.update(
                {
                    "strategy_a": ia["strategy"],
                    "strategy_b": ib["strategy"],
                    "label_a": ia["strategy_label"],
                    "label_b": ib["strategy_label"],
                    "n_paired": n,
                    "both_correct": int((a & bb).sum()),
                    "both_wrong": int((~a & ~bb).sum()),
                    "b": b,
                    "c": c,
                    "recall_a": float(a.mean()) if n else float("nan"),
                    "recall_b": float(bb.mean()) if n else float("nan"),
                    "p_value": mcnemar_p(b, c),
                    "ahead": ia["strategy"] if b > c else ib["strategy"] if c > b else "tie",
                }
            )
            rows.append(row)
    cols = (["reader", "reader_label"] if has_reader else []) + [
        "strategy_a",
        "strategy_b",
        "label_a",
        "label_b",
        "n_paired",
        "both_correct",
        "both_wrong",
        "b",
        "c",
        "recall_a",
        "recall_b",
        "p_value",
        "ahead",
    ]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------- pointer-mix sensitivity


def mixed_recall(by_pointer: Mapping[str, tuple[int, int]], mix: Mapping[str, float]) -> float:
    """Recall under a question mix: Σ w_p · recall_p over pointers, weights renormalised over pointers with questions.

    A pointer with no questions has no recall to weigh; its weight is
    redistributed to the other pointers in proportion to their weights
    (i.e. the weights of the pointers present are renormalised to sum to
    1). When no pointer with positive weight has questions the mix says
    nothing about this strategy: NaN.

    Parameters
    ----------
    by_pointer : mapping of pointer to (retained, N)
    mix : mapping of pointer to weight (missing pointers weigh 0)
    """
    present = {p: (k, n) for p, (k, n) in by_pointer.items() if n > 0}
    total = sum(float(mix.get(p, 0.0)) for p in present)
    if total <= 0:
        return float("nan")
    return sum(float(mix.get(p, 0.0)) * k / n for p, (k, n) in present.items()) / total


def sensitivity_table(
    answers: pd.DataFrame, steps: int = 11, default_mix: Mapping[str, float] = DEFAULT_MIX
) -> pd.DataFrame:
    """Recall and rank of every strategy as the pointer mix moves from all-tool to all-assistant.

    The sweep sets ``w_assistant = s``, ``w_tool = 1 - s``, ``w_user = 0``
    for ``s`` in ``linspace(0, 1, steps)``; the default mix (80/10/10) is
    added as its own rows with ``default`` True (and ``s`` NaN, since it is
    not on the sweep's line). Weighted recall is `mixed_recall` of the
    per-pointer recall of the real questions (see there for pointers without
    questions). Ranks are within each mix point (and reader): 1 is best,
    ties share the smallest rank, NaN recall gets no rank.

    Parameters
    ----------
    answers : DataFrame
        `closed.ClosedResult.answers`.
    steps : int
        Points on the sweep, endpoints included (at least 2).
    default_mix : mapping of pointer to weight

    Returns
    -------
    DataFrame
        ``s``, ``w_assistant``, ``w_user``, ``w_tool``, ``default``,
        ``strategy``, ``strategy_label``, [``reader``, ``reader_label``],
        ``recall``, ``rank`` (nullable integer); sweep points in order of
        ``s``, then the default point; strategies in order of first appearance.
    """
    _check(answers)
    if steps < 2:
        raise ValueError(f"steps must be >= 2 to include both ends of the sweep, got {steps}")
    mixes: list[tuple[float, dict[str, float], bool]] = []
    for s in np.linspace(0.0, 1.0, steps):
        s = round(float(s), _RANK_DECIMALS)
        mixes.append((s, {"assistant": s, "user": 0.0, "tool": round(1.0 - s, _RANK_DECIMALS)}, False))
    mixes.append((float("nan"), {p: float(default_mix.get(p, 0.0)) for p in POINTERS}, True))
    units = [(ident, pointer_recall(g)) for ident, g in _units(answers)]
    rows = []
    for point, (s, mix, is_default) in enumerate(mixes):
        for ident, by_pointer in units:
            rows.append(
                {
                    "point": point,
                    "s": s,
                    "w_assistant": mix["assistant"],
                    "w_user": mix["user"],
                    "w_tool": mix["tool"],
                    "default": is_default,
                    **ident,
                    "recall": mixed_recall(by_pointer, mix),
                }
            )
    cols = ["s", "w_assistant", "w_user", "w_tool", "default"] + _id_columns(answers) + ["recall", "rank"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    groups = ["point"] + (["reader"] if "reader" in df.columns else [])
    df["rank"] = (
        df["recall"]
        .round(_RANK_DECIMALS)
        .groupby([df[g] for g in groups], sort=False, dropna=False)
        .rank(method="min", ascending=False)
        .astype("Int64")
    )
    return df[cols].reset_index(drop=True)
