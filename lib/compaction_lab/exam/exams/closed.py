"""The closed-book exam: compact each case with each strategy, let a reader answer from the projection.

For every case x strategy the session is compacted once at the case's cut;
the reader sees only the projection's chat messages (`Projection.messages`)
and answers each of the case's questions; `grading.grade` decides whether the
answer is right (for a decoy: whether the reader abstained). Nothing else of
the session is visible, so a real question is retained only if the
projection kept its value.

Two tables come back (`ClosedResult`): one row per strategy x question
(`ANSWER_COLUMNS`) and one row per case x strategy (`PROJECTION_COLUMNS`).
Stand-ins are labelled in both: the strategy label names a stand-in summary
(`labels.strategy_label`), the reader label is the reader's own (the verbatim
reader's says it is the retention ceiling, the searcher's that it is a stand-in).

Reader usage (``input_tokens``, ``tool_calls``) is not tabulated here: on the
closed arm there are no tool calls, and a stand-in's input size is the
projection plus the question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.exam import found, readers, tasks
from compaction_lab.exam.exam import EXAMS, Exam, ExamParams, Source
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.questions.cases import RunCases
from compaction_lab.exam.statistics import power, stats
from compaction_lab.exam.types import Case, Question
from compaction_lab.strategies import calibration
from compaction_lab.strategies.base import UNCOMPACTED_REFERENCE, CompactionContext, compacted
from compaction_lab.strategies.labels import strategy_label

T = TypeVar("T")

#: Columns of `ClosedResult.answers`, in order: one row per strategy x question.
ANSWER_COLUMNS: list[str] = [
    "strategy",
    "strategy_label",
    "reader",
    "reader_label",
    "session_id",
    "case_id",
    "question_id",
    "source_order",
    "pointer",
    "category",
    "decoy",
    "answer",
    "given",
    "correct",
    "found_in",
    "summary_by",
    "projection_tokens",
    "projection_tokens_model",
    "over_window",
    "compacted",
    "draw",
]

#: Columns of `ClosedResult.projections`, in order: one row per case x strategy.
PROJECTION_COLUMNS: list[str] = [
    "case_id",
    "strategy",
    "strategy_label",
    "algorithm_version",
    "tokens",
    "tokens_model",
    "calibration",
    "capacity",
    "usable_capacity",
    "over_window",
    "compacted",
    "estimator",
    "summarizer",
    "stand_in",
    "fallback",
    "summary_failed",
    "compaction_failed",
]


@dataclass(frozen=True)
class ClosedResult:
    """What a closed-book run produced.

    Attributes
    ----------
    answers : DataFrame
        One row per strategy x question (`ANSWER_COLUMNS`). ``correct`` is the
        grade: for a real question, the value was retained; for a decoy, the
        reader abstained. ``projection_tokens`` is the report-token size of the
        projection the reader saw, ``projection_tokens_model`` the same in the agent's model's tokens
        (`strategies.calibration`: calibrated by the session's own usage, as is without); ``over_window``
        says that is larger than the usable capacity W − O (`usable_capacity`): a request the agent could
        never have sent; ``compacted`` is False where the arm kept the uncompacted history (the
        uncompacted reference, a failed summary, an arm that found room: `strategies.base.compacted`). ``session_id`` and
        ``source_order`` (the answer's record; -1 for decoys) are the units the intervals resample.
        ``found_in`` says where the value is in the projection (`found.found_in`: ``verbatim``, ``summary``,
        ``both`` or ``nowhere``) and ``summary_by`` who wrote its summary text (`found.summary_by`).
    projections : DataFrame
        One row per case x strategy (`PROJECTION_COLUMNS`): how big the
        projection was, the room its strategy believed it had (``capacity``, in its own estimator's
        units), its size in the model's tokens (``tokens_model``) and the session's ``calibration`` factor
        (null: uncalibrated), the usable capacity W − O and whether the projection exceeds it
        (``over_window``, the model's tokens), whether the arm ``compacted``, and who wrote its summary (summarizer, stand-in, fallback).
        ``summary_failed`` is why the arm's summary call failed (the receipt's error), else empty;
        ``compaction_failed`` is the reason the arm's agent did not compact (as its pinned code does, it
        sent the history unchanged: `strategies.base.COMPACTION_FAILED`), else empty. A failed summary
        with no ``compaction_failed`` is an arm that compacted without one (its fallback, or OpenCode's
        pinned code dropping the head).
    """

    answers: pd.DataFrame
    projections: pd.DataFrame


def reader_name(reader: Any) -> str:
    """Return the reader's short name (``name`` attribute, else its class name)."""
    return str(getattr(reader, "name", None) or type(reader).__name__)


def reader_label(reader: Any, stand_in: bool = False) -> str:
    """How tables show the reader: its own ``label`` (which already says what it is), else its name.

    Parameters
    ----------
    reader : object
    stand_in : bool
        The answer came from an offline stand-in: a reader without a label
        of its own is shown as ``"<name> (stand-in)"``.
    """
    label = getattr(reader, "label", None)
    if label:
        # `readers.Reader` labels say "stand-in" or name the role ("... (retention ceiling)").
        return str(label)
    name = reader_name(reader)
    return f"{name} (stand-in)" if stand_in else name


def usable_capacity(ctx: CompactionContext) -> int:
    """W − O in the model's tokens: the most a request may hold and still leave room for the reply."""
    return calibration.usable_capacity(ctx)


def sizes(p: Projection, session: Session | None, ctx: CompactionContext) -> dict[str, Any]:
    """Return the model's view of a projection: calibrated size, factor, ``over_window``, ``compacted``.

    Without the session (a caller that has none) the size is the report tokens, uncalibrated, and
    ``compacted`` is read from the projection alone (the uncompacted reference and a failed summary did not).
    """
    if session is None:
        model, factor = p.tokens, None
        did = p.strategy != UNCOMPACTED_REFERENCE and not p.notes.get("compaction_failed")
    else:
        cal = calibration.calibrate(session, ctx)
        model, factor, did = cal.tokens(p.tokens), cal.value, compacted(p, session)
    return {
        "tokens_model": model,
        "calibration": factor,
        "over_window": model > usable_capacity(ctx),
        "compacted": bool(did),
    }


def projection_row(
    case_id: str, p: Projection, ctx: CompactionContext, session: Session | None = None
) -> dict[str, Any]:
    """One `PROJECTION_COLUMNS` row for a case's projection (`sizes` reads the session, when given)."""
    r = p.receipt
    cap = usable_capacity(ctx)
    return {
        "case_id": case_id,
        "strategy": p.strategy,
        "strategy_label": strategy_label(p),
        "algorithm_version": p.algorithm_version,
        "tokens": p.tokens,
        **sizes(p, session, ctx),
        "capacity": p.capacity,
        "usable_capacity": cap,
        "estimator": p.estimator,
        # No receipt: the strategy never asked for a summary (full, truncate-oldest, deterministic ...).
        "summarizer": r.summarizer if r is not None else None,
        "stand_in": bool(r.stand_in) if r is not None else False,
        "fallback": bool(r.fallback) if r is not None else False,
        "summary_failed": (r.error or "summary unavailable") if r is not None and r.fallback else "",
        "compaction_failed": str(p.notes.get("compaction_failed") or ""),
    }


def answer_row(
    case: Case,
    q: Question,
    p: Projection,
    reader: Any,
    given: str,
    stand_in: bool,
    correct: bool,
    ctx: CompactionContext,
    seen: Mapping[str, Any] | None = None,
    regions: found.Regions | None = None,
) -> dict[str, Any]:
    """One `ANSWER_COLUMNS` row; `seen` is the projection's `sizes` (uncalibrated when not given).

    `regions` is the projection's text by origin (`found.regions`, computed here when not given): the row's
    ``found_in`` says where the value is, ``summary_by`` who wrote the summary text.
    """
    seen = seen if seen is not None else sizes(p, None, ctx)
    regions = regions if regions is not None else found.regions(p)
    return {
        "strategy": p.strategy,
        "strategy_label": strategy_label(p),
        "reader": reader_name(reader),
        "reader_label": reader_label(reader, stand_in),
        "session_id": case.session_id,
        "case_id": case.id,
        "question_id": q.id,
        "source_order": int(q.source_order),
        "pointer": q.pointer,
        "category": q.category,
        "decoy": bool(q.decoy),
        "answer": q.answer,
        "given": given,
        "correct": bool(correct),
        "found_in": found.found_in(q, regions),
        "summary_by": regions.summary_by,
        "projection_tokens": p.tokens,
        "projection_tokens_model": int(seen["tokens_model"]),
        "over_window": bool(seen["over_window"]),
        "compacted": bool(seen["compacted"]),
    }


def check_draws(draws: Any, reader: Any) -> int:
    """Return `draws` as an int when `reader` can be asked that many times; raise a ValueError naming ``draws``.

    A stand-in answers every draw alike, so more than one draw would only repeat its rows (and narrow no
    interval honestly): ``draws`` above 1 needs a model reader.
    """
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a whole number >= 1, got {draws!r}")
    if draws > 1 and bool(getattr(reader, "stand_in", False)):
        raise ValueError(
            f"draws={draws} needs a model reader: the {reader_label(reader, True)} answers every draw alike "
            "(set reader: model, or draws: 1)"
        )
    return draws


def _default_grader() -> Callable[[Question, str], bool]:
    from compaction_lab.exam.grading import grade

    return grade


def answer_all(reader: Any, questions: Sequence[T], ask: Callable[[T], Any]) -> list[Any]:
    """Return ``ask(q)`` for every question (or question and draw, or question and its facts), in order.

    A reader with ``concurrency > 1`` (a model reader: its endpoint's limit) is asked that many at a time,
    offline stand-ins one by one.
    """
    n = int(getattr(reader, "concurrency", 1) or 1)
    if n <= 1 or len(questions) <= 1:
        return [ask(q) for q in questions]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(n, len(questions))) as pool:
        return list(pool.map(ask, questions))


def _closed_one(
    case: Case,
    name: str,
    session: Session,
    ctx: CompactionContext,
    reader: Any,
    grade: Callable[[Question, str], bool],
    draws: int,
    on_projection: Callable[[Case, Projection], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One case x strategy of `run_closed`: compact once, answer every question (every draw), grade."""
    # One compaction per case x strategy: a summarising strategy would otherwise be billed per question.
    p = strategies.compact(session, name, case.cut, ctx)
    seen = sizes(p, session, ctx)
    projection = {**projection_row(case.id, p, ctx), **seen}
    if on_projection is not None:
        on_projection(case, p)
    messages = p.messages()
    where = found.regions(p)
    shape_tools = ctx.shape.for_session(session).tools

    def ask(
        asked: tuple[Question, int],
        m: list[dict[str, Any]] = messages,
        t: tuple[Mapping[str, Any], ...] = shape_tools,
    ) -> Any:
        q, d = asked
        # Draw 0 is asked as before draws existed (any reader takes it); a later one names its draw.
        return reader.answer(m, q, shape_tools=t, draw=d) if d else reader.answer(m, q, shape_tools=t)

    answers = []
    asked = [(q, d) for q in case.questions for d in range(draws)]
    for (q, d), a in zip(asked, answer_all(reader, asked, ask), strict=False):
        row = answer_row(case, q, p, reader, a.given, bool(a.stand_in), grade(q, a.given), ctx, seen, where)
        answers.append({**row, "draw": d})
    return answers, projection


def _closed_case(
    item: tuple[Case, Session],
    names: Sequence[str],
    ctx: CompactionContext,
    reader: Any,
    grade: Callable[[Question, str], bool],
    draws: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every strategy of one case (`_closed_one` in `names` order): one engine task of `run_closed`."""
    case, session = item
    answers: list[dict[str, Any]] = []
    projections: list[dict[str, Any]] = []
    for name in names:
        one_answers, one_projection = _closed_one(case, name, session, ctx, reader, grade, draws)
        answers += one_answers
        projections.append(one_projection)
    return answers, projections


def run_closed(
    cases: Sequence[Case],
    sessions: Mapping[str, Session],
    names: Sequence[str] | None,
    ctx: CompactionContext,
    reader: Any,
    progress: bool = False,
    *,
    grader: Callable[[Question, str], bool] | None = None,
    on_projection: Callable[[Case, Projection], None] | None = None,
    draws: int = 1,
) -> ClosedResult:
    """Run the closed-book exam: every case x strategy compacted once, every question answered from it.

    Parameters
    ----------
    cases : sequence of Case
    sessions : mapping of str to Session
        Sessions by id; each case's ``session_id`` must be present.
    names : sequence of str
        Strategy names (see `strategies.names`), in the order tables list them.
    ctx : CompactionContext
        Window, output ceiling, call shape and summarizer for every compaction.
    reader : readers.Reader
        ``reader.answer(messages, question, shape_tools=...) -> ReaderAnswer``;
        no open-book tools are given (this is the closed arm). ``shape_tools``
        are the call shape's tool definitions, which `Projection.messages`
        leaves out because a harness sends them beside the messages.
    progress : bool
        Show a progress bar over case x strategy.
    grader : callable, optional
        ``grader(question, given) -> bool``; default `grading.grade`.
    on_projection : callable, optional
        ``on_projection(case, projection)`` for every projection made (the recorded block measures each
        against its pool of eligible values and reads what it kept).
    draws : int
        Times each question is asked of each projection (a model reader at a temperature answers
        differently from one draw to the next); draw ``d`` is passed to the reader as ``draw=d`` from the
        second on, so each is a request of its own. One row per draw (``draw``: 0, 1, ...).

    Returns
    -------
    ClosedResult
        Rows ordered case, then strategy (in `names` order), then question, then draw.

    Raises
    ------
    ValueError
        When `draws` is below 1, or above 1 with a stand-in reader (it answers the same every time: more
        draws would only repeat its rows).
    """
    check_draws(draws, reader)
    grade = grader or _default_grader()
    missing = sorted({c.session_id for c in cases} - set(sessions))
    if missing:
        raise KeyError(f"sessions missing for cases: {', '.join(missing)}")
    names = list(names or strategies.names())  # empty / None: every registered strategy
    answers: list[dict[str, Any]] = []
    projections: list[dict[str, Any]] = []
    if on_projection is None and tasks.given_scheduler() is not None:
        # One task per case on the engine; its rows come back in case order, as the loop below makes them.
        items = [(c, sessions[c.session_id]) for c in cases]
        for case_answers, case_projections in tasks.each(
            _closed_case, items, names, ctx, reader, grade, draws, progress=progress, desc="closed book", unit="case"
        ):
            answers += case_answers
            projections += case_projections
    else:
        work = [(c, n) for c in cases for n in names]
        it: Any = work
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(work, desc="closed book", unit="projection")
        for case, name in it:
            one_answers, one_projection = _closed_one(
                case, name, sessions[case.session_id], ctx, reader, grade, draws, on_projection
            )
            answers += one_answers
            projections.append(one_projection)
    ans = pd.DataFrame(answers, columns=ANSWER_COLUMNS).astype(
        {
            "decoy": "bool",
            "correct": "bool",
            "projection_tokens": "int64",
            "projection_tokens_model": "int64",
            "source_order": "int64",
            "over_window": "bool",
            "compacted": "bool",
            "draw": "int64",
        }
    )
    proj = pd.DataFrame(projections, columns=PROJECTION_COLUMNS).astype(
        {
            "tokens": "int64",
            "tokens_model": "int64",
            "calibration": "float64",
            "capacity": "int64",
            "usable_capacity": "int64",
            "over_window": "bool",
            "compacted": "bool",
            "stand_in": "bool",
            "fallback": "bool",
        }
    )
    return ClosedResult(answers=ans, projections=proj)


def with_compacted(table: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Add ``compacted`` to a per-arm table: True only if the arm compacted in every case it was examined in.

    The uncompacted reference never did; an arm that kept the whole history at some cut (it found room, or
    its summary failed) did not compact there, and a table that ranks it says so.
    """
    if "strategy" not in table.columns:
        return table
    out = table.copy()
    if "compacted" not in answers.columns or answers.empty:
        out["compacted"] = out["strategy"] != UNCOMPACTED_REFERENCE
        return out
    every = answers.groupby("strategy", sort=False)["compacted"].agg(lambda c: bool(c.astype(bool).all()))
    out["compacted"] = out["strategy"].map(every).fillna(False).astype(bool)
    return out


def draws_tables(
    answers: pd.DataFrame, *, unit: str = "question", n_boot: int = 2000, seed: int = 7
) -> dict[str, pd.DataFrame]:
    """Return the tables of a closed book asked several times per question (real questions only), per reader.

    ``exam_draws`` (`power.draw_recall_table`): per arm, recall over every draw with its hierarchical
    interval and ``consistent``, the share of questions whose draws all agree. ``exam_power``
    (`power.power_table`): per pair of arms, the minimum detectable difference at 80% power for these
    questions and draws, whether the observed difference reaches it, and how many questions or draws would.
    """
    real = answers[~answers["decoy"].astype(bool)]
    cluster = "session_id" if unit == "session" else None
    by = ["reader", "reader_label", "strategy", "strategy_label"]
    draws, pairs = [], []
    for (reader, label), g in real.groupby(["reader", "reader_label"], sort=False):
        draws.append(power.draw_recall_table(g, by=by, cluster=cluster, n_boot=n_boot, seed=seed))
        pairs.append(power.power_table(g).assign(reader=reader, reader_label=label))
    power_rows = pd.concat(pairs, ignore_index=True) if pairs else pd.DataFrame()
    if len(power_rows):
        power_rows = power_rows[
            ["reader", "reader_label", *[c for c in power_rows.columns if c not in ("reader", "reader_label")]]
        ]
    return {
        "exam_draws": pd.concat(draws, ignore_index=True) if draws else pd.DataFrame(columns=by),
        "exam_power": power_rows,
    }


# --------------------------------------------------------------------------- the closed book as an `Exam`


@EXAMS.register("closed", rank=10, notebook="03_closed_book_exam")
class ClosedBookExam(Exam[RunCases, ClosedResult]):
    """The closed-book exam (notebook 03, ``compaction-lab exam``): `run_closed` and its statistics.

    Cases are the run's (`cases.for_run`: the synthetic bank, or probes mined from imported sessions);
    every case is compacted once per arm (``strategy_names``) and the reader (``reader``, the verbatim
    retention ceiling by default) answers from each projection. Tables: ``exam_closed`` (the answers,
    `ANSWER_COLUMNS`), ``exam_projections`` (`PROJECTION_COLUMNS`), ``exam_recall`` (`stats.recall_table`),
    ``exam_by_session``, ``exam_paired`` and ``exam_sensitivity`` (the ranking against the question mix).
    """

    writes = ("exam_closed", "exam_projections", "exam_recall", "exam_by_session", "exam_paired", "exam_sensitivity")
    own_cells = True  # notebook 03's cells show its cases, answers and figures

    def cases(self, source: Source, params: ExamParams) -> RunCases:
        """Return the run's cases (`cases.for_source`: a run folder's saved bank, or one built and saved)."""
        return exam_cases.for_source(source, params.case_params())

    def grade(
        self, cases: RunCases, params: ExamParams, ctx: CompactionContext, *, progress: bool = False
    ) -> ClosedResult:
        """Compact every case with every arm and grade the reader's answers (`run_closed`), `params.draws` times."""
        reader = readers.get_reader(params.reader, **params.reader_options())
        return run_closed(cases.cases, cases.sessions, params.names, ctx, reader, progress=progress, draws=params.draws)

    def tables(self, cases: RunCases, result: ClosedResult, params: ExamParams) -> dict[str, pd.DataFrame]:
        """Return the answers, the projections, recall with intervals, per session, paired tests, the mix."""
        answers = result.answers
        mix, mix_label = cases.question_mix(params.pointer_mix)  # real logs: the pool's own; synthetic: the bank's
        out = {
            "exam_closed": answers,
            "exam_projections": result.projections,
            "exam_recall": with_compacted(
                stats.recall_table(answers, n_boot=params.n_boot, seed=params.stats_seed, unit=cases.unit), answers
            ),
            "exam_by_session": stats.session_table(answers),
            "exam_paired": stats.paired_table(answers, unit=cases.unit, seed=params.stats_seed),
            "exam_sensitivity": stats.sensitivity_table(answers, default_mix=mix, mix_label=mix_label),
        }
        if stats.draws_of(answers) > 1:
            out.update(draws_tables(answers, unit=cases.unit, n_boot=params.n_boot, seed=params.stats_seed))
        return out
