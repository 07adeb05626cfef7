"""Inspect AI tasks of the exams, built from a run folder (``inspect eval compaction_lab/closed_book -T run=...``).

closed_book
    One sample per case x arm x question of the run's bank: the arm's projection of the case's session
    is the conversation and the question (with `exam.reading.QUESTION_INSTRUCTION`) its last user
    message, as the suite's model reader sends it (`exam.reading.request_messages`). The target is the
    exact value; the scorer grades as the suite does (`exam.grading.grade`, after the model reader's
    `exam.model_reader.normalise_answer`): an answer holding ``NOT_FOUND`` abstains, and a decoy is
    answered right only by abstaining. Sample metadata: case, session, pointer, category, strategy,
    projection tokens, whether the projection was over the window, the unit an interval resamples. ``--epochs N`` asks every question
    N times (draws).

open_book
    One sample per case x question of the run's bank in one round of the open book (``-T round=N``,
    default 3: searching allowed, the third wording), on the arm notebook 05 examined (``-T strategy=``
    to choose another): the round's wording joins the question, and in the open rounds (1-3, 5) the
    archive of originals notebook 05 wrote (``archive.sqlite``) is offered as Inspect tools,
    ``history_search`` and ``history_get``, bound to the case's session, with the suite's own
    definitions; Inspect runs the model's tool calls. Round 4 is the control: no tools. Scored as the
    closed book; metadata adds the round, its arm and its search mode.

Differences from the suite's closed book (`exam.closed`): the call shape's tool definitions are not
offered beside the messages (the suite sends them with ``tool_choice: none``; an Inspect tool needs a
Python function behind it), and the answer budget is Inspect's ``--max-tokens`` (the suite caps it at
`exam.model_reader.ANSWER_TOKENS`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import messages_from_openai
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolDef, ToolParams

from compaction_lab import strategies
from compaction_lab.core import runfolder
from compaction_lab.core.tokens import seed_tiktoken_cache
from compaction_lab.exam import exam as exam_mod
from compaction_lab.exam.closed import projection_row
from compaction_lab.exam.grading import fell_for_decoy, grade, is_abstention
from compaction_lab.exam.model_reader import normalise_answer
from compaction_lab.exam.open_book import ARCHIVE_FILE, OpenBookParams
from compaction_lab.exam.readers import HISTORY_GET_TOOL, HISTORY_SEARCH_TOOL, HistoryTools
from compaction_lab.exam.reading import request_messages
from compaction_lab.exam.types import Question
from compaction_lab.store.archive import Archive
from compaction_lab.summarize.endpoint import wire_messages

# Inspect estimates tokens with tiktoken's o200k_base, which tiktoken downloads on first use: offline, it is
# taken from bpe-openai's bundled copy instead (hash-checked), before any task runs.
seed_tiktoken_cache("o200k_base")

#: The notebook whose parameters (window, output ceiling, summarizer, arms) a task's projections use.
CLOSED_NOTEBOOK = "03_closed_book_exam"
#: The open book's: its arm, its wordings, the archive it wrote.
OPEN_NOTEBOOK = "05_open_book_exam"


def run_parameters(run_dir: Path, notebook: str = CLOSED_NOTEBOOK) -> dict[str, Any]:
    """Return the parameters `notebook` ran with in a run folder (``run.json``), else the run's chain-wide ones.

    Raises
    ------
    FileNotFoundError
        When the folder has no ``run.json`` (it is not a run folder).
    """
    path = Path(run_dir) / runfolder.RUN_JSON
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: not a run folder (no {runfolder.RUN_JSON})")
    info = json.loads(path.read_text(encoding="utf-8"))
    for nb in info.get("notebooks") or []:
        if nb.get("notebook") == notebook and nb.get("parameters"):
            return dict(nb["parameters"])
    return dict(info.get("parameters") or {})


def closed_book_samples(run_dir: Path, strategy: str | None = None) -> Iterator[Sample]:
    """Yield the closed book's samples from a run folder: case x arm (`strategy` alone if given) x question.

    Raises
    ------
    FileNotFoundError
        When `run_dir` is not a run folder.
    KeyError
        When `strategy` is not a registered arm.
    """
    closed = exam_mod.get("closed")
    params = closed.params(run_parameters(run_dir))
    rc = closed.cases(Path(run_dir), params)
    ctx = params.context()
    names = [strategy] if strategy else list(params.names or strategies.names())
    unknown = [n for n in names if n not in strategies.names()]
    if unknown:
        raise KeyError(f"unknown strategy {unknown[0]!r}; registered: {', '.join(strategies.names())}")
    for case in rc.cases:
        session = rc.sessions[case.session_id]
        for name in names:
            p = strategies.compact(session, name, case.cut, ctx)
            row = projection_row(case.id, p, ctx)
            messages = p.messages()
            for q in case.questions:
                yield Sample(
                    input=q.prompt,
                    target=[q.answer, *q.aliases],
                    id=f"{case.id}/{name}/{q.id}",
                    metadata={
                        "case_id": case.id,
                        "session_id": case.session_id,
                        "question_id": q.id,
                        "pointer": q.pointer,
                        "category": q.category,
                        "decoy": q.decoy,
                        "strategy": name,
                        "unit": rc.unit,  # what an interval resamples: questions, or the sessions they came from
                        "strategy_label": row["strategy_label"],
                        "projection_tokens": int(row["tokens"]),
                        "over_window": bool(row["over_window"]),
                        "question": dataclasses.asdict(q),
                        "messages": wire_messages(request_messages(messages, q, "")),
                    },
                )


def open_book_samples(run_dir: Path, strategy: str | None = None, round_number: int = 3) -> Iterator[Sample]:
    """Yield one open-book round's samples from a run folder: case x question, on notebook 05's arm or `strategy`.

    Raises
    ------
    FileNotFoundError
        When `run_dir` is not a run folder, or notebook 05 wrote no archive there.
    KeyError
        When `strategy` is not a registered arm.
    ValueError
        When `round_number` is not one of the five rounds.
    """
    book = exam_mod.get("open_book")
    params = OpenBookParams.coerce(book.params(run_parameters(run_dir, OPEN_NOTEBOOK)))
    rounds = {r.number: r for r in params.rounds()}
    if round_number not in rounds:
        raise ValueError(f"round must be one of {sorted(rounds)}, got {round_number!r}")
    if not (Path(run_dir) / ARCHIVE_FILE).is_file():
        raise FileNotFoundError(f"{run_dir}: no {ARCHIVE_FILE}; the open book (notebook 05) has not run in this folder")
    name = strategy or params.strategy
    if name not in strategies.names():
        raise KeyError(f"unknown strategy {name!r}; registered: {', '.join(strategies.names())}")
    rnd = rounds[round_number]
    rc = book.cases(Path(run_dir), params).run
    ctx = params.context()
    for case in rc.cases:
        p = strategies.compact(rc.sessions[case.session_id], name, case.cut, ctx)
        row = projection_row(case.id, p, ctx)
        messages = p.messages()
        for q in case.questions:
            yield Sample(
                input=q.prompt,
                target=[q.answer, *q.aliases],
                id=f"{case.id}/{name}/round{rnd.number}/{q.id}",
                metadata={
                    "case_id": case.id,
                    "session_id": case.session_id,
                    "question_id": q.id,
                    "pointer": q.pointer,
                    "category": q.category,
                    "decoy": q.decoy,
                    "strategy": name,
                    "unit": rc.unit,
                    "strategy_label": row["strategy_label"],
                    "projection_tokens": int(row["tokens"]),
                    "over_window": bool(row["over_window"]),
                    "round": rnd.number,
                    "arm": rnd.arm,
                    "search": rnd.search,
                    "question": dataclasses.asdict(q),
                    "messages": wire_messages(request_messages(messages, q, rnd.wording)),
                },
            )


def history_tools(archive: Path, session_id: str) -> list[ToolDef]:
    """``history_search`` and ``history_get`` over a run folder's archive, bound to one session, as Inspect tools.

    The suite's own definitions (`exam.readers.HISTORY_SEARCH_TOOL`, `HISTORY_GET_TOOL`) and functions
    (`exam.readers.HistoryTools`): what the model receives is what the suite's model reader's tool loop sends.
    """

    async def history_search(query: str, session: str | None = None, limit: int | None = None) -> str:
        with Archive(archive) as a:
            return HistoryTools(a, session_id).history_search(query, session=session, limit=limit).content

    async def history_get(entry_id: str, session: str | None = None) -> str:
        with Archive(archive) as a:
            return HistoryTools(a, session_id).history_get(entry_id, session=session).content

    return [
        ToolDef(
            fn,
            name=spec["function"]["name"],
            description=spec["function"]["description"],
            parameters=ToolParams.model_validate(spec["function"]["parameters"]),
        )
        for fn, spec in ((history_search, HISTORY_SEARCH_TOOL), (history_get, HISTORY_GET_TOOL))
    ]


@solver
def archive_conversation(archive: str) -> Solver:
    """As `projection_conversation`, with the history tools over `archive` offered in an open round."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.messages = await messages_from_openai(state.metadata["messages"])
        if state.metadata["arm"] == "open":
            state.tools = list(history_tools(Path(archive), state.metadata["session_id"]))
        return await generate(state)  # Inspect runs the model's tool calls and asks again

    return solve


@solver
def projection_conversation() -> Solver:
    """Send the sample's projection, with the question as its last user message, and generate the answer."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.messages = await messages_from_openai(state.metadata["messages"])
        return await generate(state)

    return solve


@scorer(metrics=[accuracy(), stderr()])
def exact_value() -> Scorer:
    """Grade an exact value as the suite does: normalised as the model reader does, ``NOT_FOUND`` abstains."""

    async def score(state: TaskState, target: Target) -> Score:
        q = Question(**{**state.metadata["question"], "aliases": tuple(state.metadata["question"]["aliases"])})
        given = normalise_answer(state.output.completion)
        right = grade(q, given)
        if q.decoy:
            why = "decoy: abstained" if right else "decoy: answered a value that is nowhere in the session"
        else:
            why = "the exact value" if right else ("abstained" if is_abstention(given) else "not the value")
        return Score(
            value=CORRECT if right else INCORRECT,
            answer=given,
            explanation=why,
            metadata={"abstained": is_abstention(given), "fell_for_decoy": bool(q.decoy and fell_for_decoy(q, given))},
        )

    return score


@task
def closed_book(run: str, strategy: str = "") -> Task:
    """Build the closed-book exam of run folder `run` (every arm it examined, or `strategy` alone) as an Inspect task."""
    run_dir = Path(run).expanduser().resolve()  # recorded whole: `import-inspect` may run from another folder
    samples = list(closed_book_samples(run_dir, strategy or None))
    return Task(
        dataset=MemoryDataset(samples, name=f"{run_dir.name} closed book"),
        solver=projection_conversation(),
        scorer=exact_value(),
        metadata={"run": str(run_dir), "strategy": strategy or "every arm of the run"},
    )


@task
def open_book(run: str, strategy: str = "", round: int = 3) -> Task:  # Inspect's -T round=N
    """Build one round of the open book of run folder `run` (notebook 05's arm, or `strategy`) as an Inspect task."""
    run_dir = Path(run).expanduser().resolve()
    samples = list(open_book_samples(run_dir, strategy or None, int(round)))
    return Task(
        dataset=MemoryDataset(samples, name=f"{run_dir.name} open book round {int(round)}"),
        solver=archive_conversation(str(run_dir / ARCHIVE_FILE)),
        scorer=exact_value(),
        metadata={"run": str(run_dir), "strategy": strategy or "notebook 05's arm", "round": int(round)},
    )
