"""Statistics over exam answers: recall with honest intervals, paired tests, per-session results, mix sensitivity.

Every exam cell is one draw, so differences between strategies need a measure of how much they could
move by chance, and that depends on the unit: the question for synthetic chains, the session (questions
nested inside; within one session, the record) for questions mined from real logs.

Key names: `proportion_interval` (Clopper–Pearson, or for clustered questions the union of a cluster
bootstrap, a cluster-robust t and Clopper–Pearson), `recall_table`, `paired_table` (exact McNemar, or a
sign-flip permutation test over sessions), `session_table`, `sensitivity_table`, `rank_agreement`
(Spearman's rho between two exams, bootstrap over sessions). All functions are pure and deterministic
(random draws come from a numpy Generator seeded by the caller) and take the ``answers`` frame of
`closed.ClosedResult`; each reader is its own unit.

Design: docs/exams.md#statspy (units, simulated coverage, tests, tables, input columns).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from compaction_lab.exam import found, readers
from compaction_lab.exam.questions.bank import DEFAULT_POINTER_MIX
from compaction_lab.exam.statistics.intervals import (
    CLOPPER_PEARSON,
    Interval,
    binomial_half_p,
    clopper_pearson,
    cluster_t,
    records_floor,
)
from compaction_lab.exam.statistics.power import hierarchical_interval
from compaction_lab.exam.types import POINTERS

#: The default question mix (the bank's, for synthetic chains): the seed's follow-up study (80% assistant, 10% user, 10% tool).
DEFAULT_MIX: Mapping[str, float] = DEFAULT_POINTER_MIX

#: How `sensitivity_table` labels its default rows when the caller passes the default mix and no label.
DEFAULT_MIX_LABEL = "synthetic 80/10/10"

#: Units `recall_table` and `paired_table` accept.
UNITS: tuple[str, ...] = ("question", "session")

#: Largest number of differing sessions whose sign patterns `paired_table` enumerates (2^16 patterns).
MAX_EXACT_SESSIONS = 16

_REQUIRED = ("strategy", "case_id", "question_id", "pointer", "decoy", "correct")

#: Rounding applied before ranking, so mixes that tie mathematically tie in floating point too.
_RANK_DECIMALS = 12


# --------------------------------------------------------------------------- helpers


def _check(answers: pd.DataFrame) -> None:
    missing = [c for c in _REQUIRED if c not in answers.columns]
    if missing:
        raise ValueError(f"answers frame lacks columns: {', '.join(missing)}")


def _check_unit(unit: str) -> None:
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")


def _unit_keys(answers: pd.DataFrame) -> list[str]:
    """Columns that identify one scored unit: the strategy, within its reader when there is one."""
    return ["reader", "strategy"] if "reader" in answers.columns else ["strategy"]


def _joined(values: pd.Series) -> str:
    """Distinct labels in order of appearance, joined: a strategy can fall back in some cases only."""
    return " / ".join(str(v) for v in pd.unique(values.dropna()))


def _units(answers: pd.DataFrame) -> list[tuple[dict[str, Hashable], pd.DataFrame]]:
    """Split the answers into (identifying columns, rows) per unit, in order of first appearance; labels included."""
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


def _sessions(g: pd.DataFrame) -> pd.Series:
    """Return each row's session: ``session_id``, or the case when the frame has no such column (see module doc)."""
    return (g["session_id"] if "session_id" in g.columns else g["case_id"]).astype(str)


def _records(g: pd.DataFrame) -> pd.Series | None:
    """Return each row's record, ``session<TAB>source_order``; None when the frame has no ``source_order``."""
    if "source_order" not in g.columns:
        return None
    return _sessions(g) + "\t" + g["source_order"].astype(str)


def _n_distinct(labels: pd.Series | None) -> int | None:
    return None if labels is None else int(labels.nunique())


def pointer_recall(answers: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """(retained, N) of the real questions per pointer, for one unit's rows (all `POINTERS`, zeros included)."""
    real = _real(answers)
    out = {}
    for p in POINTERS:
        c = real.loc[real["pointer"] == p, "correct"].astype(bool)
        out[p] = (int(c.sum()), int(len(c)))
    return out


# --------------------------------------------------------------------------- intervals


def _cluster_bootstrap(y: np.ndarray, n: np.ndarray, n_boot: int, seed: int, confidence: float) -> tuple[float, float]:
    """Two-stage percentile bootstrap of Σy/Σn: clusters with replacement, then Binomial(n_g, p̂_g) within each."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, y.size, size=(n_boot, y.size))
    sizes = n[idx]
    draws = rng.binomial(sizes, (y / n)[idx])
    means = draws.sum(axis=1) / sizes.sum(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def proportion_interval(
    correct: Sequence[bool] | np.ndarray,
    clusters: Sequence[Hashable] | np.ndarray | pd.Series | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 7,
    confidence: float = 0.95,
    cluster_name: str = "clusters",
) -> Interval:
    """Interval for the share of correct answers, respecting which answers are independent.

    Parameters
    ----------
    correct : sequence of bool
        One outcome per question.
    clusters : sequence of hashable, optional
        The independent unit each question belongs to (aligned with
        `correct`), e.g. its session. None: the questions are independent.
    n_boot : int
        Resamples of the cluster bootstrap.
    seed : int
        Seeds a fresh `numpy.random.Generator`, so the same data and seed give the same interval.
    confidence : float
    cluster_name : str
        What the clusters are, for ``method`` ("sessions", "records").

    Returns
    -------
    Interval
        - no questions: NaN bounds;
        - ``clusters`` None: Clopper–Pearson;
        - one cluster: Clopper–Pearson, ``method`` saying there was one cluster;
        - two or more: the union of the two-stage cluster bootstrap, the
          cluster-robust t interval (G − 1 degrees of freedom) and
          Clopper–Pearson (the module docstring says why all three).

        Never of zero width when there is at least one question (Clopper–Pearson
        never is); within [0, 1].
    """
    x = np.asarray(correct, dtype=bool)
    k, n = int(x.sum()), int(x.size)
    if n == 0:
        return Interval(float("nan"), float("nan"), "no questions")
    exact = clopper_pearson(k, n, confidence)
    if clusters is None:
        return Interval(*exact, f"{CLOPPER_PEARSON} (questions independent)")
    labels = np.asarray(clusters, dtype=object)
    if labels.shape != x.shape:
        raise ValueError(f"clusters has {labels.size} labels for {n} outcomes")
    codes, uniques = pd.factorize(labels)
    g = len(uniques)
    if g < 2:
        return Interval(
            *exact, f"{CLOPPER_PEARSON} (all questions in one cluster: nothing varies between {cluster_name})"
        )
    sizes = np.bincount(codes, minlength=g)
    hits = np.bincount(codes, weights=x.astype(float), minlength=g)
    boot = _cluster_bootstrap(hits, sizes, n_boot, seed, confidence)
    tint = cluster_t(hits, sizes, confidence)
    low, high = min(boot[0], tint[0], exact[0]), max(boot[1], tint[1], exact[1])
    return Interval(low, high, f"cluster bootstrap ∪ cluster t over {g} {cluster_name} ∪ {CLOPPER_PEARSON}")


def _unit_interval(real: pd.DataFrame, unit: str, n_boot: int, seed: int, confidence: float) -> Interval:
    """`proportion_interval` of one strategy's real questions at `unit`, stepping down to records for one session."""
    correct = real["correct"].astype(bool).to_numpy()
    if draws_of(real) > 1 and correct.size:
        # A question's draws share its projection: resampled together (sessions, then questions, then draws).
        question = (real["case_id"].astype(str) + "\t" + real["question_id"].astype(str)).to_numpy()
        sessions = _sessions(real)
        clustered = unit == "session" and sessions.nunique() >= 2
        return hierarchical_interval(
            correct,
            question,
            sessions.to_numpy() if clustered else None,
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
        )
    if unit == "question" or correct.size == 0:
        return proportion_interval(correct, n_boot=n_boot, seed=seed, confidence=confidence)
    sessions = _sessions(real)
    if sessions.nunique() >= 2:
        return proportion_interval(
            correct, sessions.to_numpy(), n_boot=n_boot, seed=seed, confidence=confidence, cluster_name="sessions"
        )
    records = _records(real)
    if records is not None and records.nunique() >= 2:
        iv = proportion_interval(
            correct, records.to_numpy(), n_boot=n_boot, seed=seed, confidence=confidence, cluster_name="records"
        )
        return Interval(iv.low, iv.high, f"one session: {iv.method}")
    why = "one record" if records is not None else "records unknown"
    low, high = clopper_pearson(int(correct.sum()), int(correct.size), confidence)
    return Interval(low, high, f"one session, {why}: {CLOPPER_PEARSON} (questions as if independent)")


# --------------------------------------------------------------------------- recall


def recall_table(
    answers: pd.DataFrame, n_boot: int = 2000, seed: int = 7, confidence: float = 0.95, unit: str = "question"
) -> pd.DataFrame:
    """Per strategy: real questions retained of N with an honest interval, its units, decoys, tokens, by pointer.

    Parameters
    ----------
    answers : DataFrame
        `closed.ClosedResult.answers` (see the module docstring for the columns used).
    n_boot, seed, confidence
        See `proportion_interval`; every strategy's interval is drawn from a
        fresh Generator with the same seed, so a row does not depend on
        which other strategies are in the frame.
    unit : {"question", "session"}
        ``question``: questions are independent (synthetic chains);
        Clopper–Pearson. ``session``: questions mined from real sessions;
        sessions are the clusters, or, when a strategy's questions all come
        from one session, the records within it (see the module docstring).

    Returns
    -------
    DataFrame
        One row per strategy (per reader, when there is a ``reader`` column),
        in order of first appearance: ``strategy``, ``strategy_label``
        (distinct labels joined by " / " when a strategy fell back in some
        cases only), [``reader``, ``reader_label``], ``retained``, ``n``,
        ``recall``, ``ci_low``, ``ci_high``, ``ci_method`` (how the interval
        was made), ``n_sessions`` (distinct sessions of the real questions),
        ``n_records`` (distinct records they were mined from; <NA> without
        ``source_order``), ``top_session_share`` (share of the real questions
        from the session that gives most; NaN without questions),
        ``over_window`` (any projection of the strategy larger than its usable
        capacity; False without that column), ``decoys_fallen`` (decoy rows
        graded wrong), ``decoys_n`` (both nullable Int64, <NA> where only a
        stand-in answered the decoys: not measured, see `_decoy_counts`),
        ``projection_tokens`` (mean over cases
        of the projection's size, each case counted once however many
        questions it has; NaN without that column), then ``retained_<p>``,
        ``n_<p>``, ``recall_<p>`` for each pointer (recall NaN when N is 0), then the two parts of recall
        (`PART_COLUMNS`, `_part_columns`): ``scope_*`` (right, the value in what the arm keeps by design)
        and ``summary_*`` (right, the value only in its summary text), each with its interval made as
        the total's, and ``summary_by`` (who wrote the summary text).
    """
    _check(answers)
    _check_unit(unit)
    rows = []
    for ident, g in _units(answers):
        real = _real(g)
        correct = real["correct"].astype(bool).to_numpy()
        fallen, asked = _decoy_counts(g)
        iv = _unit_interval(real, unit, n_boot, seed, confidence)
        if unit == "session" and correct.size:
            # questions of a few records are a few observations: never narrower than Clopper–Pearson over them
            iv = records_floor(iv, float(correct.mean()), _n_distinct(_records(real)), confidence)
        sessions = _sessions(real)
        tokens = float("nan")
        if "projection_tokens" in g:
            tokens = float(g.drop_duplicates("case_id")["projection_tokens"].mean())
        row = {
            **ident,
            "retained": int(correct.sum()),
            "n": int(correct.size),
            "recall": float(correct.mean()) if correct.size else float("nan"),
            "ci_low": iv.low,
            "ci_high": iv.high,
            "ci_method": iv.method,
            "n_sessions": int(sessions.nunique()),
            "n_records": _n_distinct(_records(real)),
            "top_session_share": float(sessions.value_counts().iloc[0] / correct.size)
            if correct.size
            else float("nan"),
            "over_window": bool(g["over_window"].eq(True).any()) if "over_window" in g else False,
            "decoys_fallen": fallen,
            "decoys_n": asked,
            "projection_tokens": tokens,
        }
        for p, (k, n) in pointer_recall(g).items():
            row.update({f"retained_{p}": k, f"n_{p}": n, f"recall_{p}": k / n if n else float("nan")})
        row.update(_part_columns(real, unit, n_boot, seed, confidence))
        rows.append(row)
    cols = _id_columns(answers) + [
        "retained",
        "n",
        "recall",
        "ci_low",
        "ci_high",
        "ci_method",
        "n_sessions",
        "n_records",
        "top_session_share",
        "over_window",
        "decoys_fallen",
        "decoys_n",
        "projection_tokens",
    ]
    cols += [f"{kind}_{p}" for p in POINTERS for kind in ("retained", "n", "recall")]
    cols += PART_COLUMNS
    out = pd.DataFrame(rows, columns=cols)
    out["n_records"] = out["n_records"].astype("Int64")
    parts_counted = [f"{part}_retained{p}" for part in found.PARTS for p in ("", *(f"_{q}" for q in POINTERS))]
    out[parts_counted] = out[parts_counted].astype("Int64")
    out["over_window"] = out["over_window"].astype(bool)
    out[["decoys_fallen", "decoys_n"]] = out[["decoys_fallen", "decoys_n"]].astype("Int64")
    return out


#: `recall_table`'s columns of the two parts of recall (`found.PARTS`; <NA> where the answers carry no
#: ``found_in``): per part its retained, recall and 95% interval, its retained per pointer; ``summary_by``.
PART_COLUMNS: list[str] = [
    *(f"{part}_{kind}" for part in found.PARTS for kind in ("retained", "recall", "ci_low", "ci_high")),
    *(f"{part}_retained_{p}" for part in found.PARTS for p in POINTERS),
    "summary_by",
]


def _part_columns(real: pd.DataFrame, unit: str, n_boot: int, seed: int, confidence: float) -> dict[str, object]:
    """Scope and summary recall of one unit's real answers, each with its interval (as the total's is made).

    A right answer counts toward ``scope`` when its value is in what the arm keeps by design and toward
    ``summary`` when only its summary text holds it (`found.part`); the rest of the right answers (a model
    reader's, value in neither) toward neither. Empty (<NA>) without a ``found_in`` column or when none
    of the rows has one.
    """
    if "found_in" not in real.columns or (len(real) and real["found_in"].isna().all()):
        # not recorded (a frame saved before issue 47, or one built without it): not measured, never 0
        return {c: (float("nan") if "recall" in c or "ci_" in c else pd.NA) for c in PART_COLUMNS}
    where = real["found_in"].astype(str)
    right = real["correct"].astype(bool)
    out: dict[str, object] = {}
    for part in found.PARTS:
        hit = right & (where.isin(found.SCOPE_FOUND) if part == "scope" else where.eq("summary"))
        rows = real.assign(correct=hit)
        iv = _unit_interval(rows, unit, n_boot, seed, confidence)
        if unit == "session" and len(rows):
            iv = records_floor(iv, float(hit.mean()), _n_distinct(_records(rows)), confidence)
        out.update(
            {
                f"{part}_retained": int(hit.sum()),
                f"{part}_recall": float(hit.mean()) if len(rows) else float("nan"),
                f"{part}_ci_low": iv.low,
                f"{part}_ci_high": iv.high,
            }
        )
        for p in POINTERS:
            out[f"{part}_retained_{p}"] = int((hit & real["pointer"].eq(p)).sum())
    by = real["summary_by"] if "summary_by" in real.columns else pd.Series([], dtype=object)
    out["summary_by"] = " / ".join(dict.fromkeys(str(v) for v in by.dropna() if str(v)))
    return out


def _decoy_counts(g: pd.DataFrame) -> tuple[int | None, int | None]:
    """Decoys fallen for and decoys asked of one unit's rows, counting only readers that could fall for one.

    A stand-in reader (``stand_in`` True, or a ``reader`` registered decoy-blind:
    `readers.measures_decoys`) answers only what is there, so its abstaining on a
    decoy says nothing: when decoys were asked and no answer to one came from a
    reader that could fall for it, both counts are None ("not measured"), never
    0 of N. No decoy asked: 0 of 0.
    """
    decoys = g[g["decoy"].astype(bool)]
    if decoys.empty:
        return 0, 0
    judged = pd.Series(True, index=decoys.index)
    if "stand_in" in decoys.columns:
        judged &= ~decoys["stand_in"].astype("boolean").fillna(False).astype(bool)
    if "reader" in decoys.columns:
        judged &= decoys["reader"].astype(str).map(readers.measures_decoys).astype(bool)
    if not judged.any():
        return None, None
    kept = decoys[judged]
    return int((~kept["correct"].astype(bool)).sum()), int(len(kept))


def session_table(answers: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per strategy x session: the real questions retained of N with a Clopper–Pearson interval.

    Parameters
    ----------
    answers : DataFrame
        `closed.ClosedResult.answers`; sessions from ``session_id`` (each
        case its own session without it), records from ``source_order``.
    confidence : float

    Returns
    -------
    DataFrame
        [``reader``, ``reader_label``], ``strategy``, ``strategy_label``,
        ``session_id``, ``n``, ``retained``, ``recall``, ``ci_low``,
        ``ci_high`` (Clopper–Pearson within the session), ``n_records``
        (<NA> without ``source_order``). Strategies (within readers) in order
        of first appearance, sessions in order of first appearance within
        each; sessions that contribute no real question have no row. With
        several draws per question (`draws_of`), ``n`` counts questions and
        ``retained`` sums each question's share of right draws (a fraction):
        a question's draws are not independent answers, so the interval is
        over its questions.
    """
    _check(answers)
    has_reader = "reader" in answers.columns
    draws = draws_of(answers)
    rows = []
    for ident, g in _units(answers):
        real = _real(g)
        records = _records(real)
        for session, rows_s in real.groupby(_sessions(real), sort=False):
            c = rows_s["correct"].astype(bool)
            k: float
            if draws > 1:
                share = c.groupby([rows_s["case_id"], rows_s["question_id"]], sort=False).mean()
                k, n = float(share.sum()), int(len(share))
            else:
                k, n = int(c.sum()), int(len(c))
            low, high = clopper_pearson(k, n, confidence)
            row: dict[str, object] = (
                {"reader": ident["reader"], "reader_label": ident["reader_label"]} if has_reader else {}
            )
            row.update(
                {
                    "strategy": ident["strategy"],
                    "strategy_label": ident["strategy_label"],
                    "session_id": session,
                    "n": n,
                    "retained": k,
                    "recall": k / n,
                    "ci_low": low,
                    "ci_high": high,
                    "n_records": None if records is None else int(records.loc[rows_s.index].nunique()),
                }
            )
            rows.append(row)
    cols = (["reader", "reader_label"] if has_reader else []) + [
        "strategy",
        "strategy_label",
        "session_id",
        "n",
        "retained",
        "recall",
        "ci_low",
        "ci_high",
        "n_records",
    ]
    out = pd.DataFrame(rows, columns=cols)
    out["n_records"] = out["n_records"].astype("Int64")
    return out


# --------------------------------------------------------------------------- paired tests


def draws_of(answers: pd.DataFrame) -> int:
    """Draws per question in an answers frame: the distinct ``draw`` values (1 without the column)."""
    return int(answers["draw"].nunique()) if "draw" in answers.columns and len(answers) else 1


def _correct_by_question(g: pd.DataFrame, draws: int = 1) -> pd.DataFrame:
    """One strategy's real answers indexed by (case_id, question_id): ``correct`` and ``session``.

    With several `draws`, ``correct`` is the number of draws answered right (an int, 0..draws).
    """
    real = _real(g)
    if draws > 1:
        keys = ["case_id", "question_id"]
        counted = real.assign(correct=real["correct"].astype(bool), session=_sessions(real).to_numpy())
        grouped = counted.groupby(keys, sort=False)
        s = pd.DataFrame({"correct": grouped["correct"].sum().astype(np.int64), "session": grouped["session"].first()})
        asked = grouped.size()
        if (asked != draws).any():
            odd = asked[asked != draws].index[0]
            raise ValueError(
                f"question {odd} has {asked[odd]} answers by strategy {g['strategy'].iloc[0]!r}, not {draws}"
            )
        return s
    s = pd.DataFrame(
        {"correct": real["correct"].astype(bool).to_numpy(), "session": _sessions(real).to_numpy()},
        index=pd.MultiIndex.from_frame(real[["case_id", "question_id"]]),
    )
    if s.index.has_duplicates:
        dup = s.index[s.index.duplicated()][0]
        raise ValueError(f"question {dup} answered twice by strategy {g['strategy'].iloc[0]!r}")
    return s


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: binomial test of b successes in b + c at 1/2 (1.0 when b + c = 0)."""
    return binomial_half_p(b, b + c)


def sign_flip_p(differences: Sequence[int] | np.ndarray, n_perm: int = 10_000, seed: int = 7) -> tuple[float, bool]:
    """Two-sided sign-flip permutation p-value of Σ d_g, and whether it was exact.

    Parameters
    ----------
    differences : sequence of int
        One paired difference per independent unit (session).
    n_perm : int
        Monte Carlo draws when more than `MAX_EXACT_SESSIONS` differences are non-zero.
    seed : int

    Returns
    -------
    (p, exact) : (float, bool)
        The share of sign patterns with |Σ ± d_g| ≥ |Σ d_g|: over all 2^G
        patterns of the non-zero differences (zeros flip to themselves), or
        (1 + hits) / (1 + n_perm) over seeded random patterns. 1.0 without
        non-zero differences.
    """
    d = np.asarray(differences, dtype=np.int64)
    d = d[d != 0]
    if d.size == 0:
        return 1.0, True
    observed = abs(int(d.sum()))
    if d.size <= MAX_EXACT_SESSIONS:
        patterns = (np.arange(2**d.size, dtype=np.int64)[:, None] >> np.arange(d.size, dtype=np.int64)) & 1
        totals = (2 * patterns - 1) @ d
        return float(np.mean(np.abs(totals) >= observed)), True
    signs = 2 * np.random.default_rng(seed).integers(0, 2, size=(n_perm, d.size), dtype=np.int64) - 1
    hits = int(np.sum(np.abs(signs @ d) >= observed))
    return (1 + hits) / (1 + n_perm), False


def _paired_test(
    a: np.ndarray, b: np.ndarray, sessions: np.ndarray, unit: str, n_perm: int, seed: int
) -> tuple[float, str, str]:
    """(p-value, test name, note) for one pair of strategies' paired outcomes."""
    wins, losses = int((a & ~b).sum()), int((~a & b).sum())
    if unit == "question":
        return mcnemar_p(wins, losses), "exact McNemar", ""
    name = "sign-flip permutation over sessions"
    if a.size == 0:
        return 1.0, name, "no paired questions"
    codes, uniques = pd.factorize(sessions)
    if len(uniques) < 2:
        return 1.0, name, "one session: no between-session variation to test against"
    d = np.bincount(codes, weights=(a & ~b).astype(float), minlength=len(uniques)) - np.bincount(
        codes, weights=(~a & b).astype(float), minlength=len(uniques)
    )
    p, exact = sign_flip_p(np.rint(d).astype(np.int64), n_perm, seed)
    return p, f"{name} ({'exact' if exact else f'Monte Carlo, {n_perm} draws'})", ""


def _paired_draws_test(
    a: np.ndarray, b: np.ndarray, sessions: np.ndarray, unit: str, n_perm: int, seed: int
) -> tuple[float, str, str]:
    """(p-value, test name, note) of two arms' per-question counts of right draws: a sign-flip, never McNemar.

    The draws of one question share its projection and wording, so they are not independent pairs: the
    unit flipped is the question (its difference in right draws) or, with ``unit="session"``, the session
    (the sum of its questions' differences).
    """
    d = a.astype(np.int64) - b.astype(np.int64)
    if unit == "question":
        name = "sign-flip permutation over questions (draws summed)"
    else:
        name = "sign-flip permutation over sessions (draws summed)"
        codes, uniques = pd.factorize(sessions)
        if len(uniques) < 2:
            return 1.0, name, "one session: no between-session variation to test against"
        d = np.bincount(codes, weights=d.astype(float), minlength=len(uniques))
        d = np.rint(d).astype(np.int64)
    if d.size == 0:
        return 1.0, name, "no paired questions"
    p, exact = sign_flip_p(d, n_perm, seed)
    return p, f"{name} ({'exact' if exact else f'Monte Carlo, {n_perm} draws'})", ""


def paired_table(answers: pd.DataFrame, unit: str = "question", n_perm: int = 10_000, seed: int = 7) -> pd.DataFrame:
    """Paired test for every pair of strategies on the real questions both answered.

    Parameters
    ----------
    answers : DataFrame
        `closed.ClosedResult.answers`. Questions are paired on
        (case_id, question_id); decoys are left out (they measure
        abstention, not retention). With a ``reader`` column, pairs are
        formed within each reader.
    unit : {"question", "session"}
        ``question``: exact McNemar (independent questions, synthetic
        chains). ``session``: sign-flip permutation of the session-level
        differences (see `sign_flip_p` and the module docstring); p = 1.0
        with one session.
    n_perm, seed
        Monte Carlo draws and their seed, used only beyond `MAX_EXACT_SESSIONS` differing sessions.

    With several draws per question (a ``draw`` column, `draws_of`), each question counts once: ``b`` / ``c``
    are the questions arm a / b got right in more draws, ``both_correct`` / ``both_wrong`` right / wrong
    in every draw, recalls are over all draws, and the test is a sign-flip of the per-question (or
    per-session) differences in right draws (`_paired_draws_test`), whatever `unit`.

    Returns
    -------
    DataFrame
        One row per pair (a before b in order of first appearance):
        [``reader``, ``reader_label``], ``strategy_a``, ``strategy_b``,
        ``label_a``, ``label_b``, ``n_paired``, ``both_correct``,
        ``both_wrong``, ``b`` (a right, b wrong), ``c`` (a wrong, b right),
        ``recall_a``, ``recall_b`` (on the paired questions), ``p_value``
        (two-sided; 1.0 without discordant pairs), ``ahead`` (the strategy
        with more discordant wins, or "tie"), ``test`` (the test's name),
        ``n_sessions`` (sessions of the paired questions) and ``note`` (why
        a p-value is 1.0 by construction; empty otherwise).
    """
    _check(answers)
    _check_unit(unit)
    has_reader = "reader" in answers.columns
    by_reader: dict[object, list[tuple[dict[str, Hashable], pd.DataFrame]]] = {}
    draws = draws_of(answers)
    for ident, g in _units(answers):
        by_reader.setdefault(ident.get("reader"), []).append((ident, _correct_by_question(g, draws)))
    rows = []
    for units in by_reader.values():
        for (ia, sa), (ib, sb) in combinations(units, 2):
            both = sa.join(sb[["correct"]].rename(columns={"correct": "correct_b"}), how="inner")
            sessions = both["session"].to_numpy()
            n = int(len(both))
            if draws > 1:
                a_k, b_k = both["correct"].to_numpy(np.int64), both["correct_b"].to_numpy(np.int64)
                p, test, note = _paired_draws_test(a_k, b_k, sessions, unit, n_perm, seed)
                # A question's draws are not independent pairs: it counts once, for the arm right more often.
                b, c = int((a_k > b_k).sum()), int((a_k < b_k).sum())
                a, bb = a_k == draws, b_k == draws  # right in every draw
                both_wrong = int(((a_k == 0) & (b_k == 0)).sum())
                recall_a = float(a_k.sum() / (n * draws)) if n else float("nan")
                recall_b = float(b_k.sum() / (n * draws)) if n else float("nan")
            else:
                a, bb = both["correct"].to_numpy(bool), both["correct_b"].to_numpy(bool)
                b, c = int((a & ~bb).sum()), int((~a & bb).sum())
                p, test, note = _paired_test(a, bb, sessions, unit, n_perm, seed)
                both_wrong = int((~a & ~bb).sum())
                recall_a = float(a.mean()) if n else float("nan")
                recall_b = float(bb.mean()) if n else float("nan")
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
                    "both_wrong": both_wrong,
                    "b": b,
                    "c": c,
                    "recall_a": recall_a,
                    "recall_b": recall_b,
                    "p_value": p,
                    "ahead": ia["strategy"] if b > c else ib["strategy"] if c > b else "tie",
                    "test": test,
                    "n_sessions": int(pd.unique(sessions).size),
                    "note": note,
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
        "test",
        "n_sessions",
        "note",
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


def _percentages(mix: Mapping[str, float]) -> str:
    """``80/10/10``: the mix's assistant/user/tool weights in percent of their sum."""
    total = sum(float(mix.get(p, 0.0)) for p in POINTERS) or 1.0
    return "/".join(f"{100 * float(mix.get(p, 0.0)) / total:.0f}" for p in POINTERS)


def sensitivity_table(
    answers: pd.DataFrame,
    steps: int = 11,
    default_mix: Mapping[str, float] = DEFAULT_MIX,
    mix_label: str | None = None,
) -> pd.DataFrame:
    """Recall and rank of every strategy as the pointer mix moves from all-tool to all-assistant.

    The sweep sets ``w_assistant = s``, ``w_tool = 1 - s``, ``w_user = 0``
    for ``s`` in ``linspace(0, 1, steps)``; the default mix is added as its
    own rows with ``default`` True (and ``s`` NaN, since it is not on the
    sweep's line). Weighted recall is `mixed_recall` of the per-pointer
    recall of the real questions (see there for pointers without
    questions). Ranks are within each mix point (and reader): 1 is best,
    ties share the smallest rank, NaN recall gets no rank.

    Parameters
    ----------
    answers : DataFrame
        `closed.ClosedResult.answers`.
    steps : int
        Points on the sweep, endpoints included (at least 2).
    default_mix : mapping of pointer to weight
        The run's own mix: the synthetic 80/10/10 for synthetic chains, the
        pool's natural composition for imported sessions.
    mix_label : str, optional
        What the default rows are called, e.g. ``"natural (pool)"``. None:
        `DEFAULT_MIX_LABEL` for the synthetic default mix, else ``"default
        a/u/t"`` in percent.

    Returns
    -------
    DataFrame
        ``s``, ``w_assistant``, ``w_user``, ``w_tool``, ``default``,
        ``mix_label`` (``sweep a/u/t`` in percent on the sweep, the default
        mix's label on its rows), ``strategy``, ``strategy_label``,
        [``reader``, ``reader_label``], ``recall``, ``rank`` (nullable
        integer); sweep points in order of ``s``, then the default point;
        strategies in order of first appearance.
    """
    _check(answers)
    if steps < 2:
        raise ValueError(f"steps must be >= 2 to include both ends of the sweep, got {steps}")
    default = {p: float(default_mix.get(p, 0.0)) for p in POINTERS}
    if mix_label is None:
        same = default == {p: float(DEFAULT_MIX.get(p, 0.0)) for p in POINTERS}
        mix_label = DEFAULT_MIX_LABEL if same else f"default {_percentages(default)}"
    mixes: list[tuple[float, dict[str, float], bool, str]] = []
    for s in np.linspace(0.0, 1.0, steps):
        s = round(float(s), _RANK_DECIMALS)
        mix = {"assistant": s, "user": 0.0, "tool": round(1.0 - s, _RANK_DECIMALS)}
        mixes.append((s, mix, False, f"sweep {_percentages(mix)}"))
    mixes.append((float("nan"), default, True, mix_label))
    units = [(ident, pointer_recall(g)) for ident, g in _units(answers)]
    rows = []
    for point, (s, mix, is_default, label) in enumerate(mixes):
        for ident, by_pointer in units:
            rows.append(
                {
                    "point": point,
                    "s": s,
                    "w_assistant": mix["assistant"],
                    "w_user": mix["user"],
                    "w_tool": mix["tool"],
                    "default": is_default,
                    "mix_label": label,
                    **ident,
                    "recall": mixed_recall(by_pointer, mix),
                }
            )
    cols = ["s", "w_assistant", "w_user", "w_tool", "default", "mix_label"] + _id_columns(answers) + ["recall", "rank"]
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


# --------------------------------------------------------------------------- rank agreement between two exams


#: The verdicts of `RankAgreement.verdict`.
AGREE, DISAGREE, CANNOT_TELL, NOT_MEASURED = "agree", "disagree", "cannot tell", "not measured"


@dataclass(frozen=True)
class RankAgreement:
    """How alike two exams rank the arms: Spearman's ρ with a bootstrap interval over the independent unit.

    Attributes
    ----------
    rho : float
        Spearman's rank correlation between the arms' recalls in the two exams (ties get average ranks); NaN
        with fewer than two arms, or when every arm has the same recall in one exam (ranks undefined).
    ci_low, ci_high : float
        The percentile bootstrap interval of ρ; NaN when there is none (``method`` says why). Never of zero
        width.
    n_strategies : int
        Arms scored in both exams, over-window arms left out.
    n_units : int
        Distinct independent units (sessions) among those arms' rows of either exam.
    method : str
        How ρ and its interval were made, or why there is no interval.
    """

    rho: float
    ci_low: float
    ci_high: float
    n_strategies: int
    n_units: int
    method: str

    @property
    def verdict(self) -> str:
        """Say what the data support, the one rule every wording of rank agreement follows.

        ``not measured``: no ρ (fewer than two arms, or every arm ties in one exam). ``agree``: the
        interval lies above 0. ``disagree``: it lies below 0 (the rankings are reversed). ``cannot
        tell``: a ρ without an interval (one session, two arms) or an interval that holds 0.
        """
        if np.isnan(self.rho):
            return NOT_MEASURED
        if np.isnan(self.ci_low) or np.isnan(self.ci_high):
            return CANNOT_TELL
        if self.ci_low > 0:
            return AGREE
        if self.ci_high < 0:
            return DISAGREE
        return CANNOT_TELL


#: Columns `rank_agreement` needs in each of its frames (besides the unit column).
_AGREEMENT_COLUMNS = ("strategy", "correct")


def _scored_rows(frame: pd.DataFrame, name: str, unit_col: str) -> pd.DataFrame:
    """Return the frame's scored rows (decoys dropped), after checking its columns and that it holds one reader."""
    missing = [c for c in (*_AGREEMENT_COLUMNS, unit_col) if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} frame lacks columns {missing}; it has {list(frame.columns)}")
    if "reader" in frame.columns and frame["reader"].nunique(dropna=False) > 1:
        # Arms are ranked within one reader (as everywhere in this module), never across readers.
        raise ValueError(f"{name} frame holds several readers {sorted(map(str, set(frame['reader'])))}; pass one")
    return frame[~frame["decoy"].astype(bool)] if "decoy" in frame.columns else frame


def _over_window_strategies(frame: pd.DataFrame) -> set[str]:
    if "over_window" not in frame.columns:
        return set()
    flagged = frame["over_window"].astype("boolean").fillna(False).astype(bool)
    return set(frame.loc[flagged, "strategy"].astype(str))


def _hits_and_sizes(rows: pd.DataFrame, compared: list[str], units: pd.Index, unit_col: str) -> tuple[np.ndarray, ...]:
    """Count correct answers and answers per unit x arm (two arrays of shape ``(len(units), len(arms))``)."""
    unit = pd.Categorical(rows[unit_col].astype(str), categories=units)
    strategy_codes = pd.Categorical(rows["strategy"].astype(str), categories=compared)
    correct = rows["correct"].astype(bool).to_numpy(dtype=float)
    hits = np.zeros((len(units), len(compared)))
    sizes = np.zeros((len(units), len(compared)))
    np.add.at(hits, (unit.codes, strategy_codes.codes), correct)
    np.add.at(sizes, (unit.codes, strategy_codes.codes), 1.0)
    return hits, sizes


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row of `a` with that row of `b` (average ranks); NaN for a row with NaN or ties only."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    out = np.full(a.shape[0], np.nan)
    ok = ~(np.isnan(a).any(axis=1) | np.isnan(b).any(axis=1))
    if not ok.any():
        return out
    # Rounded first, so recalls that tie mathematically tie in floating point too. pandas' average ranks
    # are scipy's ``rankdata`` (exact halves): the report, drawn in the runner's process, need not import
    # scipy.stats (slow to import) for them.
    ra = pd.DataFrame(np.round(a[ok], _RANK_DECIMALS)).rank(axis=1, method="average").to_numpy(copy=True)
    rb = pd.DataFrame(np.round(b[ok], _RANK_DECIMALS)).rank(axis=1, method="average").to_numpy(copy=True)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    denom = np.sqrt((ra**2).sum(axis=1) * (rb**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(denom > 0, (ra * rb).sum(axis=1) / np.where(denom > 0, denom, 1.0), np.nan)
    out[ok] = np.clip(rho, -1.0, 1.0)
    return out


def rank_agreement(
    closed: pd.DataFrame,
    continuation: pd.DataFrame,
    *,
    unit_col: str = "session_id",
    n_boot: int = 2000,
    seed: int = 7,
    confidence: float = 0.95,
) -> RankAgreement:
    """Spearman's ρ between the arms' closed-book recall and their continuation recall, with a session bootstrap.

    Parameters
    ----------
    closed : DataFrame
        Closed-book answers, one row per answer (``exam_closed``: ``strategy``, `unit_col`, ``correct``;
        ``decoy`` rows are dropped; ``over_window`` and ``reader`` used when present).
    continuation : DataFrame
        Continuation targets, one row per needed target x arm (``strategy``, `unit_col`, ``correct``:
        the projection holds it; ``over_window`` used when present). Pass one block (the closed-book cases).
    unit_col : str
        The independent unit both frames are resampled by (the session).
    n_boot : int
        Bootstrap resamples.
    seed : int
        Seeds a fresh `numpy.random.Generator`: the same frames and seed give the same interval.
    confidence : float

    Returns
    -------
    RankAgreement
        ρ over the arms present in both frames (in the closed frame's order; an arm over the window in
        either is left out), each arm's recall pooled over its rows. The interval resamples the units of
        both frames together (each drawn unit brings its rows of both) and recomputes every recall and
        ρ; resamples in which an arm has no row, or one exam ties every arm, give no ρ and are left out
        (counted in ``method``). No interval (NaN) with fewer than 3 arms or 2 units, or when the
        middle resamples all give the same ρ; ``method`` says why.

    Raises
    ------
    ValueError
        When a frame lacks a column, or holds answers of several readers.
    """
    closed = _scored_rows(closed, "closed", unit_col)
    continuation = _scored_rows(continuation, "continuation", unit_col)
    over = _over_window_strategies(closed) | _over_window_strategies(continuation)
    in_both = set(continuation["strategy"].astype(str))
    compared = [str(s) for s in pd.unique(closed["strategy"].astype(str)) if s in in_both and s not in over]
    closed = closed[closed["strategy"].astype(str).isin(compared)]
    continuation = continuation[continuation["strategy"].astype(str).isin(compared)]
    units = pd.Index(pd.unique(pd.concat([closed[unit_col], continuation[unit_col]]).astype(str)))
    n_strategies, n_units = len(compared), len(units)
    left_out = f"; over-window arms left out: {', '.join(sorted(over))}" if over else ""
    unit_name = "sessions" if unit_col == "session_id" else f"{unit_col} values"
    nan = float("nan")
    if n_strategies < 2:
        why = f"{n_strategies} arm scored in both exams: nothing to rank"
        return RankAgreement(nan, nan, nan, n_strategies, n_units, why + left_out)
    hits_c, sizes_c = _hits_and_sizes(closed, compared, units, unit_col)
    hits_k, sizes_k = _hits_and_sizes(continuation, compared, units, unit_col)
    rho = float(_spearman_rows(hits_c.sum(0) / sizes_c.sum(0), hits_k.sum(0) / sizes_k.sum(0))[0])
    spearman = f"Spearman ρ of per-arm recall over {n_strategies} arms"
    if np.isnan(rho):
        why = f"{spearman}: undefined, every arm has the same recall in one exam (no ranking to compare)"
        return RankAgreement(nan, nan, nan, n_strategies, n_units, why + left_out)
    if n_strategies < 3:
        why = f"{spearman}: two arms give ±1 by construction; no interval"
        return RankAgreement(rho, nan, nan, n_strategies, n_units, why + left_out)
    if n_units < 2:
        why = f"{spearman}; all rows from one of the {unit_name}: nothing to resample between, no interval"
        return RankAgreement(rho, nan, nan, n_strategies, n_units, why + left_out)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_units, size=(n_boot, n_units))
    weights = np.zeros((n_boot, n_units))
    np.add.at(weights, (np.repeat(np.arange(n_boot), n_units), draws.ravel()), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot_c = (weights @ hits_c) / (weights @ sizes_c)
        boot_k = (weights @ hits_k) / (weights @ sizes_k)
    rhos = _spearman_rows(boot_c, boot_k)
    rhos = rhos[~np.isnan(rhos)]
    kept = f"{len(rhos)} of {n_boot} resamples ranked" if len(rhos) < n_boot else f"{n_boot} resamples"
    boot = f"{confidence:.0%} percentile bootstrap over {n_units} {unit_name} ({kept})"
    if len(rhos) == 0:
        why = f"{spearman}; {boot}: no resample gave a ranking in both exams, no interval"
        return RankAgreement(rho, nan, nan, n_strategies, n_units, why + left_out)
    alpha = 1.0 - confidence
    low, high = (float(q) for q in np.quantile(rhos, [alpha / 2, 1 - alpha / 2]))
    if high - low <= 1e-12:
        why = (
            f"{spearman}; {boot}: the middle {confidence:.0%} of resamples all gave ρ = {low:.2f}, too few or "
            f"too alike {unit_name} to show how it varies; no interval"
        )
        return RankAgreement(rho, nan, nan, n_strategies, n_units, why + left_out)
    return RankAgreement(rho, low, high, n_strategies, n_units, f"{spearman}; {boot}" + left_out)
