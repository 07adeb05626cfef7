"""Inspect AI tasks of the exams, built from a run folder (``inspect eval compaction_lab/closed_book -T run=...``).

closed_book
    One sample per case x arm x question of the run's bank: the arm's projection is the
    conversation and the question its last user message, as the suite's model reader sends it
    (`exam.readers.reading.request_messages`); scored as the suite grades (`exam.grading.grade`).
    ``--epochs N`` asks every question N times (draws).
open_book
    One round of the open book (``-T round=N``, default 3) on the arm notebook 05 examined
    (``-T strategy=`` to choose another); in the open rounds the run's archive of originals is
    offered as Inspect tools, ``history_search`` and ``history_get``, bound to the case's session.
continuation
    One sample per case with a recorded next action x arm of the continuation exam: the projection,
    then the suite's "continue" turn with the agent's tools offered and one tool call required
    (Inspect does not run it), graded as notebook 06 does (`next_action.grade_prediction`). A tool
    parameter the call shape leaves undescribed is sent with `NO_DESCRIPTION` (Inspect needs one).

Differences from the suite's closed book (`exam.exams.closed`): the call shape's tool definitions are not
offered beside the messages, and the answer budget is Inspect's ``--max-tokens``.

Design: docs/real-models.md#the-closed-book-in-inspect-ai.
"""

from __future__ import annotations

import dataclasses
import functools
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
from compaction_lab.core import bounded_json, runfolder
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.core.tokens import seed_tiktoken_cache
from compaction_lab.exam import exam as exam_mod
from compaction_lab.exam.actions import next_action
from compaction_lab.exam.actions.targets import session_hay
from compaction_lab.exam.exams import continuation as continuation_mod
from compaction_lab.exam.exams.closed import projection_row
from compaction_lab.exam.exams.open_book import ARCHIVE_FILE, OpenBookParams
from compaction_lab.exam.grading import fell_for_decoy, grade, is_abstention
from compaction_lab.exam.readers import HISTORY_GET_TOOL, HISTORY_SEARCH_TOOL, HistoryTools
from compaction_lab.exam.readers.model import normalise_answer
from compaction_lab.exam.readers.reading import request_messages
from compaction_lab.exam.types import Case, Question
from compaction_lab.store.archive import Archive
from compaction_lab.summarize.endpoint import wire_messages

# Inspect estimates tokens with tiktoken's o200k_base, which tiktoken downloads on first use: offline, it is
# taken from bpe-openai's bundled copy instead (hash-checked), before any task runs.
seed_tiktoken_cache("o200k_base")

#: The notebook whose parameters (window, output ceiling, summarizer, arms) a task's projections use.
CLOSED_NOTEBOOK = "03_closed_book_exam"
#: The open book's: its arm, its wordings, the archive it wrote.
OPEN_NOTEBOOK = "05_open_book_exam"
#: The continuation exam's: its arms and its cases.
CONTINUATION_NOTEBOOK = "06_continuation_exam"


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
    info = bounded_json.load_file(path)
    for nb in info.get("notebooks") or []:
        if nb.get("notebook") == notebook and nb.get("parameters"):
            return dict(nb["parameters"])
    return dict(info.get("parameters") or {})


def _check_strategies(names: list[str]) -> None:
    """Raise a KeyError naming the first of `names` that is not a registered arm."""
    unknown = [n for n in names if n not in strategies.names()]
    if unknown:
        raise KeyError(f"unknown strategy {unknown[0]!r}; registered: {', '.join(strategies.names())}")


def _question_samples(
    case: Case,
    name: str,
    projection: Projection,
    ctx: Any,
    unit: str,
    wording: str = "",
    session: Session | None = None,
    **extra: Any,
) -> Iterator[Sample]:
    """One sample per question of `case` on arm `name`'s projection: the question (with `wording`) its last turn.

    `extra` joins the metadata (an open-book round's number, arm and search mode) and names the sample.
    """
    row = projection_row(case.id, projection, ctx, session)  # over_window in the session's own model tokens
    messages = projection.messages()
    tag = f"/round{extra['round']}" if "round" in extra else ""
    for q in case.questions:
        yield Sample(
            input=q.prompt,
            target=[q.answer, *q.aliases],
            id=f"{case.id}/{name}{tag}/{q.id}",
            metadata={
                "case_id": case.id,
                "session_id": case.session_id,
                "question_id": q.id,
                "pointer": q.pointer,
                "category": q.category,
                "decoy": q.decoy,
                "strategy": name,
                "unit": unit,  # what an interval resamples: questions, or the sessions they came from
                "strategy_label": row["strategy_label"],
                "projection_tokens": int(row["tokens"]),
                "over_window": bool(row["over_window"]),
                **extra,
                "question": dataclasses.asdict(q),
                "messages": wire_messages(request_messages(messages, q, wording)),
            },
        )


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
    _check_strategies(names)
    for case in rc.cases:
        session = rc.sessions[case.session_id]
        for name in names:
            p = strategies.compact(session, name, case.cut, ctx)
            yield from _question_samples(case, name, p, ctx, rc.unit, session=session)


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
    _check_strategies([name])
    rnd = rounds[round_number]
    rc = book.cases(Path(run_dir), params).run
    ctx = params.context()
    for case in rc.cases:
        session = rc.sessions[case.session_id]
        p = strategies.compact(session, name, case.cut, ctx)
        yield from _question_samples(
            case, name, p, ctx, rc.unit, rnd.wording, session, round=rnd.number, book=rnd.book, search=rnd.search
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
        if state.metadata["book"] == "open":
            state.tools = list(history_tools(Path(archive), state.metadata["session_id"]))
        return await generate(state)  # Inspect runs the model's tool calls and asks again

    return solve


@functools.lru_cache(maxsize=4)
def _continuation_cases(run_dir: str) -> tuple[continuation_mod.ContinuationParams, continuation_mod.ContinuationCases]:
    """Notebook 06's parameters and keyed cases of a run folder (read once per folder: the scorer needs them too)."""
    params = continuation_mod.ContinuationParams.coerce(
        exam_mod.get("continuation").params(run_parameters(Path(run_dir), CONTINUATION_NOTEBOOK))
    )
    return params, continuation_mod.keys_for(Path(run_dir), params)


def continuation_samples(run_dir: Path, strategy: str | None = None) -> Iterator[Sample]:
    """Yield the continuation exam's samples from a run folder: case with a recorded next action x arm.

    Raises
    ------
    FileNotFoundError
        When `run_dir` is not a run folder.
    KeyError
        When `strategy` is not a registered arm.
    """
    params, cases = _continuation_cases(str(Path(run_dir)))
    if strategy:
        _check_strategies([strategy])
    ctx = params.context()
    for cc in cases.keys:
        session = cases.sessions[cc.case.session_id]
        tools = next_action.offered_tools(ctx.shape.for_session(session).tools, session)
        if not cc.actions or not tools:
            continue  # as notebook 06: nothing to predict, or nothing to call
        names = [strategy] if strategy else continuation_mod.strategies_of(cc.block, params.names)
        for name in names:
            p = strategies.compact(session, name, cc.case.cut, ctx)
            row = projection_row(cc.case.id, p, ctx, session)
            yield Sample(
                input=next_action.NEXT_STEP_PROMPT,
                target=[a.tool for a in cc.actions],
                id=f"{cc.block}/{cc.case.id}/{name}",
                metadata={
                    "run": str(Path(run_dir)),
                    "block": cc.block,
                    "case_id": cc.case.id,
                    "session_id": cc.case.session_id,
                    "strategy": name,
                    "strategy_label": row["strategy_label"],
                    "projection_tokens": int(row["tokens"]),
                    "over_window": bool(row["over_window"]),
                    "unit": "session",
                    "messages": wire_messages(next_action.action_messages(p.messages())),
                    "tools": [dict(t) for t in tools],
                },
            )


try:  # Inspect prints such an error's message alone, without a traceback (its "prerequisite" errors)
    from inspect_ai._util.error import PrerequisiteError as _SaidAlone
except ImportError:  # pragma: no cover - an Inspect that moved it: the same message, after a traceback

    class _SaidAlone(Exception):  # type: ignore[no-redef]  # stands in for the absent import
        """Stands in for Inspect's PrerequisiteError."""


class NothingToAsk(_SaidAlone, ValueError):
    """A task that would have no sample: why, in one line, before Inspect starts (not "the dataset is empty")."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def nothing_to_predict(run_dir: Path) -> str:
    """Say why the continuation exam of a run folder has no sample: no case, no recorded next call, or no tool."""
    params, cases = _continuation_cases(str(Path(run_dir)))
    ctx = params.context()
    acting = [k for k in cases.keys if k.actions]
    head = f"{run_dir}: the continuation exam has nothing to predict: "
    if not cases.keys:
        return head + "the run has no cases (its exam bank is empty)"
    if not acting:
        return head + (
            f"none of its {len(cases.keys)} cases has a recorded tool call after its cut (a case cut at its "
            "session's end has none, as a synthetic chain's single case; more cases per chain, n_cases, cut earlier)"
        )
    return head + (
        f"its {len(acting)} cases with a recorded next call offer no tool to call (neither the call shape "
        f"{ctx.shape.name!r} nor the session defines one)"
    )


def _offered(definitions: list[dict[str, Any]]) -> list[ToolDef]:
    """Return the tools a next-action request offers, as Inspect tools never run (the call is only graded)."""

    async def not_run(**_: Any) -> str:
        raise RuntimeError("the continuation exam grades the call; it does not run it")

    def described(parameters: dict[str, Any]) -> dict[str, Any]:
        # Inspect refuses a parameter without a description; the call shape's often have none.
        props = {
            k: {**v, "description": v.get("description") or NO_DESCRIPTION}
            for k, v in (parameters.get("properties") or {}).items()
        }
        return {"type": "object", **parameters, "properties": props}

    return [
        ToolDef(
            not_run,
            name=str(d["function"]["name"]),
            description=str(d["function"].get("description") or NO_DESCRIPTION),
            parameters=ToolParams.model_validate(described(dict(d["function"].get("parameters") or {}))),
        )
        for d in definitions
    ]


#: The description Inspect is given for a tool or parameter the call shape does not describe.
NO_DESCRIPTION = "(not described in the call shape)"


@solver
def next_step() -> Solver:
    """Send the projection and the "continue" turn with the agent's tools, one call required and not run."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.messages = await messages_from_openai(state.metadata["messages"])
        state.tools = list(_offered(state.metadata["tools"]))
        state.tool_choice = "any"  # the suite's model reader sends tool_choice "required"
        return await generate(state, tool_calls="none")

    return solve


@scorer(metrics={"tool_match": [accuracy()], "target_match": [accuracy(), stderr()], "exact_match": [accuracy()]})
def next_action_grade() -> Scorer:
    """Grade the first tool call as notebook 06 does (`next_action.grade_prediction`)."""

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata
        _, cases = _continuation_cases(meta["run"])
        cc = next(k for k in cases.keys if k.block == meta["block"] and k.case.id == meta["case_id"])
        calls = state.output.message.tool_calls or [] if state.output and state.output.message else []
        predicted = (
            next_action.PredictedCall.from_tool_call(
                {"function": {"name": calls[0].function, "arguments": json.dumps(calls[0].arguments)}}
            )
            if calls
            else None
        )
        graded = next_action.grade_prediction(predicted, cc, session_hay(cases.sessions[cc.case.session_id]))
        value = {k: CORRECT if graded[k] else INCORRECT for k in ("tool_match", "target_match", "exact_match")}
        return Score(
            value=value,
            answer=None if predicted is None else f"{predicted.tool} {predicted.arguments}",
            explanation="no tool call: the model talked instead of acting" if predicted is None else "the first call",
            metadata={k: graded[k] for k in ("acted_on_decoy", "matched_rank", "predicted_tool") if k in graded},
        )

    return score


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


@task
def continuation(run: str, strategy: str = "") -> Task:
    """Build the continuation exam's next-action prediction of run folder `run` (every arm, or `strategy`)."""
    run_dir = Path(run).expanduser().resolve()
    samples = list(continuation_samples(run_dir, strategy or None))
    if not samples:
        raise NothingToAsk(nothing_to_predict(run_dir))
    return Task(
        dataset=MemoryDataset(samples, name=f"{run_dir.name} continuation"),
        solver=next_step(),
        scorer=next_action_grade(),
        metadata={"run": str(run_dir), "strategy": strategy or "every arm of the run"},
    )
