"""The continuation exam's next-action requests through a real local model (llama.cpp, SmolLM2-135M).

Acceptance 4 of the continuation issue: a tiny continuation exam (2 cases, 2 arms, K = 2) sends exactly
the planned next-action requests through the real client and its ledger, grades what comes back, and a
run interrupted and started again sends nothing twice. Model quality is irrelevant.

What comes back: llama.cpp's server honours a forced ``tool_choice`` only when it names one function
(then a grammar makes the call); with ``required`` and the model's own chat template it lets the model
answer freely, and the 135M model answers in text. Such a reply is a step not taken: graded all False,
with no predicted tool. The grade of a real tool call is tested against scripted replies
(``tests/exam/test_next_action.py``); here each row's prediction is checked against the reply the
ledger recorded for it, whatever the model did.
"""

from __future__ import annotations

import pandas as pd
import pytest

from compaction_lab import strategies
from compaction_lab.endpoints import shared
from compaction_lab.endpoints.client import parse_choice
from compaction_lab.exam import readers
from compaction_lab.exam.actions import next_action
from compaction_lab.exam.exams import continuation
from compaction_lab.ingest import synthetic
from compaction_lab.ingest.sources import Sources
from compaction_lab.run import plan
from compaction_lab.store.ledger import open_ledger
from tests.llm_server import MODEL_ALIAS, model_config

pytestmark = pytest.mark.slow

#: Two arms that need no model to compact and whose projections differ (so no request repeats another).
ARMS = ("futureos-deterministic", "truncate-oldest")


@pytest.fixture
def local_model(llm_server, tmp_path, monkeypatch):
    yield model_config(llm_server, tmp_path, monkeypatch, concurrency=1)
    shared._CLIENTS.clear()


def _exam(local_model):
    """One small synthetic chain: 2 cases (one at the session's end: no next action), K = 2."""
    chains = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=4000, seed=3))
    source = Sources(tuple(c.session for c in chains), "synthetic", tuple(chains))
    params = continuation.ContinuationParams(
        strategy_names=ARMS,
        window=1000,
        output_ceiling=200,
        n_cases=2,
        n_questions=3,
        n_decoys=1,
        tail_tokens=300,
        continuation_k=2,
        continuation_decoy_share=1.0,
        reader="model",
        model=local_model,
    )
    return source, params, continuation.keys_for(source, params)


def _run(keys, params, ctx, stop_after: int | None = None) -> pd.DataFrame:
    """Grade every case × arm, the model asked for its next step; `stop_after` requests: a run killed then."""
    reader = readers.get_reader(params.reader, model=params.model)  # a fresh process gets the shared client
    if stop_after is None:  # the exam's own loop, as notebook 06 runs it
        return continuation.run_continuation(keys.keys, keys.sessions, params.names, ctx, reader=reader).actions
    rows: list[dict] = []
    asked = 0
    for cc in keys.keys:
        session = keys.sessions[cc.case.session_id]
        for arm in continuation.strategies_of(cc.block, params.names):
            if stop_after is not None and asked == stop_after:
                return pd.DataFrame(rows, columns=continuation.ACTION_COLUMNS)
            p = strategies.compact(session, arm, cc.case.cut, ctx)
            actions, _ = continuation.grade_case(cc, p, ctx)
            graded = next_action.predict_and_grade(reader, cc, p, ctx.shape.for_session(session).tools, session)
            asked += graded["tool_match"] is not None
            rows += [{**row, **graded} for row in actions]
    return pd.DataFrame(rows, columns=continuation.ACTION_COLUMNS)


def _tool(message) -> str | None:
    """The tool a recorded reply called first (None: it called none)."""
    call = next_action.predicted_call(message)
    return None if call is None else call.tool


def _continuation_calls(ledger_path: str) -> pd.DataFrame:
    calls = open_ledger(ledger_path).calls()
    return calls[calls["purpose"] == next_action.ACTION_PURPOSE]


def test_a_tiny_continuation_exam_sends_the_planned_requests_once(local_model):
    source, params, keys = _exam(local_model)
    assert len(keys.keys) == 2 and sum(1 for k in keys.keys if k.actions) == 1
    planned = plan.continuation_calls(source, params)
    assert planned == len(ARMS)  # the one case with a next action, on each arm
    ctx = params.context()

    # A run killed after its first request, then started again in a new process (a new client, same ledger).
    _run(keys, params, ctx, stop_after=1)
    assert len(_continuation_calls(local_model["ledger"])) == 1
    shared._CLIENTS.clear()
    first = _run(keys, params, ctx)
    sent = _continuation_calls(local_model["ledger"])
    assert len(sent) == planned, sent
    assert (sent["status"] == "done").all() and sent["request_fingerprint"].is_unique
    assert (sent["prompt_tokens"] > 0).all()
    offered = [t["function"]["name"] for t in ctx.shape.tools]
    for call_id in sent["id"]:
        body = open_ledger(local_model["ledger"]).request(call_id)
        assert body["tool_choice"] == "required" and [t["function"]["name"] for t in body["tools"]] == offered
        assert body["messages"][-1]["role"] == "user"  # the model is asked to act, after the agent's last turn

    # Every row of a case × arm is graded (no column left unasked), from what the model really answered.
    assert not first.empty and first[list(next_action.MODEL_GRADE_COLUMNS[2:5])].notna().all().all()
    assert first["acted_on_decoy"].map(lambda v: isinstance(v, bool)).all()
    ledger = open_ledger(local_model["ledger"])
    replies = [parse_choice(ledger.lookup(fp)["response"])[0] for fp in sent["request_fingerprint"]]
    answered = sorted(str(_tool(m)) for m in replies)
    per_strategy = first.drop_duplicates(["case_id", "strategy"])
    assert sorted(str(t) for t in per_strategy["predicted_tool"]) == answered
    for row in per_strategy.itertuples():
        if row.predicted_tool is None:  # the model talked instead of calling: the step was not taken
            assert not (row.tool_match or row.target_match or row.exact_match) and pd.isna(row.matched_rank)
    rates = next_action.model_rates(first)
    assert rates["strategy"].tolist() == list(ARMS) and (rates["n_predicted"] == 1).all()

    # Once more on the same ledger: everything is answered from it, nothing is sent.
    shared._CLIENTS.clear()
    again = _run(keys, params, ctx)
    assert len(_continuation_calls(local_model["ledger"])) == planned
    cols = ["case_id", "strategy", "action_rank", *next_action.MODEL_GRADE_COLUMNS]
    pd.testing.assert_frame_equal(again[cols], first[cols])


def test_a_named_tool_choice_gets_real_tool_calls_from_the_local_model_and_they_are_graded(local_model):
    """llama.cpp forces a call only when `tool_choice` names a function: then the tiny model really calls one, and
    its call is graded against the recorded next actions (the tool it was made to call decides `tool_match`)."""
    source, params, keys = _exam(local_model)
    forced = {"type": "function", "function": {"name": "read_file"}}
    reader = readers.get_reader("model", model=params.model, action_tool_choice=forced)
    ctx = params.context()
    rows = continuation.run_continuation(keys.keys, keys.sessions, params.names, ctx, reader=reader).actions
    asked = rows[rows["tool_match"].notna()].drop_duplicates(["case_id", "strategy"])
    assert len(asked) == plan.continuation_calls(source, params)
    assert (asked["predicted_tool"] == "read_file").all(), asked["predicted_tool"].tolist()
    assert (asked["predicted_by"] == f"model reader: {MODEL_ALIAS}").all()  # the table names who predicted
    for row in asked.itertuples():
        recorded_tools = set(rows.loc[rows["case_id"] == row.case_id, "tool"])
        assert row.tool_match == ("read_file" in recorded_tools)
        assert row.exact_match in (True, False) and row.target_match in (True, False)
        if row.exact_match:
            assert row.predicted_arguments in set(rows.loc[rows["case_id"] == row.case_id, "arguments"])
