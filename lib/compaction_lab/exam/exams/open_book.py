"""The open-book exam: can searching the archive of originals recover what a compaction dropped.

`OpenBookExam` (registered as ``open_book``, parameters `OpenBookParams`) asks every question in five
rounds, each a variant of the instruction that accompanies it: 1–3 searching allowed
(``history_search`` / ``history_get`` in the call shape), three wordings; 4 the control, round 3's
wording on the closed arm (no tools); 5 searching required, an upper bound.

Every real question ends in exactly one outcome (`OUTCOMES`): ``from_projection`` (right; the value
in the projection, or no tool called), ``recovered_by_search`` (right; the value not in the
projection, the tools used), ``in_archive_never_looked`` (not in the projection, in the archive, the
entry holding it never fetched, and the reader abstained) or ``wrong`` (everything else); a decoy
ends in ``decoy_abstained`` or ``wrong``. A stand-in cannot fall for a decoy, so `outcome_table`
counts its decoys as not measured.

Offline, the reader is the `SearcherReader` stand-in, which never reads the wording: rounds 1–3 are
identical by construction (`stand_in_note`). Only a model reader can show whether wording changes
behaviour.

Design: docs/exams.md#8-open-book-notebook-05.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd

from compaction_lab.core import bounded_json
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.exam import readers
from compaction_lab.exam.exam import EXAMS, Exam, ExamParams, Source
from compaction_lab.exam.exams.closed import answer_all, check_draws
from compaction_lab.exam.grading import contains_answer, grade, in_normalised, is_abstention, normalise
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.questions.cases import RunCases
from compaction_lab.exam.readers import HistoryTools, Reader, SearcherReader, messages_text
from compaction_lab.exam.types import Case, Question
from compaction_lab.ingest.sources import Sources
from compaction_lab.store.archive import Archive
from compaction_lab.strategies.base import CompactionContext

#: The three "searching allowed" wordings of rounds 1–3 (our words), gentlest first.
DEFAULT_WORDINGS: tuple[str, str, str] = (
    "You can search the session history with history_search / history_get if needed.",
    "If the value is not in your context, search the session history with history_search and read the "
    "matching entries with history_get before you answer.",
    "Parts of this session were compacted and may be missing from your context, but the complete original "
    "history is still available: whenever the value is not in front of you, look it up with history_search "
    "and history_get instead of answering NOT_FOUND.",
)

#: Round 5's wording (our words): search before every answer.
REQUIRED_WORDING = (
    "Before answering, you must search the session history with history_search and read the most relevant "
    "entries with history_get, even if you believe the value is already in your context."
)

#: Outcomes in the order tables and fig 9 list them.
OUTCOMES: tuple[str, ...] = (
    "from_projection",
    "recovered_by_search",
    "in_archive_never_looked",
    "wrong",
    "decoy_abstained",
)

#: Columns of `run_open_book`'s frame, in order.
COLUMNS: list[str] = [
    "round",
    "wording",
    "book",
    "search",
    "strategy",
    "reader",
    "reader_label",
    "stand_in",
    "case_id",
    "question_id",
    "pointer",
    "category",
    "decoy",
    "answer",
    "given",
    "correct",
    "outcome",
    "in_projection",
    "in_archive",
    "looked_up",
    "tool_calls",
    "search_calls",
    "get_calls",
    "searched_entry_ids",
    "input_tokens",
    "output_tokens",
    "draw",
]

#: What the notebook prints under every open-book table and figure made with the offline reader.
stand_in_note = (
    "Offline reader: the searcher stand-in, not a model. It answers from the projection when the value is "
    "there and otherwise searches the archive with the question's content words and reads the top hits, "
    "as a diligent model would. It never reads the instruction wording, so rounds 1-3 are identical by "
    "construction and say nothing about whether wording changes a model's behaviour; round 4 (closed arm) "
    "shows what the projection alone holds and round 5 the reach of one search. Only a model reader "
    "can measure whether a model actually looks."
)
STAND_IN_NOTE = stand_in_note


@dataclass(frozen=True)
class Round:
    """One open-book round.

    Parameters
    ----------
    number : int
        1–5.
    wording : str
        The instruction appended to the question.
    book : str
        ``open`` (the history tools are offered) or ``closed`` (no tools): an open or a closed book.
    search : str
        The search mode a stand-in reader runs in: ``allowed``, ``required``, ``never``.
    title : str
        Short description for tables.
    """

    number: int
    wording: str
    book: str
    search: str
    title: str


def make_rounds(
    wordings: Sequence[str] = DEFAULT_WORDINGS, required_wording: str = REQUIRED_WORDING
) -> tuple[Round, ...]:
    """Return the five rounds for three "allowed" wordings.

    Parameters
    ----------
    wordings : sequence of 3 str
        Rounds 1–3; round 4 (the control) reuses the third.
    required_wording : str
        Round 5.
    """
    if len(wordings) != 3:
        raise ValueError(f"open book needs exactly three wordings, got {len(wordings)}")
    w1, w2, w3 = (str(w) for w in wordings)
    return (
        Round(1, w1, "open", "allowed", "allowed, wording 1"),
        Round(2, w2, "open", "allowed", "allowed, wording 2"),
        Round(3, w3, "open", "allowed", "allowed, wording 3"),
        Round(4, w3, "closed", "never", "control: wording 3, no tools"),
        Round(5, required_wording, "open", "required", "searching required (upper bound)"),
    )


def shape_tools_of(projection: Projection) -> tuple[Mapping[str, Any], ...]:
    """Return the call shape's tool definitions a projection carries (its ``tools`` segment, parsed), if any."""
    for seg in projection.segments:
        if seg.kind == "tools":
            try:
                tools = bounded_json.loads(seg.text)  # a captured shape's tools: refused if nested too deep
            except ValueError:
                return ()
            return tuple(t for t in tools if isinstance(t, Mapping)) if isinstance(tools, list) else ()
    return ()


def classify(
    question: Question,
    correct: bool,
    given: str,
    in_projection: bool,
    in_archive: bool,
    looked_up: bool,
    tool_calls: int,
) -> str:
    """Return the outcome of one answer (see the module docstring)."""
    if question.decoy:
        return "decoy_abstained" if correct else "wrong"
    if correct:
        return "recovered_by_search" if not in_projection and tool_calls > 0 else "from_projection"
    if not in_projection and in_archive and not looked_up and is_abstention(given):
        return "in_archive_never_looked"
    return "wrong"


def _sessions_by_id(sessions: Mapping[str, Session] | Iterable[Session]) -> dict[str, Session]:
    if isinstance(sessions, Mapping):
        return dict(sessions)
    return {s.id: s for s in sessions}


def _in_archive(archive: Archive, question: Question, session_id: str) -> bool:
    """Say whether the value is in the archived record it was planted in / mined from."""
    if question.decoy or not question.source_entry_id:
        return False
    records = archive.get(question.source_entry_id, session=session_id)
    return contains_answer(question, "\n\n".join(r.text for r in records))


# SearcherReader implements Reader; mypy rejects it only because its frozen dataclass fields are
# read-only where the Reader protocol declares plain (settable) attributes, and no reader is mutated.
_SEARCHER_FACTORY = cast(Callable[..., Reader], SearcherReader)


def run_open_book(
    cases: Sequence[Case],
    sessions: Mapping[str, Session] | Iterable[Session],
    projections: Mapping[str, Projection],
    archive: Archive,
    reader_factory: Callable[..., Reader] = _SEARCHER_FACTORY,
    wordings: Sequence[str] = DEFAULT_WORDINGS,
    k: int = 3,
    *,
    rounds: Sequence[Round] | None = None,
    add_missing: bool = True,
    progress: bool = False,
    draws: int = 1,
) -> pd.DataFrame:
    """Run the five open-book rounds: one row per round x question x draw.

    Parameters
    ----------
    cases : sequence of Case
    sessions : mapping of str to Session, or iterable of Session
        The cases' sessions; each case's ``session_id`` must be present.
    projections : mapping of str to Projection
        The projection each case is answered from (one arm, e.g. one
        strategy), by case id.
    archive : Archive
        The originals the tools search. Sessions it lacks are added first
        when `add_missing` (adding is idempotent).
    reader_factory : callable
        ``reader_factory(search=mode, k=k) -> Reader``, called once per round
        with the round's search mode (`SearcherReader` by default; a model
        reader's factory may ignore the mode: its round differs by wording).
    wordings : sequence of 3 str
        Rounds 1–3 (`make_rounds`); ignored when `rounds` is given.
    k : int
        Hits a reader reads after a search.
    rounds : sequence of Round, optional
        Override the rounds entirely.
    add_missing : bool
    progress : bool
    draws : int
        Times each question is asked in each round (``draw`` 0, 1, ...): each a request of its own, kept
        apart in the ledger; above 1 only with a model reader (`closed.check_draws`).

    Returns
    -------
    DataFrame
        `COLUMNS`; rows ordered round, case, question, draw. ``tool_calls`` counts
        every call, ``searched_entry_ids`` lists the entry ids any call
        returned (search hits and fetched entries), ``looked_up`` says whether
        the entry holding the value was fetched with ``history_get``.
    """
    rounds = tuple(rounds) if rounds is not None else make_rounds(wordings)
    by_id = _sessions_by_id(sessions)
    missing = sorted({c.session_id for c in cases} - set(by_id))
    if missing:
        raise KeyError(f"sessions missing for cases: {', '.join(missing)}")
    lacking = sorted(set(c.id for c in cases) - set(projections))
    if lacking:
        raise KeyError(f"projections missing for cases: {', '.join(lacking)}")
    archived = {s["session_id"] for s in archive.sessions()}
    absent = [by_id[sid] for sid in dict.fromkeys(c.session_id for c in cases) if sid not in archived]
    if absent:
        if not add_missing:
            raise ValueError(f"sessions not in the archive: {', '.join(s.id for s in absent)}")
        archive.add_sessions(absent)

    # What does not depend on the round: the messages, and where each value is.
    prepared = []
    for case in cases:
        p = projections[case.id]
        if p.session_id != case.session_id:
            raise ValueError(f"case {case.id}: projection is of session {p.session_id!r}, not {case.session_id!r}")
        messages = p.messages()
        hay = normalise(messages_text(messages))  # `contains_answer`'s haystack, normalised once per case
        facts = [
            (q, not q.decoy and in_normalised(q, hay), _in_archive(archive, q, case.session_id)) for q in case.questions
        ]
        prepared.append((case, p, messages, shape_tools_of(p), facts))

    work = [(r, item) for r in rounds for item in prepared]
    it: Any = work
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(work, desc="open book", unit="case")
    readers = {r.number: reader_factory(search=r.search, k=k) for r in rounds}
    for reader in readers.values():
        check_draws(draws, reader)
    rows: list[dict[str, Any]] = []
    for rnd, (case, p, messages, shape_tools, facts) in it:
        reader = readers[rnd.number]
        asked = [(fact, d) for fact in facts for d in range(draws)]

        def ask(item, rnd=rnd, case=case, messages=messages, shape_tools=shape_tools, reader=reader):
            (fact, d) = item
            tools = HistoryTools(archive, case.session_id).tools() if rnd.book == "open" else ()
            # Draw 0 is asked as before draws existed (any reader takes it); a later one names its draw.
            again = {"draw": d} if d else {}
            return reader.answer(messages, fact[0], tools, wording=rnd.wording, shape_tools=shape_tools, **again)

        # A model reader is asked its endpoint's concurrency at a time (the archive reads per thread).
        for ((q, in_projection, in_archive), d), a in zip(asked, answer_all(reader, asked, ask), strict=False):
            correct = grade(q, a.given)
            fetched = {e for c in a.tool_calls if c.name == "history_get" for e in c.result_entry_ids}
            looked_up = bool(q.source_entry_id) and q.source_entry_id in fetched
            n_calls = len(a.tool_calls)
            label = str(getattr(reader, "label", "") or getattr(reader, "name", type(reader).__name__))
            stand_in = bool(a.stand_in)
            if stand_in and "stand-in" not in label and "ceiling" not in label:
                label = f"{label} (stand-in)"
            rows.append(
                {
                    "round": rnd.number,
                    "wording": rnd.wording,
                    "book": rnd.book,
                    "search": rnd.search,
                    "strategy": p.strategy,
                    "reader": str(getattr(reader, "name", type(reader).__name__)),
                    "reader_label": label,
                    "stand_in": stand_in,
                    "case_id": case.id,
                    "question_id": q.id,
                    "pointer": q.pointer,
                    "category": q.category,
                    "decoy": bool(q.decoy),
                    "answer": q.answer,
                    "given": a.given,
                    "correct": correct,
                    "outcome": classify(q, correct, a.given, in_projection, in_archive, looked_up, n_calls),
                    "in_projection": in_projection,
                    "in_archive": in_archive,
                    "looked_up": looked_up,
                    "tool_calls": n_calls,
                    "search_calls": sum(c.name == "history_search" for c in a.tool_calls),
                    "get_calls": sum(c.name == "history_get" for c in a.tool_calls),
                    "searched_entry_ids": list(dict.fromkeys(e for c in a.tool_calls for e in c.result_entry_ids)),
                    "input_tokens": int(a.input_tokens),
                    "output_tokens": int(a.output_tokens),
                    "draw": d,
                }
            )
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype(
        {
            "round": "int64",
            "decoy": "bool",
            "correct": "bool",
            "stand_in": "bool",
            "in_projection": "bool",
            "in_archive": "bool",
            "looked_up": "bool",
            "tool_calls": "int64",
            "search_calls": "int64",
            "get_calls": "int64",
            "input_tokens": "int64",
            "output_tokens": "int64",
            "draw": "int64",
        }
    )


def _round_keys(df: pd.DataFrame) -> pd.DataFrame:
    """One row per round: its book (open or closed), search mode and reader label (stand-ins stay labelled in every table)."""
    keys = df.groupby("round", sort=True).agg(
        book=("book", "first"),
        search=("search", "first"),
        reader=("reader_label", lambda s: ", ".join(dict.fromkeys(s))),
    )
    return keys


def _decoys_judged(df: pd.DataFrame) -> pd.Series:
    """Per answer: a decoy answered by a reader that could have fallen for it (not a stand-in, not decoy-blind)."""
    judged = df["decoy"].astype(bool)
    if "stand_in" in df.columns:
        judged &= ~df["stand_in"].astype("boolean").fillna(False).astype(bool)
    if "reader" in df.columns:
        judged &= df["reader"].astype(str).map(readers.measures_decoys).astype(bool)
    return judged


def outcome_table(df: pd.DataFrame) -> pd.DataFrame:
    """Where the values went, per round (fig 9): counts of each outcome.

    Returns
    -------
    DataFrame
        Index ``round``; columns ``book``, ``search``, ``reader`` (its label),
        one column per `OUTCOMES` entry (zeros included; ``decoy_abstained``
        nullable Int64),
        ``decoys`` (the decoy answers of the round), ``questions`` (the row
        total: the answers of the round, decoys included, each question once
        per draw) and, when the questions were asked several times
        (``draw``), ``draws`` per question. A round whose decoys only a
        stand-in answered (`readers.measures_decoys`) has ``decoy_abstained``
        <NA>: not measured, never "all abstained".
    """
    counts = pd.crosstab(df["round"], df["outcome"]).reindex(columns=list(OUTCOMES), fill_value=0)
    counts = counts.astype("int64")
    decoys = df.groupby("round")["decoy"].apply(lambda s: int(s.astype(bool).sum())).reindex(counts.index)
    judged = _decoys_judged(df).groupby(df["round"]).any().reindex(counts.index, fill_value=False)
    out = _round_keys(df).join(counts)
    out["decoy_abstained"] = out["decoy_abstained"].astype("Int64").mask((decoys > 0) & ~judged)
    out["decoys"] = decoys.astype("int64")
    out["questions"] = counts.sum(axis=1).astype("int64")
    if "draw" in df.columns and len(df) and int(df["draw"].max()) > 0:
        out["draws"] = df.groupby("round")["draw"].nunique().astype("int64")
    out.columns.name = None
    return out


#: How `outcome_view` shows a round's decoys that only a stand-in answered.
DECOYS_NOT_MEASURED = "not measured"


def outcome_view(outcomes: pd.DataFrame) -> pd.DataFrame:
    """`outcome_table` as the notebook shows it: a stand-in's ``decoy_abstained`` reads `DECOYS_NOT_MEASURED`."""
    view = outcomes.copy()
    if "decoy_abstained" in view.columns:
        col = view["decoy_abstained"]
        view["decoy_abstained"] = [DECOYS_NOT_MEASURED if pd.isna(v) else str(int(v)) for v in col]
    return view


def tool_calls_per_round(df: pd.DataFrame) -> pd.DataFrame:
    """Tool use per round.

    Returns
    -------
    DataFrame
        Index ``round``; columns ``book``, ``search``, ``reader`` (label),
        ``questions``, ``questions_with_calls``, ``tool_calls``,
        ``search_calls``, ``get_calls`` and ``calls_per_question``.
    """
    g = df.groupby("round", sort=True)
    stats = pd.DataFrame(
        {
            "questions": g.size(),
            "questions_with_calls": g["tool_calls"].apply(lambda s: int((s > 0).sum())),
            "tool_calls": g["tool_calls"].sum(),
            "search_calls": g["search_calls"].sum(),
            "get_calls": g["get_calls"].sum(),
        }
    ).astype("int64")
    stats["calls_per_question"] = stats["tool_calls"] / stats["questions"]
    return _round_keys(df).join(stats)


# --------------------------------------------------------------------------- the open book as an `Exam`

#: The archive of originals in a run folder (notebook 05 writes it; the report links it).
ARCHIVE_FILE = "archive.sqlite"


@dataclass(frozen=True)
class OpenBookParams(ExamParams):
    """The open book's parameters: the exam's own beside `ExamParams` (notebook 05's defaults).

    Attributes
    ----------
    strategy : str
        The one arm whose projections the rounds are answered from.
    reader : str
        ``searcher`` (the offline stand-in) or ``model`` (a tool-call loop).
    wordings : tuple of str
        Rounds 1–3 (`make_rounds`); empty: `DEFAULT_WORDINGS`.
    required_wording : str
        Round 5; empty: `REQUIRED_WORDING`.
    k : int
        Hits the searcher reads with ``history_get`` after a search.
    """

    strategy: str = "futureos-summarized"
    reader: str = "searcher"
    wordings: tuple[str, ...] = ()
    required_wording: str = ""
    k: int = 3

    def rounds(self) -> tuple[Round, ...]:
        """Return the five rounds these wordings give (the library's where a wording is empty)."""
        return make_rounds(self.wordings or DEFAULT_WORDINGS, self.required_wording or REQUIRED_WORDING)


@dataclass(frozen=True)
class OpenBookCases:
    """The open book's cases: the run's (`cases.RunCases`) and where the archive of originals is kept.

    Attributes
    ----------
    run : RunCases
        The cases notebook 03 asked (its saved bank), or built here when it did not run.
    archive_path : Path or None
        The run folder's archive (`ARCHIVE_FILE`); None: sessions gathered in memory, searched in a
        temporary archive.
    """

    run: RunCases
    archive_path: Path | None = None

    def describe(self) -> str:
        """Say what the exam will ask (`cases.RunCases.describe`)."""
        return self.run.describe()


@EXAMS.register("open_book", rank=30, notebook="05_open_book_exam")
class OpenBookExam(Exam[OpenBookCases, pd.DataFrame]):
    """The open-book exam (notebook 05): five rounds on one arm's projections (`run_open_book`).

    The projections of ``strategy`` are searched through the archive of originals with the run's sessions
    added; the reader (``reader``; the searcher stand-in by default) answers every question in every
    round. Tables: ``exam_open`` (`COLUMNS`) and ``exam_open_outcomes`` (`outcome_table`, round as a column).
    """

    writes = ("exam_open", "exam_open_outcomes")
    own_cells = True  # notebook 05's cells

    params_type = OpenBookParams

    def cases(self, source: Source, params: ExamParams) -> OpenBookCases:
        """Return the run's cases (`cases.for_source`) and, in a run folder, where its archive lives."""
        rc = exam_cases.for_source(source, params.case_params())
        return OpenBookCases(rc, None if isinstance(source, Sources) else Path(source) / ARCHIVE_FILE)

    def grade(
        self, cases: OpenBookCases, params: ExamParams, ctx: CompactionContext, *, progress: bool = False
    ) -> pd.DataFrame:
        """Project every case with the arm, archive the sessions and run the five rounds (`run_open_book`)."""
        p = OpenBookParams.coerce(params)
        rc = cases.run
        projections = exam_cases.projections_for(rc.cases, rc.sessions, p.strategy, ctx)
        with contextlib.ExitStack() as stack:
            # Gathered sessions have no run folder: their archive lives as long as the rounds do.
            path = cases.archive_path or Path(stack.enter_context(tempfile.TemporaryDirectory())) / ARCHIVE_FILE
            archive = stack.enter_context(Archive(path))
            archive.add_sessions(rc.sessions.values())
            return run_open_book(
                rc.cases,
                rc.sessions,
                projections,
                archive,
                readers.reader_factory(p.reader, **p.reader_options()),
                k=p.k,
                rounds=p.rounds(),
                progress=progress,
                draws=p.draws,
            )

    def tables(self, cases: OpenBookCases, result: pd.DataFrame, params: ExamParams) -> dict[str, pd.DataFrame]:
        """Return the answers of every round and the outcomes per round (fig 9's table)."""
        return {"exam_open": result, "exam_open_outcomes": outcome_table(result).reset_index()}


__all__ = [
    "ARCHIVE_FILE",
    "COLUMNS",
    "DECOYS_NOT_MEASURED",
    "DEFAULT_WORDINGS",
    "OUTCOMES",
    "OpenBookCases",
    "OpenBookExam",
    "OpenBookParams",
    "REQUIRED_WORDING",
    "Round",
    "STAND_IN_NOTE",
    "classify",
    "make_rounds",
    "outcome_table",
    "outcome_view",
    "run_open_book",
    "shape_tools_of",
    "stand_in_note",
    "tool_calls_per_round",
]
