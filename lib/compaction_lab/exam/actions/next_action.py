"""The continuation exam's model grade: from the projection, does a model take the step the agent took.

The offline grade (`continuation`, needed-next recall) says whether a projection still *holds* what the
next actions need. This one asks a model reader to act on it (`action_messages`: the projection as the
agent's own next request, the shape's tools plus `offered_tools`, ``tool_choice`` ``required``) and
grades the first call it makes against the recorded next actions (`grade_prediction`:
``tool_match``, ``target_match``, ``exact_match``, ``matched_rank``, ``acted_on_decoy``;
`MODEL_GRADE_COLUMNS`). Requests go through the ledger, so a resumed run sends nothing twice.
`model_rates` turns the rows into the per-arm rates of ``continuation_recall``.

Design: docs/exams.md#8a-continuation-notebook-06 (the "Model grade" paragraphs)
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from compaction_lab.core import bounded_json
from compaction_lab.core.fingerprints import canonical_json
from compaction_lab.core.session import Record, Session
from compaction_lab.exam.actions.calls import agent_calls, call_arguments
from compaction_lab.exam.actions.targets import OBJECT_CATEGORIES, SessionHay, forms, leaves, objects_of, session_hay
from compaction_lab.exam.grading import normalise

if TYPE_CHECKING:
    from compaction_lab.core.projection import Projection
    from compaction_lab.exam.actions.keys import ContinuationCase

#: The ledger purpose of a next-action request (`plan` counts them by it).
ACTION_PURPOSE = "exam:continuation"

#: The one user turn added when the projection ends on the agent's own turn (module docstring): it asks
#: for an action and names no tool and no value.
NEXT_STEP_PROMPT = "Continue with the next step."

#: The columns of ``exam_continuation`` this grade fills (None where no prediction was asked).
MODEL_GRADE_COLUMNS: tuple[str, ...] = (
    "predicted_tool",
    "predicted_arguments",
    "tool_match",
    "target_match",
    "exact_match",
    "matched_rank",
    "acted_on_decoy",
)

#: Per-arm rates `model_rates` returns, after ``block`` and ``strategy`` (`continuation.MODEL_COLUMNS`).
RATE_COLUMNS: tuple[str, ...] = ("n_predicted", "tool_match", "target_match", "exact_match", "decoy_actions")

#: `difflib.SequenceMatcher` ratio from which an object absent from the session is a look-alike of one it holds.
LOOKALIKE_RATIO = 0.85

#: The shortest value that can be a look-alike (``abc`` and ``abcd`` already reach the ratio).
LOOKALIKE_MIN_CHARS = 6


# --------------------------------------------------------------------------- the predicted call


@dataclass(frozen=True)
class PredictedCall:
    """The tool call a model made when asked to take the next step.

    Attributes
    ----------
    tool : str
        The function's name, as the model wrote it.
    arguments : str
        Canonical JSON of the arguments (`core.fingerprints.canonical_json`: the form
        `keys.NextAction.arguments` is in), or the raw text when it is not JSON (cut short by
        ``max_tokens``, or malformed).
    raw : str
        The arguments exactly as the model sent them.
    """

    tool: str
    arguments: str
    raw: str

    @classmethod
    def from_tool_call(cls, tool_call: Mapping[str, Any]) -> PredictedCall:
        """Read one OpenAI tool call (``{"function": {"name", "arguments"}}``, as `ChatClient` returns it)."""
        fn = tool_call.get("function") or {}
        raw = fn.get("arguments")
        raw = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {}, ensure_ascii=False)
        try:
            # The model's JSON is someone else's: nested too deep reads as not JSON, like malformed.
            arguments = canonical_json(bounded_json.loads(raw)) if raw.strip() else ""
        except ValueError:
            arguments = raw
        return cls(str(fn.get("name") or ""), arguments, raw)

    def decoded(self) -> Any:
        """Return the arguments decoded from JSON, or the raw text when they are not JSON."""
        try:
            return bounded_json.loads(self.arguments) if self.arguments else ""
        except ValueError:
            return self.raw


def predicted_call(message: Mapping[str, Any]) -> PredictedCall | None:
    """Return the first tool call of an assistant message, None when it called no tool."""
    calls = message.get("tool_calls") or []
    first = calls[0] if calls and isinstance(calls[0], Mapping) else None
    return None if first is None else PredictedCall.from_tool_call(first)


def action_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the request's messages: the projection's, and `NEXT_STEP_PROMPT` only after the agent's own turn.

    Parameters
    ----------
    messages : sequence of dict
        `Projection.messages` exactly.
    """
    out = [dict(m) for m in messages]
    if not out or out[-1].get("role") not in ("user", "tool"):
        out.append({"role": "user", "content": NEXT_STEP_PROMPT})
    return out


# --------------------------------------------------------------------------- what the session holds


def _call_record(session_id: str, predicted: PredictedCall, source_order: int = 0) -> Record:
    """Return the predicted call as the tool-call record an importer would have written (`core.text.tool_call_text`)."""
    return Record(
        session_id=session_id,
        entry_id="predicted",
        block_index=0,
        source_order=source_order,
        kind="tool_call",
        text=f"{predicted.tool} {predicted.raw}".strip(),
        tool=predicted.tool,
    )


def _lookalike(value: str, known: Iterable[str]) -> str | None:
    """Return the first of `known` that `value` is a near look-alike of (`LOOKALIKE_RATIO`), None if none."""
    for k in known:
        if k == value or min(len(k), len(value)) * 2 < LOOKALIKE_RATIO * (len(k) + len(value)):
            continue  # the ratio cannot reach the bar: too different in length
        m = difflib.SequenceMatcher(None, value, k, autojunk=False)
        if (
            m.real_quick_ratio() >= LOOKALIKE_RATIO
            and m.quick_ratio() >= LOOKALIKE_RATIO
            and m.ratio() >= LOOKALIKE_RATIO
        ):
            return k
    return None


# --------------------------------------------------------------------------- the grade


def not_asked() -> dict[str, Any]:
    """Return the model-grade columns of a row no prediction was asked for (offline, or a case with no next action)."""
    return dict.fromkeys(MODEL_GRADE_COLUMNS)


def call_text(predicted: PredictedCall) -> str:
    """Return the normalised text a predicted call's arguments are searched in: their JSON and their decoded strings."""
    strings = "\n".join(leaves(predicted.decoded()))
    return normalise(f"{predicted.tool} {predicted.raw}") + "\n" + normalise(strings)


def invented_objects(predicted: PredictedCall, hay: SessionHay | str, known: Iterable[str] = ()) -> list[str]:
    """Return the objects the call names that occur nowhere in the session but look like one it holds.

    Parameters
    ----------
    predicted : PredictedCall
    hay : SessionHay or str
        The session normalised (`session_hay`), or only its normalised text (then the look-alikes are
        sought among `known` alone).
    known : iterable of str
        More objects the session holds (the case's targets).
    """
    text = hay if isinstance(hay, str) else hay.text
    cwd = None if isinstance(hay, str) else hay.cwd
    record = _call_record(hay.session.id if isinstance(hay, SessionHay) else "", predicted)
    absent = [v for v in objects_of(record, predicted.decoded()) if not any(f in text for f in forms(v, cwd))]
    if not absent:
        return []
    pool = [normalise(k.lstrip("@")) for k in known]
    if isinstance(hay, SessionHay):
        pool += hay.objects
    pool = list(dict.fromkeys(p for p in pool if p))
    return [
        v
        for v in absent
        if len(v.lstrip("@")) >= LOOKALIKE_MIN_CHARS and _lookalike(normalise(v.lstrip("@")), pool) is not None
    ]


def grade_prediction(
    predicted: PredictedCall | None, cc: ContinuationCase, hay_text: SessionHay | str
) -> dict[str, Any]:
    """Grade a predicted call against a case's recorded next actions (module docstring, "The grade").

    Parameters
    ----------
    predicted : PredictedCall or None
        The model's first tool call; None when it made none.
    cc : ContinuationCase
        The case's key: its next actions (their needed targets) and its decoys.
    hay_text : SessionHay or str
        The whole session normalised (`session_hay`), where an object must be absent to be invented; its
        normalised text alone is accepted too (then look-alikes are sought among the case's targets only).

    Returns
    -------
    dict
        The `MODEL_GRADE_COLUMNS`: ``predicted_tool``, ``predicted_arguments``, ``tool_match``,
        ``target_match``, ``exact_match``, ``matched_rank`` and ``acted_on_decoy``.
    """
    if predicted is None:
        return {
            **not_asked(),
            "tool_match": False,
            "target_match": False,
            "exact_match": False,
            "acted_on_decoy": False,
        }
    text = call_text(predicted)
    tool = predicted.tool.casefold()
    exact = [a.rank for a in cc.actions if a.tool.casefold() == tool and a.arguments == predicted.arguments]
    target = [a.rank for a in cc.actions if any(f in text for t in a.needed for f in t.forms)]
    same_tool = [a.rank for a in cc.actions if a.tool.casefold() == tool]
    rank = next((ranks[0] for ranks in (exact, target, same_tool) if ranks), None)
    cwd = hay_text.cwd if isinstance(hay_text, SessionHay) else None
    decoy = any(f in text for d in cc.decoys for f in forms(d, cwd))
    if not decoy:
        known = [t.value for a in cc.actions for t in a.targets]
        decoy = bool(invented_objects(predicted, hay_text, known))
    return {
        "predicted_tool": predicted.tool,
        "predicted_arguments": predicted.arguments,
        "tool_match": bool(same_tool),
        "target_match": bool(target),
        "exact_match": bool(exact),
        "matched_rank": rank,
        "acted_on_decoy": decoy,
    }


def predict_and_grade(
    reader: Any,
    cc: ContinuationCase,
    projection: Projection,
    shape_tools: Sequence[Mapping[str, Any]],
    session: Session,
    draw: int = 0,
) -> dict[str, Any]:
    """Ask the reader for the next step from one projection and grade its call (one request per case × arm × draw).

    Parameters
    ----------
    reader : object
        A reader with ``next_action(messages, *, shape_tools) -> (PredictedCall | None, usage)``
        (`exam.readers.model.ModelReader`).
    cc : ContinuationCase
    projection : Projection
        The arm's projection of the case.
    shape_tools : sequence of dict
        The call shape's tool definitions (``ctx.shape.for_session(session).tools``); the session's own
        tools the shape lacks are offered beside them (`offered_tools`).
    session : Session
        The case's session (where an invented object must be absent).
    draw : int
        Which asking of the same request this is (0, 1, ...: a request of its own each; 0 as before draws).

    Returns
    -------
    dict
        The `MODEL_GRADE_COLUMNS`. A case with no recorded next action, or a shape with no tools to call,
        is not asked (`not_asked`: every column None), so nothing is sent for it.
    """
    tools = offered_tools(shape_tools, session)
    if not cc.actions or not tools:
        return not_asked()
    again = {"draw": draw} if draw else {}  # draw 0 is asked as before draws existed (any reader takes it)
    predicted, _usage = reader.next_action(action_messages(projection.messages()), shape_tools=tools, **again)
    return grade_prediction(predicted, cc, session_hay(session))


#: The description of a tool definition reconstructed from a session's recorded calls (`offered_tools`).
RECONSTRUCTED_TOOL = "reconstructed from the session's recorded calls (its harness's definition is not in the log)"


def offered_tools(shape_tools: Sequence[Mapping[str, Any]], session: Session) -> tuple[Mapping[str, Any], ...]:
    """Return the tools a next-action request offers: the call shape's, and the session's own the shape lacks.

    An imported log was written by a harness whose tools are named otherwise (pi's ``read``, Claude Code's
    ``Read``, Codex's ``shell``) than the call shape's; offered only the shape's, a model could never call
    the tool the agent called, and ``tool_match`` would measure the shape, not memory. So every tool the
    session's agent called that the shape does not define (names compared case-insensitively) is added,
    in the order first called, as a definition reconstructed from its recorded calls: its name, the
    argument names it was called with (each of any type), and `RECONSTRUCTED_TOOL` as its description —
    not the harness's own definition, which the log does not hold.
    """
    known = {str((t.get("function") or {}).get("name", "")).casefold() for t in shape_tools}
    seen: dict[str, dict[str, None]] = {}
    for r in agent_calls(session):
        name = r.tool or ""
        if not name or name.casefold() in known:
            continue
        args = call_arguments(r)
        keys = seen.setdefault(name, {})
        if isinstance(args, Mapping):
            for k in args:
                keys.setdefault(str(k))
    added = tuple(
        {
            "type": "function",
            "function": {
                "name": name,
                "description": RECONSTRUCTED_TOOL,
                "parameters": {"type": "object", "properties": {k: {} for k in keys}},
            },
        }
        for name, keys in seen.items()
    )
    return (*shape_tools, *added)


# --------------------------------------------------------------------------- per arm


def model_rates(actions: pd.DataFrame) -> pd.DataFrame:
    """Per block × arm: how many cases a prediction was asked for, and the share that matched.

    Parameters
    ----------
    actions : DataFrame
        ``exam_continuation`` rows (one per block × case × arm × next action; every action row of a case ×
        arm carries its one prediction), or ``continuation_predictions`` (one per case × arm × draw, with
        ``draw``: every draw counted). Rows never asked (``tool_match`` None) are left out.

    Returns
    -------
    DataFrame
        ``block``, ``strategy``, then `RATE_COLUMNS`: ``n_predicted`` (cases × arm asked, × draws),
        ``tool_match``, ``target_match``, ``exact_match`` (shares of them, 0..1) and ``decoy_actions``
        (how many acted on a decoy or an invented look-alike). Arms in the order of `actions`; no row
        for an arm never asked (offline: an empty table).
    """
    cols = ["block", "strategy", *RATE_COLUMNS]
    if actions.empty or "tool_match" not in actions.columns:
        return _empty_rates(cols)
    # One prediction per case × arm (× draw, in a table of several draws): repeated on each action row.
    one = ["block", "case_id", "strategy", *(["draw"] if "draw" in actions.columns else [])]
    asked = actions[actions["tool_match"].notna()].drop_duplicates(one)
    if asked.empty:
        return _empty_rates(cols)
    asked = asked.assign(
        **{c: asked[c].astype(bool) for c in ("tool_match", "target_match", "exact_match", "acted_on_decoy")}
    )
    out = (
        asked.groupby(["block", "strategy"], sort=False)
        .agg(
            n_predicted=("case_id", "size"),
            tool_match=("tool_match", "mean"),
            target_match=("target_match", "mean"),
            exact_match=("exact_match", "mean"),
            decoy_actions=("acted_on_decoy", "sum"),
        )
        .reset_index()
    )
    return out.astype({"n_predicted": "int64", "decoy_actions": "int64"})[cols]


def _empty_rates(cols: list[str]) -> pd.DataFrame:
    dtypes: dict[str, str] = {"block": "object", "strategy": "object", "n_predicted": "int64", "decoy_actions": "int64"}
    return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, "float64")) for c in cols})


__all__ = [
    "ACTION_PURPOSE",
    "LOOKALIKE_MIN_CHARS",
    "LOOKALIKE_RATIO",
    "MODEL_GRADE_COLUMNS",
    "NEXT_STEP_PROMPT",
    "OBJECT_CATEGORIES",
    "RATE_COLUMNS",
    "PredictedCall",
    "SessionHay",
    "action_messages",
    "call_text",
    "grade_prediction",
    "invented_objects",
    "model_rates",
    "not_asked",
    "offered_tools",
    "predict_and_grade",
    "predicted_call",
    "session_hay",
]
