"""The continuation exam: after a compaction, does the agent still hold what its next steps need.

The closed book measures recognition; this exam (notebook 06) grades a compaction against what the
agent really did next. The key (`ContinuationCase`) is the next ``continuation_k`` tool calls from the
cut (`NextAction`) and the exact values in them (`Target`, one per value: forms of one path are one),
each classified as ``needed``, ``in_tail``, ``system``, ``seen_after_cut`` or ``new``; only ``needed``
targets are scored: seen before the tail, and not shown to the agent again between the cut and the call
(`VISIBLE_KINDS`). The offline grade, needed-next recall, is verbatim presence (a stand-in,
`READER_LABEL`); decoy objects are listed for a model grade.

Key names: `ContinuationExam` (its `tables`: ``exam_continuation``, ``continuation_targets``,
``continuation_recall``, ``rediscovery``, ``rediscovery_compactions``), `ContinuationParams`,
`ACTION_COLUMNS`, `TARGET_COLUMNS`.

Design: docs/exams.md#8a-continuation-notebook-06 (the key, target statuses, grades, tables).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core import runfolder
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Record, Session
from compaction_lab.exam import found, readers
from compaction_lab.exam.actions import next_action, rediscovery
from compaction_lab.exam.actions.calls import agent_calls, canonical_arguments
from compaction_lab.exam.actions.keys import ContinuationCase, NextAction
from compaction_lab.exam.actions.targets import CATEGORIES, SessionHay, Target, session_hay, targets_of
from compaction_lab.exam.exam import EXAMS, Exam, ExamParams, Source
from compaction_lab.exam.exams import closed, recorded
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.questions.probes.decoys import mutate, session_vocab
from compaction_lab.exam.questions.probes.forms import collapse
from compaction_lab.exam.readers.reading import messages_text
from compaction_lab.exam.statistics import stats
from compaction_lab.exam.types import Case
from compaction_lab.ingest.sources import Sources
from compaction_lab.strategies import calibration
from compaction_lab.strategies.base import CompactionContext
from compaction_lab.strategies.labels import strategy_label

#: How tables and figures name the offline grade: verbatim presence of the needed targets, a stand-in.
READER_LABEL = "needed-next recall (verbatim presence, stand-in)"
READER_NAME = "needed-next"

#: Where a target occurred (module docstring); only ``needed`` is scored. ``seen_after_cut``: seen before
#: the tail, but shown again after the cut before the call that uses it (a user message, a tool output,
#: an earlier call of the case: any form of its value), so the call needs no memory of it.
STATUSES: tuple[str, ...] = ("needed", "in_tail", "system", "seen_after_cut", "new")

#: The records after the cut that show the agent a value again: every output and message (issue 45) —
#: what the user and the tools said, the calls it made, and its own messages and reasoning (a value it
#: wrote there is in its context when the call comes). A summary record is not: it is the arm graded.
VISIBLE_KINDS: frozenset[str] = frozenset({"user", "tool_output", "tool_call", "assistant", "reasoning"})

#: The blocks of cases: the closed book's, and the recorded compactions'.
BLOCKS: tuple[str, ...] = ("closed", "recorded")


def classify(
    target: Target, hay: SessionHay, case: Case, kept: str = "", at: int | None = None, named: bool = False
) -> Target:
    """Return `target` with its status and first covered occurrence (module docstring, "The key").

    Parameters
    ----------
    target : Target
    hay : SessionHay
    case : Case
    kept : str
        Normalised text kept verbatim outside the tail (a recorded case).
    at : int, optional
        The source_order of the call that uses the target: a value a `VISIBLE_KINDS` record in
        ``[cut, at)`` holds is ``seen_after_cut``. None: not looked for.
    named : bool
        An earlier call of the case named the value in another form (`build_key`): ``seen_after_cut``.
    """
    if any(f in hay.system for f in target.forms):
        return target.classified("system")
    if hay.first(target.forms, case.tail_start, case.cut) is not None or (
        kept and any(f in kept for f in target.forms)
    ):
        return target.classified("in_tail")
    hit = hay.first(target.forms, 0, case.tail_start)
    if hit is None:
        return target.classified("new")
    if named or (at is not None and hay.first(target.forms, case.cut, at, VISIBLE_KINDS) is not None):
        return target.classified("seen_after_cut")
    return target.classified("needed", hit[0], hit[1] or "tool")


def next_calls(session: Session, start: int, k: int) -> list[Record]:
    """Return the agent's first `k` tool calls with ``source_order >= start``, in order (`calls.agent_calls`)."""
    out: list[Record] = []
    for r in agent_calls(session):  # a command the user ran (pi's `!`) is not the agent's next step
        if r.source_order >= start:
            out.append(r)
            if len(out) == k:
                break
    return out


def _decoys(
    case: Case, actions: Sequence[NextAction], hay: SessionHay, share: float, seed: int, n: int = 1
) -> tuple[str, ...]:
    """Look-alikes of the case's needed paths and identifiers, absent from the whole session (seeded)."""
    rng = random.Random(f"{seed}:{case.id}:continuation")
    if share <= 0 or rng.random() >= share:
        return ()
    pool = [
        t for a in actions for t in a.needed if t.category in ("path", "identifier", "tool_returned_id", "argument")
    ]
    if not pool:
        return ()
    vocab = session_vocab(hay.session)
    out: list[str] = []
    for t in rng.sample(pool, len(pool)):
        for _ in range(5):  # a bad draw may return the value itself or another one the session holds
            alike = mutate(t.value, "identifier" if t.category == "argument" else t.category, rng, vocab)
            if alike != t.value and normalise(alike) and normalise(alike) not in hay.text:
                out.append(alike)
                break
        if len(out) == n:
            break
    return tuple(out)


def build_key(
    block: str,
    case: Case,
    session: Session,
    k: int,
    *,
    kept: str = "",
    decoy_share: float = 0.0,
    seed: int = 7,
    hay: SessionHay | None = None,
) -> ContinuationCase:
    """Return the key of one case: its next `k` tool calls, their targets classified, and its decoys.

    Parameters
    ----------
    block : str
        ``closed`` or ``recorded``.
    case : Case
    session : Session
    k : int
        How many next calls (``continuation_k``).
    kept : str
        Normalised text an agent kept verbatim outside the tail (a recorded case), which every arm is
        credited as keeping: its targets are not scored.
    decoy_share : float
        The share of cases that get decoy objects.
    seed : int
    """
    hay = hay or session_hay(session)
    calls = next_calls(session, case.cut, k)
    found = [targets_of(r, hay.cwd) for r in calls]
    # one value once per case: a form of a value an earlier call named is that value, seen after the cut
    pool = collapse(t.key for ts in found for t in ts)
    actions = []
    named: set[str] = set()
    for rank, (r, ts) in enumerate(zip(calls, found, strict=True)):
        values = [pool.of(t.key) or t.key for t in ts]
        targets = tuple(
            classify(t, hay, case, kept, at=r.source_order, named=v in named) for t, v in zip(ts, values, strict=True)
        )
        named.update(values)
        actions.append(NextAction(rank, r.source_order, r.entry_id, r.tool or "", canonical_arguments(r), targets))
    return ContinuationCase(block, case, tuple(actions), _decoys(case, actions, hay, decoy_share, seed))


# --------------------------------------------------------------------------- the offline grade

#: Columns of ``exam_continuation``: one row per block × case × arm × next action.
#: ``continuation_predictions`` (written with several draws): each draw of each case × arm's next-action request.
PREDICTION_COLUMNS: list[str] = [
    "block",
    "case_id",
    "session_id",
    "strategy",
    "strategy_label",
    "draw",
    *next_action.MODEL_GRADE_COLUMNS,
    "predicted_by",
]

ACTION_COLUMNS: list[str] = [
    "block",
    "case_id",
    "session_id",
    "cut",
    "strategy",
    "strategy_label",
    "reader",
    "reader_label",
    "action_rank",
    "action_source_order",
    "tool",
    "arguments",
    "targets",
    "target_categories",
    "target_status",
    "needed",
    "held",
    "n_needed",
    "n_held",
    "decoys",
    "projection_tokens",
    "over_window",
    *next_action.MODEL_GRADE_COLUMNS,  # the model's predicted call and its grades (empty offline)
    "predicted_by",  # the model reader's label (None offline)
]

#: Columns of ``continuation_targets``: one row per block × case × arm × needed target (what intervals resample).
TARGET_COLUMNS: list[str] = [
    "block",
    "strategy",
    "strategy_label",
    "reader",
    "reader_label",
    "session_id",
    "case_id",
    "question_id",
    "action_rank",
    "target",
    "category",
    "source_order",
    "pointer",
    "decoy",
    "correct",
    "found_in",
    "summary_by",
    "projection_tokens",
    "over_window",
]

#: Model-grade columns of ``continuation_recall`` (rates over the cases a prediction was asked for; NaN offline).
MODEL_COLUMNS: list[str] = list(next_action.RATE_COLUMNS)


@dataclass(frozen=True)
class ContinuationResult:
    """What grading produced: the action rows and the target rows (`ACTION_COLUMNS`, `TARGET_COLUMNS`)."""

    actions: pd.DataFrame
    targets: pd.DataFrame
    graded_strategies: tuple[tuple[str, str, str], ...] = ()  # (block, strategy, label) of every arm graded, in order
    #: With several draws (`run_continuation`'s `draws`): one row per block × case × arm × draw, the model's
    #: call and its grades (`PREDICTION_COLUMNS`); the action rows carry draw 0's. None with one draw.
    predictions: pd.DataFrame | None = None


def holds(text: str, target: Target) -> bool:
    """Tell whether normalised projection text holds the target (any of its forms)."""
    return any(f in text for f in target.forms)


def grade_case(
    cc: ContinuationCase, p: Projection, ctx: CompactionContext, session: Session | None = None
) -> tuple[list[dict], list[dict]]:
    """Grade one projection against one key: action rows and needed-target rows.

    ``over_window``: the projection, in the agent's own model tokens (`strategies.calibration.over_window`,
    the case's `session` calibrated from its log), is larger than W − O; without `session`, its report
    tokens are compared. A target row's ``found_in`` says where its value is (`found.where`: ``verbatim``,
    ``summary``, ``both`` or ``nowhere``; held exactly when not ``nowhere``) and ``summary_by`` who wrote the
    projection's summary text (`found.summary_by`).
    """
    text = normalise(messages_text(p.messages()))
    regions = found.regions(p)
    over = (
        calibration.over_window(p.tokens, session, ctx)
        if session is not None
        else p.tokens > calibration.usable_capacity(ctx)
    )
    label = strategy_label(p)
    base = {
        "block": cc.block,
        "case_id": cc.case.id,
        "session_id": cc.case.session_id,
        "strategy": p.strategy,
        "strategy_label": label,
        "reader": READER_NAME,
        "reader_label": READER_LABEL,
        "projection_tokens": p.tokens,
        "over_window": over,
    }
    action_rows, target_rows = [], []
    for a in cc.actions:
        needed = a.needed
        held = [t.value for t in needed if holds(text, t)]
        action_rows.append(
            {
                **base,
                "cut": cc.case.cut,
                "action_rank": a.rank,
                "action_source_order": a.source_order,
                "tool": a.tool,
                "arguments": a.arguments,
                "targets": [t.value for t in a.targets],
                "target_categories": [t.category for t in a.targets],
                "target_status": [t.status for t in a.targets],
                "needed": [t.value for t in needed],
                "held": held,
                "n_needed": len(needed),
                "n_held": len(held),
                "decoys": list(cc.decoys),
                **next_action.not_asked(),  # the model grade's columns: filled only when a model is asked
                "predicted_by": None,
            }
        )
        for j, t in enumerate(needed):
            target_rows.append(
                {
                    **base,
                    "question_id": f"{cc.case.id}-a{a.rank}-t{j}",
                    "action_rank": a.rank,
                    "target": t.value,
                    "category": t.category,
                    "source_order": t.first_seen,
                    "pointer": t.pointer or "tool",
                    "decoy": False,
                    "correct": holds(text, t),
                    "found_in": found.where(t.forms, regions),
                    "summary_by": regions.summary_by,
                }
            )
    return action_rows, target_rows


def strategies_of(block: str, names: Sequence[str] | None) -> list[str]:
    """Return the arms a block projects: the listed ones; the recorded block puts the agent's own first."""
    listed = list(names or strategies.names())
    return ["recorded", *[n for n in listed if n != "recorded"]] if block == "recorded" else listed


def run_continuation(
    keys: Sequence[ContinuationCase],
    sessions: Mapping[str, Session],
    names: Sequence[str] | None,
    ctx: CompactionContext,
    progress: bool = False,
    reader: Any = None,
    draws: int = 1,
) -> ContinuationResult:
    """Project every keyed case with every arm (one compaction each) and grade the needed targets it holds.

    With a reader that takes a next step (a model reader's ``next_action``), each projection is also sent
    as the agent's request and the call it returns is graded against the recorded next actions
    (`next_action.predict_and_grade`); an offline reader leaves the model columns empty.

    Parameters
    ----------
    keys : sequence of ContinuationCase
    sessions : mapping of str to Session
    names : sequence of str, optional
        The listed arms (None: every listed strategy); a recorded case is also projected by ``recorded``.
    ctx : CompactionContext
    progress : bool
        A progress bar over case × arm.
    reader : optional
        The exam's reader (`readers.get_reader`); only one with a ``next_action`` method is asked.
    draws : int
        Times a model reader is asked for the next step from each projection (each a request of its own,
        `closed.check_draws`); with more than one, ``predictions`` holds every draw.
    """
    closed.check_draws(draws, reader)
    if draws > 1 and not callable(getattr(reader, "next_action", None)):
        raise ValueError(f"draws={draws} needs a model reader: only its next-action prediction is asked again")
    work = [(cc, n) for cc in keys for n in strategies_of(cc.block, names)]
    it: Any = work
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(work, desc="continuation", unit="projection")
    actions: list[dict] = []
    targets: list[dict] = []
    predictions: list[dict] = []
    graded_strategies: dict[tuple[str, str], str] = {}
    asks = callable(getattr(reader, "next_action", None))
    predicted_by = closed.reader_label(reader) if asks else None
    for cc, name in it:
        s = sessions[cc.case.session_id]
        p = strategies.compact(s, name, cc.case.cut, ctx)
        graded_strategies.setdefault((cc.block, name), strategy_label(p))
        a, t = grade_case(cc, p, ctx, s)
        if asks:
            tools = ctx.shape.for_session(s).tools
            for d in range(draws):
                graded = next_action.predict_and_grade(reader, cc, p, tools, s, draw=d)
                asked = {"predicted_by": predicted_by} if graded["tool_match"] is not None else {}
                if d == 0:
                    for row in a:
                        row.update(graded, **asked)
                if draws > 1:
                    predictions.append(
                        {
                            "block": cc.block,
                            "case_id": cc.case.id,
                            "session_id": cc.case.session_id,
                            "strategy": name,
                            "strategy_label": graded_strategies[(cc.block, name)],
                            "draw": d,
                            **graded,
                            "predicted_by": asked.get("predicted_by"),
                        }
                    )
        actions += a
        targets += t
    act = pd.DataFrame(actions, columns=ACTION_COLUMNS).astype(
        {"n_needed": "int64", "n_held": "int64", "projection_tokens": "int64", "over_window": "bool"}
    )
    act["matched_rank"] = act["matched_rank"].astype("Int64")
    tgt = pd.DataFrame(targets, columns=TARGET_COLUMNS).astype(
        {"source_order": "int64", "decoy": "bool", "correct": "bool", "over_window": "bool"}
    )
    pred = pd.DataFrame(predictions, columns=PREDICTION_COLUMNS).astype({"draw": "int64"}) if draws > 1 else None
    return ContinuationResult(act, tgt, tuple((b, s, lab) for (b, s), lab in graded_strategies.items()), pred)


#: The counted columns of the two parts of recall (`stats.PART_COLUMNS`): whole numbers, <NA> when unknown.
_PART_COUNTS: list[str] = [c for c in stats.PART_COLUMNS if "_retained" in c]


def recall_table(result: ContinuationResult, n_boot: int = 2000, seed: int = 7) -> pd.DataFrame:
    """Per block × arm: needed targets held of N with a 95% interval over sessions, and the model grade.

    Held targets split into scope and summary recall (`stats.PART_COLUMNS`, each with its interval): the
    value in what the arm keeps by design, or only in its summary text (the ``found_in`` of each target).

    An arm whose cases needed nothing from memory has a row with N = 0 (recall and interval NaN), never a
    missing row: every arm graded is listed.
    """
    frames = []
    # Block, strategy and the model grade's rates: over every draw when there were several.
    rates = next_action.model_rates(result.predictions if result.predictions is not None else result.actions)
    for block in BLOCKS:
        rows = result.targets[result.targets["block"] == block].drop(columns="block")
        table = stats.recall_table(rows, n_boot=n_boot, seed=seed, unit="session") if len(rows) else None
        graded = [(s, lab) for b, s, lab in result.graded_strategies if b == block]
        if not graded:
            continue
        if table is None:
            table = stats.recall_table(rows.iloc[:0], n_boot=n_boot, seed=seed, unit="session")
        missing = [(s, lab) for s, lab in graded if s not in set(table["strategy"])]
        if missing:
            acts = result.actions[result.actions["block"] == block]
            empty = pd.DataFrame(
                [
                    {
                        "strategy": s,
                        "strategy_label": lab,
                        "reader": READER_NAME,
                        "reader_label": READER_LABEL,
                        "retained": 0,
                        "n": 0,
                        "recall": float("nan"),
                        "ci_low": float("nan"),
                        "ci_high": float("nan"),
                        "ci_method": "no needed target: the next actions needed nothing from memory",
                        "n_sessions": 0,
                        "n_records": 0,
                        "top_session_share": float("nan"),
                        "over_window": bool(acts.loc[acts["strategy"] == s, "over_window"].any()),
                        "decoys_fallen": 0,
                        "decoys_n": 0,
                        "projection_tokens": float(
                            acts[acts["strategy"] == s].drop_duplicates("case_id")["projection_tokens"].mean()
                        ),
                        **dict.fromkeys(_PART_COUNTS, 0),  # nothing needed: none held in either part
                        "summary_by": "",
                    }
                    for s, lab in missing
                ]
            )
            table = pd.concat([table, empty.reindex(columns=table.columns)], ignore_index=True)
        order = {s: i for i, (s, _) in enumerate(graded)}
        table = table.sort_values("strategy", key=lambda c: c.map(order)).reset_index(drop=True)
        table.insert(0, "block", block)
        model = rates[rates["block"] == block].drop(columns="block")
        table = table.merge(model, on="strategy", how="left")  # arms never asked keep NaN
        acts = result.actions[result.actions["block"] == block]
        by = acts.dropna(subset=["predicted_by"]).groupby("strategy", sort=False)["predicted_by"].first()
        table["model_reader_label"] = table["strategy"].map(by)  # who predicted the next calls (NaN: nobody)
        frames.append(table)
    if not frames:
        empty = stats.recall_table(result.targets.iloc[:0].drop(columns="block"), n_boot=n_boot, seed=seed)
        empty.insert(0, "block", pd.Series(dtype=str))
        for col in MODEL_COLUMNS:
            empty[col] = pd.Series(dtype=float)
        empty["model_reader_label"] = pd.Series(dtype=object)
        return empty
    out = pd.concat(frames, ignore_index=True)
    # a block whose arms all needed nothing comes back as object columns of None: keep the numbers numeric
    floats = ["recall", "ci_low", "ci_high", "top_session_share", "projection_tokens", *MODEL_COLUMNS]
    out[floats] = out[floats].astype(float)
    out[["retained", "n", "n_sessions", "decoys_fallen", "decoys_n"]] = out[
        ["retained", "n", "n_sessions", "decoys_fallen", "decoys_n"]
    ].astype("int64")
    out["n_records"] = out["n_records"].astype("Int64")
    out[_PART_COUNTS] = out[_PART_COUNTS].astype("Int64")  # <NA>: targets graded before issue 47 (no found_in)
    out["over_window"] = out["over_window"].astype(bool)
    return out


# --------------------------------------------------------------------------- the continuation exam as an `Exam`


@dataclass(frozen=True)
class ContinuationParams(ExamParams):
    """The closed book's parameters, plus the continuation exam's own.

    Attributes
    ----------
    continuation_k : int
        How many recorded next tool calls form a case's key.
    continuation_decoy_share : float
        The share of cases whose key lists decoy objects (look-alikes that never existed).
    price_table : str
        The price table that prices rediscovered tool output; "": the first one the cost notebook priced in
        the run folder (none when it did not run: not priced).
    """

    continuation_k: int = 5
    continuation_decoy_share: float = 0.5
    price_table: str = ""

    def __post_init__(self) -> None:
        """Refuse a K below 1 and a share outside [0, 1], naming the parameter."""
        if int(self.continuation_k) < 1:
            raise ValueError(f"continuation_k must be at least 1, got {self.continuation_k}")
        if not 0.0 <= float(self.continuation_decoy_share) <= 1.0:
            raise ValueError(f"continuation_decoy_share must lie in [0, 1], got {self.continuation_decoy_share}")


@dataclass(frozen=True)
class ContinuationCases:
    """The keyed cases of a run (both blocks), the sessions, and the recorded block's cases as found."""

    keys: tuple[ContinuationCase, ...]
    sessions: Mapping[str, Session]
    kind: str = ""
    recorded_notes: tuple[str, ...] = ()
    price_table: str = ""  # what prices rediscovered output: the parameter, else the cost notebook's first table

    def describe(self) -> str:
        """Say how many cases have a next action and how many targets they need from memory."""
        lines = []
        for block in BLOCKS:
            ks = [k for k in self.keys if k.block == block]
            if not ks and block == "recorded":
                continue
            acting = sum(1 for k in ks if k.actions)
            needed = sum(len(k.needed) for k in ks)
            targets = sum(len(a.targets) for k in ks for a in k.actions)
            lines.append(
                f"{block}: {len(ks)} cases, {acting} with a recorded next action; "
                f"{needed} of their {targets} targets needed from memory"
            )
        if not any(k.needed for k in self.keys):
            lines.append(
                "No next action needs a value from memory (none after a cut, or every target is new or kept "
                "verbatim): the continuation recall is not measured."
            )
        return "\n".join(lines)

    def key_table(self) -> pd.DataFrame:
        """One row per case: its block, cut, next actions and targets by status."""
        rows = []
        for k in self.keys:
            statuses = [t.status for a in k.actions for t in a.targets]
            rows.append(
                {
                    "block": k.block,
                    "case_id": k.case.id,
                    "session_id": k.case.session_id,
                    "cut": k.case.cut,
                    "next_actions": len(k.actions),
                    **{s: statuses.count(s) for s in STATUSES},
                    "decoys": len(k.decoys),
                }
            )
        return pd.DataFrame(
            rows, columns=["block", "case_id", "session_id", "cut", "next_actions", *STATUSES, "decoys"]
        )


def keys_for(source: Source, params: ContinuationParams, ctx: CompactionContext | None = None) -> ContinuationCases:
    """Key the run's cases: the closed book's (`cases.for_source`) and the recorded block's.

    A run folder's banks are reused (notebook 03 saved them); sessions gathered in memory get theirs built.
    """
    run_cases = exam_cases.for_source(source, params.case_params())
    sessions: dict[str, Session] = dict(run_cases.sessions)
    hays: dict[str, SessionHay] = {}

    def hay(sid: str) -> SessionHay:
        if sid not in hays:
            hays[sid] = session_hay(sessions[sid])
        return hays[sid]

    k, share, seed = int(params.continuation_k), float(params.continuation_decoy_share), int(params.bank_seed)
    keys = [
        build_key("closed", c, sessions[c.session_id], k, decoy_share=share, seed=seed, hay=hay(c.session_id))
        for c in run_cases.cases
    ]
    notes: tuple[str, ...] = ()
    if run_cases.unit == "session":  # imported logs: the compactions their agents recorded
        rec = recorded.for_source(source, params.case_params())
        sessions.update(rec.sessions)
        ctx = ctx or params.context()
        for c in rec.cases:
            s = sessions[c.session_id]
            nxt = strategies.compact(s, "recorded", c.cut, ctx)
            _, _, kept = recorded.kept_region(s, c.cut, nxt)
            keys.append(
                build_key(
                    "recorded", c, s, k, kept=normalise(kept), decoy_share=share, seed=seed, hay=hay(c.session_id)
                )
            )
        notes = rec.notes
    return ContinuationCases(tuple(keys), sessions, run_cases.kind, notes, params.price_table or _priced(source))


def _priced(source: Source) -> str:
    """Return the first price table the cost notebook priced in this run folder ("" when it did not run)."""
    if isinstance(source, Sources):
        return ""
    try:
        cost = runfolder.load_table(Path(source), "cost")
    except FileNotFoundError:
        return ""
    tables = [t for t in cost.get("price_table", pd.Series(dtype=str)).dropna().unique() if str(t)]
    return str(tables[0]) if tables else ""


def closed_recall(source: Source) -> pd.DataFrame:
    """Return the closed book's recall per arm (``exam_recall``) of a run folder; empty when it has none."""
    if isinstance(source, Sources):
        return pd.DataFrame()
    try:
        return runfolder.load_table(Path(source), "exam_recall")
    except FileNotFoundError:
        return pd.DataFrame()


@EXAMS.register("continuation", rank=40, notebook="06_continuation_exam")
class ContinuationExam(Exam[ContinuationCases, ContinuationResult]):
    """The continuation exam (notebook 06): the recorded next actions as the key, needed-next recall per arm."""

    writes = (
        "exam_continuation",
        "continuation_targets",
        "continuation_recall",
        "rediscovery",
        "rediscovery_compactions",
    )
    own_cells = True  # notebook 06's cells

    params_type = ContinuationParams

    def cases(self, source: Source, params: ExamParams) -> ContinuationCases:
        """Key the closed book's cases and the recorded compactions (`keys_for`)."""
        return keys_for(source, ContinuationParams.coerce(params))

    def grade(
        self, cases: ContinuationCases, params: ExamParams, ctx: CompactionContext, *, progress: bool = False
    ) -> ContinuationResult:
        """Project every keyed case with every arm and grade the needed targets each projection holds.

        A model reader (``reader: model``) is also asked for the next step from each projection.
        """
        reader = readers.get_reader(params.reader, **params.reader_options())  # its temperature too
        return run_continuation(
            cases.keys, cases.sessions, params.names, ctx, progress=progress, reader=reader, draws=params.draws
        )

    def tables(
        self, cases: ContinuationCases, result: ContinuationResult, params: ExamParams
    ) -> dict[str, pd.DataFrame]:
        """Return the action rows, the target rows, recall per arm and the rediscovery after real compactions."""
        p = ContinuationParams.coerce(params)
        real = rediscovery.rediscovery(list(cases.sessions.values()), price_table=cases.price_table or None)
        out = {
            "exam_continuation": result.actions,
            "continuation_targets": result.targets,
            "continuation_recall": recall_table(result, n_boot=p.n_boot, seed=p.stats_seed),
            "rediscovery": real.repeats,
            "rediscovery_compactions": real.compactions,
        }
        if result.predictions is not None:  # several draws: every prediction, apart from draw 0's on the actions
            out["continuation_predictions"] = result.predictions
        return out


__all__ = [
    "ACTION_COLUMNS",
    "BLOCKS",
    "CATEGORIES",
    "MODEL_COLUMNS",
    "PREDICTION_COLUMNS",
    "READER_LABEL",
    "STATUSES",
    "TARGET_COLUMNS",
    "ContinuationCase",
    "ContinuationCases",
    "ContinuationExam",
    "ContinuationParams",
    "ContinuationResult",
    "NextAction",
    "Target",
    "build_key",
    "classify",
    "closed_recall",
    "grade_case",
    "holds",
    "keys_for",
    "next_calls",
    "recall_table",
    "run_continuation",
    "targets_of",
]
