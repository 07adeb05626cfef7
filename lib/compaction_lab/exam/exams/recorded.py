"""The recorded block of the exam: the compactions real agents made, found in their logs, examined.

For every compaction an imported session records (`strategies.arms.recorded.find`) the exam builds one case
cut at the compaction, with questions mined (`probes.mine`) from the records before it, outside the
region the agent kept verbatim (`kept_region`). It is answered from the agent's own next request (the
``recorded`` arm) and from every listed arm projecting the same session at the same cut, the agent's
own reimplementation included (``own_agent``). Tables: ``recorded_compactions.parquet`` (per compaction:
the request the agent held there in report ``tokens``, calibrated ``tokens_model``, the ``calibration``
factor and the log's own ``tokens_before``) and ``exam_recorded.parquet`` (per compaction x arm, with
``projection_tokens_model``, ``over_window`` and ``compacted`` in the model's terms, and ``best_other``:
the arm a report may name "best other arm", `best_other`); sessions without a usable compaction are
skipped and counted with their reason. Each ``exam_recorded`` row splits its recall into scope and
summary recall (`PART_COPIED`, docs/exams.md#6a-where-the-answer-was-found): for the ``recorded`` arm the
summary is the agent's real one, its kept region is scope; ``pool_scope_retained`` counts the pool values
an arm keeps by design.

Design: docs/exams.md#4-the-recorded-arms-exam (eligible values, columns, opaque summaries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core import excerpt
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.exam import found, readers
from compaction_lab.exam.exam import EXAMS, Exam, ExamParams, Source
from compaction_lab.exam.exams import closed
from compaction_lab.exam.grading import accepted, normalise
from compaction_lab.exam.questions import cuts, probes
from compaction_lab.exam.questions.cases import probe_params
from compaction_lab.exam.statistics import stats
from compaction_lab.exam.types import Case, Question, bank_from_jsonl, write_bank
from compaction_lab.ingest import sources
from compaction_lab.ingest.sources import Sources
from compaction_lab.strategies import calibration as cal
from compaction_lab.strategies.arms import recorded as rec
from compaction_lab.strategies.base import UNCOMPACTED_REFERENCE, CompactionContext

BANK_FILE = "exam_recorded_bank.jsonl"

#: One row per recorded compaction (`RecordedCases.found`).
FOUND_COLUMNS: list[str] = [
    "case_id",
    "session_id",
    "agent",
    "model",
    "label",
    "compaction",
    "compaction_entry",
    "cut",
    "after",
    "tokens",
    "tokens_model",
    "calibration",
    "tokens_before",
    "tail_start",
    "kept_from",
    "eligible_values",
    "eligible_in_summary",
    "recorded_pool_recall",
    "summary_readable",
    "opaque_summary_tokens",
    "questions",
    "decoys",
]
#: One row per session that gave no recorded case.
SKIP_COLUMNS: list[str] = ["session_id", "source_format", "reason"]
#: The two parts of recall `comparison_table` copies from `stats.recall_table` (`found.PARTS`): right
#: answers whose value the arm keeps by design (scope) or only its summary text holds, and who wrote it.
PART_COPIED: list[str] = [
    *(f"{part}_{kind}" for part in found.PARTS for kind in ("retained", "recall", "ci_low", "ci_high")),
    "summary_by",
]
#: One row per recorded compaction x arm (`RecordedResult.table`).
TABLE_COLUMNS: list[str] = [
    "case_id",
    "session_id",
    "agent",
    "model",
    "compaction",
    "strategy",
    "strategy_label",
    "recorded",
    "own_agent",
    "retained",
    "n",
    "recall",
    "ci_low",
    "ci_high",
    *PART_COPIED,
    "decoys_fallen",
    "decoys_n",
    "projection_tokens",
    "projection_tokens_model",
    "over_window",
    "compacted",
    "best_other",
    "pool_retained",
    "pool_scope_retained",
    "pool_n",
    "pool_recall",
    "kept_from",
    "kept_match",
    "kept_note",
    "summary_opaque",
    "n_records",
    "ci_method",
]

#: Beside the recorded bank: each case's pool of eligible values (cases whose questions are the pool).
POOL_FILE = "exam_recorded_pool.jsonl"


@dataclass(frozen=True)
class RecordedCases:
    """The recorded compactions of a run, their cases, and the sessions that gave none.

    ``pools`` maps a case id to its pool of eligible values (as questions), the whole population the
    case's questions were sampled from.
    """

    cases: tuple[Case, ...]
    sessions: Mapping[str, Session]
    found: pd.DataFrame
    skipped: pd.DataFrame
    notes: tuple[str, ...] = ()
    pools: Mapping[str, tuple[Question, ...]] = field(default_factory=dict)

    def describe(self) -> str:
        """How many real compactions the logs hold, how many questions they give, and every skip counted."""
        n = len(self.found)
        real = sum(len(c.real) for c in self.cases)
        decoys = sum(len(c.questions) for c in self.cases) - real
        line = f"Real compactions found in your logs: {n}" + (
            f" (in {_n(self.found['session_id'].nunique(), 'session')}): {_n(real, 'question')} and "
            f"{_n(decoys, 'decoy')} mined from the records before each"
            if n
            else ""
        )
        if len(self.skipped):
            counts = self.skipped["reason"].value_counts()
            line += f"\nSessions skipped (no recorded case): {len(self.skipped)}"
            line += "".join(f"\n  {k} × {reason}" for reason, k in counts.items())
        if n and real == 0:
            line += (
                "\nNo question could be asked: every question must point at an exact value before the recent "
                "tail (tail_tokens) of the compaction, and these sessions have none there."
            )
        return line + "".join(f"\n  {note}" for note in self.notes[:20])


def _n(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {word}s"


#: Segment kinds that carry a record as it was (what an agent kept verbatim).
VERBATIM_KINDS: tuple[str, ...] = ("tail", "user_original", "assistant_original")


def kept_region(session: Session, cut: int, projection: Projection) -> tuple[int, str, str]:
    """Where the verbatim region a projection kept before `cut` starts, its first entry, and its text.

    Returns
    -------
    (tail_start, kept_from, kept_text)
        ``tail_start``: the first source_order of the contiguous run of records just before the cut whose
        entries the projection carries verbatim (`cut` when it kept none there); ``kept_from``: the entry of
        the projection's first verbatim tail segment ("" when there is none); ``kept_text``: every verbatim
        segment's text (kept records elsewhere, e.g. Codex's kept user messages, disqualify their values too).
    """
    verbatim = [seg for seg in projection.segments if seg.kind in VERBATIM_KINDS]
    kept = {e for seg in verbatim for e in seg.entry_ids}
    start = cut
    for r in reversed([r for r in session.records if r.source_order < cut]):
        if r.kind in ("meta", "system"):  # bookkeeping and the system prompt are neither kept nor dropped
            continue
        if r.entry_id not in kept:
            break
        start = r.source_order
    tails = [seg for seg in projection.segments if seg.kind == "tail" and seg.entry_ids]
    return start, (tails[0].entry_ids[0] if tails else ""), _SEP.join(seg.text for seg in verbatim)


_SEP = "\n\x00\n"  # joins kept texts so that no value straddles two


def _pool_held(pool: Sequence[Question], text: str) -> int:
    """How many values of the pool `text` holds (the grader's normalised containment, aliases included)."""
    hay = normalise(text)  # once: a projection is normalised per pool, not per value (`grading.contains_answer`)
    return sum(1 for q in pool if any(form in hay for form in accepted(q)))


def _pool_scope_held(pool: Sequence[Question], p: Projection) -> int:
    """How many values of the pool a projection keeps by design, outside its summary text (`found.regions`)."""
    where = found.regions(p)
    return sum(1 for q in pool if found.found_in(q, where) in found.SCOPE_FOUND)


def build(
    session_list: Sequence[Session],
    params: Mapping[str, Any],
    saved: Mapping[str, Case] | None = None,
    saved_pools: Mapping[str, Case] | None = None,
    ctx: CompactionContext | None = None,
) -> RecordedCases:
    """One case per recorded compaction of `session_list` (questions mined before it); skips counted.

    Parameters
    ----------
    session_list : sessions of the run
    params : notebook / profile parameters (`probes.ProbeSpec` keys: ``probe_n_questions``,
        ``probe_n_decoys``, ``tail_tokens``, ``seed``, ...; ``window`` and ``output_ceiling``).
    saved : mapping of case id to Case, optional
        A saved bank: its cases are used as they are (nothing is mined again) and a compaction
        it does not hold gives no case.
    saved_pools : mapping of case id to Case, optional
        The saved pools (`POOL_FILE`) beside a saved bank.
    ctx : CompactionContext, optional
        Reads the agent's next request (`strategies.arms.recorded`); default from `params`.
    """
    session_list = excerpt.for_stage(session_list, "the recorded exam")
    spec = probes.ProbeSpec.from_mapping(probe_params(params))
    ctx = ctx or cuts.context_of(dict(params))
    cases: list[Case] = []
    pools: dict[str, tuple[Question, ...]] = {}
    found_rows: list[dict[str, Any]] = []
    skips: list[dict[str, Any]] = []
    notes: list[str] = []
    for s in session_list:
        compactions, problems = rec.find(s)
        notes += [f"{s.id}: {p}" for p in problems]
        if not compactions:
            skips.append({"session_id": s.id, "source_format": s.source_format, "reason": rec.skip_reason(s)})
            continue
        for rc in compactions:
            case_id = f"{s.id}-recorded-{rc.index}"
            if saved is not None and case_id not in saved:
                continue
            nxt = strategies.compact(s, "recorded", rc.cut, ctx)
            tail_start, kept_from, kept_text = kept_region(s, rc.cut, nxt)
            if saved is not None:
                case = saved[case_id]
                pool = (saved_pools or {}).get(case_id)
                pool_qs = pool.questions if pool is not None else ()
            else:
                mined = probes.mine(s, spec, case_id=case_id, cut=rc.cut, tail_start=tail_start, kept=kept_text)
                notes += list(mined.notes)
                case, pool_qs = mined.case, tuple(mined.pool)
            cases.append(case)
            pools[case_id] = pool_qs
            readable = [seg for seg in nxt.segments if seg.kind == "summary" and not seg.opaque]
            opaque = [seg for seg in nxt.segments if seg.kind == "summary" and seg.opaque]
            summary = _SEP.join(seg.text for seg in readable)
            whole = _SEP.join(seg.text for seg in nxt.segments)
            held = cal.live_request_tokens(s, rc.cut, ctx)
            calibrated = cal.calibrate(s, ctx)
            found_rows.append(
                {
                    **_found_row(case, rc),
                    "tokens": held,
                    "tokens_model": calibrated.tokens(held),
                    "calibration": calibrated.value,
                    "tokens_before": cal.tokens_before(s, rc.cut),
                    "tail_start": tail_start,
                    "kept_from": kept_from,
                    "eligible_values": len(pool_qs),
                    # an encrypted summary is not readable: no count of what it holds, not even 0
                    "eligible_in_summary": _pool_held(pool_qs, summary) if readable or not opaque else pd.NA,
                    "recorded_pool_recall": _pool_held(pool_qs, whole) / len(pool_qs) if pool_qs else float("nan"),
                    "summary_readable": not opaque,
                    "opaque_summary_tokens": sum(seg.tokens for seg in opaque),
                }
            )
    return RecordedCases(
        tuple(cases),
        {s.id: s for s in session_list},
        pd.DataFrame(found_rows, columns=FOUND_COLUMNS).astype(
            {"eligible_in_summary": "Int64", "tokens_before": "Int64", "calibration": "float64"}
        ),
        pd.DataFrame(skips, columns=SKIP_COLUMNS),
        tuple(notes),
        pools,
    )


def _found_row(case: Case, rc: rec.RecordedCompaction) -> dict[str, Any]:
    return {
        "case_id": case.id,
        "session_id": rc.session_id,
        "agent": rc.agent,
        "model": rc.model or rec.UNKNOWN_MODEL,
        "label": rc.label,
        "compaction": rc.index,
        "compaction_entry": rc.entry_id,
        "cut": rc.cut,
        "after": rc.after,
        "questions": len(case.real),
        "decoys": len(case.questions) - len(case.real),
    }


def for_run(run_dir: Path, params: Mapping[str, Any]) -> RecordedCases:
    """Return the recorded cases of the sessions notebook 01 wrote into `run_dir` (reusing a saved bank)."""
    run_dir = Path(run_dir)
    session_list = sources.load_saved(run_dir, stage="the recorded exam")
    saved = run_dir / BANK_FILE
    pools = run_dir / POOL_FILE
    if saved.exists():
        # The bank decides the questions (a rerun asks exactly the same, nothing is mined again);
        # where the compactions are still comes from the logs.
        saved_pools = {c.id: c for c in bank_from_jsonl(pools.read_bytes())} if pools.exists() else {}
        return build(session_list, params, {c.id: c for c in bank_from_jsonl(saved.read_bytes())}, saved_pools)
    built = build(session_list, params)
    write_bank(built.cases, saved)
    pool_cases = [
        Case(id=c.id, session_id=c.session_id, cut=c.cut, tail_start=c.tail_start, questions=built.pools[c.id])
        for c in built.cases
    ]
    write_bank(pool_cases, pools)
    return built


@dataclass(frozen=True)
class RecordedResult:
    """The recorded exam's answers (`closed.ANSWER_COLUMNS`), projections and the per-compaction table."""

    answers: pd.DataFrame
    projections: pd.DataFrame
    table: pd.DataFrame


def run(
    rc: RecordedCases,
    names: Sequence[str] | None,
    ctx: CompactionContext,
    reader: Any,
    progress: bool = False,
    *,
    n_boot: int = 2000,
    seed: int = 7,
    draws: int = 1,
) -> RecordedResult:
    """Answer every recorded case from the agent's own next request and from every arm at the same cut.

    Parameters
    ----------
    rc : the run's recorded cases
    names : listed arms to compare (None: every listed strategy); ``recorded`` always comes first
    ctx, reader, draws : as for `closed.run_closed` (each question asked `draws` times, a model reader only)
    n_boot, seed : resampling of each row's 95% interval (`stats.recall_table`, unit "session")
    """
    run_strategies = ["recorded"] + [n for n in (names or strategies.names()) if n != "recorded"]
    if not rc.cases:
        empty = closed.run_closed((), rc.sessions, run_strategies, ctx, reader, draws=draws)
        return RecordedResult(empty.answers, empty.projections, pd.DataFrame(columns=TABLE_COLUMNS))
    measured: dict[tuple[str, str], dict[str, Any]] = {}
    by_id = {c.id: c for c in rc.cases}

    def measure(case: Case, p: Projection) -> None:
        pool = rc.pools.get(case.id, ())
        whole = _SEP.join(seg.text for seg in p.segments)
        _, kept_from, _ = kept_region(rc.sessions[case.session_id], by_id[case.id].cut, p)
        measured[(case.id, p.strategy)] = {
            "pool_retained": _pool_held(pool, whole),
            "pool_scope_retained": _pool_scope_held(pool, p),
            "pool_n": len(pool),
            "kept_from": kept_from,
            "summary_opaque": any(seg.opaque for seg in p.segments if seg.kind == "summary"),
        }

    res = closed.run_closed(
        rc.cases, rc.sessions, run_strategies, ctx, reader, progress=progress, on_projection=measure, draws=draws
    )
    table = comparison_table(res.answers, rc.found, n_boot, seed, measured)
    return RecordedResult(res.answers, res.projections, table)


def comparison_table(
    answers: pd.DataFrame,
    found: pd.DataFrame,
    n_boot: int = 2000,
    seed: int = 7,
    measured: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Per recorded compaction x arm: retained of N with its 95% interval, decoys, projection size, the pool.

    ``recorded`` marks the agent's own compaction; ``own_agent`` the arm that
    reimplements the agent that wrote it, with ``kept_match`` / ``kept_note``
    (see the module docstring). `measured` holds, per (case, arm), what
    `run` read off each projection: ``pool_retained``, ``pool_scope_retained`` (pool values it keeps by
    design, outside its summary text), ``pool_n``, ``kept_from``, ``summary_opaque``. Each row carries the
    two parts of its recall (`PART_COPIED`, from `stats.recall_table`): scope and summary, each with its
    95% interval, and ``summary_by`` (for the ``recorded`` arm, the agent's own summary's label).
    """
    measured = measured or {}
    rows = []
    for _, f in found.iterrows():
        g = answers[answers["case_id"] == f["case_id"]]
        if g.empty:
            continue
        seen = _model_view(g)
        for _, r in stats.recall_table(g, n_boot=n_boot, seed=seed, unit="session").iterrows():
            m = measured.get((f["case_id"], r["strategy"]), {})
            pool_n = int(m.get("pool_n", 0))
            own = r["strategy"] == f["agent"]
            match, note = _kept_check(own, str(f.get("kept_from", "")), m.get("kept_from"))
            rows.append(
                {
                    "case_id": f["case_id"],
                    "session_id": f["session_id"],
                    "agent": f["agent"],
                    "model": f["model"],
                    "compaction": int(f["compaction"]),
                    "strategy": r["strategy"],
                    "strategy_label": r["strategy_label"],
                    "recorded": r["strategy"] == "recorded",
                    "own_agent": own,
                    **{
                        k: r[k]
                        for k in (
                            "retained",
                            "n",
                            "recall",
                            "ci_low",
                            "ci_high",
                            *PART_COPIED,
                            "decoys_fallen",
                            "decoys_n",
                            "projection_tokens",
                            "over_window",
                            "n_records",
                            "ci_method",
                        )
                    },
                    **seen.get(r["strategy"], {}),
                    "pool_retained": int(m["pool_retained"]) if m else pd.NA,
                    "pool_scope_retained": int(m["pool_scope_retained"]) if "pool_scope_retained" in m else pd.NA,
                    "pool_n": pool_n if m else pd.NA,
                    "pool_recall": m["pool_retained"] / pool_n if m and pool_n else float("nan"),
                    "kept_from": m.get("kept_from", ""),
                    "kept_match": match,
                    "kept_note": note,
                    "summary_opaque": bool(m.get("summary_opaque", False)),
                }
            )
    df = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    df["best_other"] = best_other(df)
    return df.astype(
        {
            "pool_retained": "Int64",
            "pool_scope_retained": "Int64",
            "scope_retained": "Int64",
            "summary_retained": "Int64",
            "pool_n": "Int64",
            "kept_match": "boolean",
            "projection_tokens_model": "Int64",
            "compacted": "boolean",
            "over_window": "bool",
            "best_other": "bool",
        }
    )


def _model_view(answers: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per arm of one case: its projection in the model's tokens and whether it compacted (from the answers)."""
    out: dict[str, dict[str, Any]] = {}
    for name, g in answers.groupby("strategy", sort=False):
        row: dict[str, Any] = {}
        if "projection_tokens_model" in g:
            row["projection_tokens_model"] = int(g["projection_tokens_model"].max())
        if "compacted" in g:
            row["compacted"] = bool(g["compacted"].astype(bool).all())
        out[str(name)] = row
    return out


def may_be_best(table: pd.DataFrame) -> pd.Series:
    """Which rows of an ``exam_recorded`` table may be named the "best other arm" of their compaction.

    Not the agent's own compaction (``recorded``) nor its reimplementation (``own_agent``), not the
    uncompacted reference, not an arm that did not compact there (``compacted`` False: it kept the
    history as it was), and not one over the window (``over_window``: it could not have been sent).
    """
    if table.empty:
        return pd.Series([], dtype=bool, index=table.index)
    compacted = table["compacted"].astype("boolean").fillna(True) if "compacted" in table else True
    over = table["over_window"].astype("boolean").fillna(False) if "over_window" in table else False
    ok = (
        ~table["recorded"].astype(bool)
        & ~table["own_agent"].astype(bool)
        & (table["strategy"] != UNCOMPACTED_REFERENCE)
        & compacted
        & ~over
    )
    return ok.astype(bool)


def best_other(table: pd.DataFrame) -> pd.Series:
    """Mark, per compaction, the one arm a report names "best other arm" (`may_be_best`; most recall, smallest).

    Ties on recall go to the smaller projection (``projection_tokens``), then to table order. A compaction
    where no arm may be named has none marked.
    """
    mark = pd.Series(False, index=table.index, dtype=bool)
    if table.empty:
        return mark
    ok = may_be_best(table)
    for _, g in table[ok & (table["n"].astype(int) > 0)].groupby("case_id", sort=False):
        top = g.sort_values(["recall", "projection_tokens"], ascending=[False, True], kind="stable")
        mark.loc[top.index[0]] = True
    return mark


def _kept_check(own: bool, logged: str, reimplemented: str | None) -> tuple[Any, str]:
    """(kept_match, kept_note) for an arm: only the agent's own reimplementation is compared with its log."""
    if not own or reimplemented is None:
        return pd.NA, ""
    if reimplemented == logged:
        where = f"entry {logged}" if logged else "no verbatim tail"
        return True, f"kept region as in the log ({where})"
    return False, (
        f"not a like-for-like check: the log kept from {('entry ' + logged) if logged else 'nothing'}, the "
        f"reimplementation from {('entry ' + reimplemented) if reimplemented else 'nothing'} (its trigger, "
        "budgets or summary differ from the recorded run's)"
    )


def for_source(source: Source, params: Mapping[str, Any]) -> RecordedCases:
    """Return the recorded cases of a run folder's sessions, or of sessions gathered in memory.

    A run folder keeps their bank and pools (`for_run`: saved the first time, reused after); gathered
    sessions get theirs built and nothing is written (`build`).
    """
    if isinstance(source, Sources):
        return build(list(source.sessions), params)
    return for_run(Path(source), params)


# --------------------------------------------------------------------------- the recorded block as an `Exam`


@EXAMS.register("recorded", rank=20, notebook="03_closed_book_exam")
class RecordedExam(Exam[RecordedCases, RecordedResult]):
    """The recorded block (notebook 03's last): the compactions real agents made, examined (`run`).

    Parameters as the closed book's (`exam.ExamParams`): the arms beside the agent's own next request
    (``strategy_names``), the reader, the probes mined before each compaction. Tables:
    ``recorded_compactions`` (`FOUND_COLUMNS`), ``recorded_skipped`` (`SKIP_COLUMNS`),
    ``exam_recorded_answers`` (`closed.ANSWER_COLUMNS`) and ``exam_recorded`` (`TABLE_COLUMNS`).
    """

    writes = ("recorded_compactions", "recorded_skipped", "exam_recorded_answers", "exam_recorded")
    own_cells = True  # notebook 03's last cells (the closed book's context shared)

    def cases(self, source: Source, params: ExamParams) -> RecordedCases:
        """Return one case per recorded compaction (`for_source`), the skipped sessions counted."""
        return for_source(source, params.case_params())

    def grade(
        self, cases: RecordedCases, params: ExamParams, ctx: CompactionContext, *, progress: bool = False
    ) -> RecordedResult:
        """Answer every case from the agent's next request and from every arm at its cut (`run`)."""
        reader = readers.get_reader(params.reader, **params.reader_options())
        return run(
            cases,
            params.names,
            ctx,
            reader,
            progress=progress,
            n_boot=params.n_boot,
            seed=params.stats_seed,
            draws=params.draws,
        )

    def tables(self, cases: RecordedCases, result: RecordedResult, params: ExamParams) -> dict[str, pd.DataFrame]:
        """Return the compactions found, the sessions skipped, the answers and the per-compaction table."""
        return {
            "recorded_compactions": cases.found,
            "recorded_skipped": cases.skipped,
            "exam_recorded_answers": result.answers,
            "exam_recorded": result.table,
        }


__all__ = [
    "BANK_FILE",
    "PART_COPIED",
    "POOL_FILE",
    "VERBATIM_KINDS",
    "kept_region",
    "FOUND_COLUMNS",
    "RecordedCases",
    "RecordedExam",
    "RecordedResult",
    "SKIP_COLUMNS",
    "TABLE_COLUMNS",
    "best_other",
    "build",
    "comparison_table",
    "for_run",
    "for_source",
    "may_be_best",
    "run",
]
