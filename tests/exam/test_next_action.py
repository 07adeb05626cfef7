"""The continuation exam's model grade: next-action prediction, graded against the recorded next actions.

Grading rules on hand-built keys (tool, target and exact match, the rank that counts, decoys and invented
look-alikes), the request a model reader sends (through a fake client and through a scripted endpoint, whose
ledger answers a repeated request without sending it), the per-arm rates, and the offline count of the
requests a run will send.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from compaction_lab.core.fingerprints import canonical_json
from compaction_lab.core.usage import Usage
from compaction_lab.endpoints import shared
from compaction_lab.exam.actions import next_action
from compaction_lab.exam.actions.keys import ContinuationCase
from compaction_lab.exam.actions.next_action import PredictedCall
from compaction_lab.exam.exams import continuation
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.readers.model import ACTION_TOKENS, ModelReader
from compaction_lab.exam.types import Case
from compaction_lab.ingest import synthetic
from compaction_lab.ingest.sources import Sources
from compaction_lab.run import plan
from compaction_lab.store.ledger import open_ledger
from compaction_lab.summarize.endpoint import TOOL_OUTPUT_PREFIX
from tests.fake_openai_server import FakeOpenAIServer, Scripted, completion
from tests.helpers import make_session

PATH = "src/app/ledger_ops.py"
DECOY = "src/app/ledger_opts.py"


def _call(tool: str, args: dict) -> tuple:
    return ("tool_call", f"{tool} {json.dumps(args, ensure_ascii=False)}", {"tool": tool})


def _session():
    """A session that reads PATH early (covered), works, is cut at 8, then reads PATH again and greps."""
    s = make_session(
        [
            ("user", "Fix the rounding bug in the ledger."),
            _call("read_file", {"path": PATH}),
            ("tool_output", "def round_cents(x):\n    return round(x, 1)  # TICKET-4471"),
            ("assistant", "The rounding keeps one decimal; it should keep two."),
            _call("bash", {"command": "pytest -q tests/test_ledger.py"}),
            ("tool_output", "1 failed"),
            ("assistant", "Let me look again."),
            ("user", "Go on."),
            # cut = 8: everything above is compacted; the tail is [6, 8)
            _call("read_file", {"path": PATH}),
            ("tool_output", "def round_cents(x): ..."),
            _call("grep", {"pattern": "round_cents", "path": "src/app"}),
            ("tool_output", "src/app/ledger_ops.py:1"),
            _call("write_file", {"path": "src/app/ledger_fix.py", "content": "x = 1"}),
        ]
    )
    return dataclasses.replace(s, metadata={"cwd": "/repo"})


def _key(session=None, decoys=(DECOY,)) -> ContinuationCase:
    session = session or _session()
    case = Case(id="c1", session_id=session.id, cut=8, tail_start=6)
    cc = continuation.build_key("closed", case, session, k=3)
    return dataclasses.replace(cc, decoys=tuple(decoys))


def _pred(tool: str, args) -> PredictedCall:
    raw = args if isinstance(args, str) else json.dumps(args)
    return PredictedCall.from_tool_call({"function": {"name": tool, "arguments": raw}})


def _grade(pred, cc=None, session=None):
    session = session or _session()
    cc = cc or _key(session)
    return next_action.grade_prediction(pred, cc, next_action.session_hay(session))


# --------------------------------------------------------------------------- the key these tests grade against


def test_the_hand_built_key_needs_the_path_from_memory():
    cc = _key()
    assert [a.tool for a in cc.actions] == ["read_file", "grep", "write_file"]
    assert PATH in [t.value for t in cc.actions[0].needed]
    assert "src/app/ledger_fix.py" not in [t.value for a in cc.actions for t in a.needed]


# --------------------------------------------------------------------------- tool, target, exact


def test_the_recorded_call_itself_is_an_exact_match_at_its_rank():
    g = _grade(_pred("read_file", {"path": PATH}))
    assert g == {
        "predicted_tool": "read_file",
        "predicted_arguments": canonical_json({"path": PATH}),
        "tool_match": True,
        "target_match": True,
        "exact_match": True,
        "matched_rank": 0,
        "acted_on_decoy": False,
    }
    later = _grade(_pred("grep", {"path": "src/app", "pattern": "round_cents"}))  # key order does not matter
    assert later["exact_match"] and later["matched_rank"] == 1


def test_a_later_exact_match_outranks_an_earlier_tool_match():
    cc = _key()
    grep = next(a for a in cc.actions if a.tool == "grep")
    g = _grade(_pred("grep", json.loads(grep.arguments)), cc)
    assert g["exact_match"] and g["matched_rank"] == grep.rank
    other = _grade(_pred("read_file", {"path": "README.md"}), cc)
    assert other["tool_match"] and not other["target_match"] and not other["exact_match"]
    assert other["matched_rank"] == 0


def test_a_needed_target_through_another_tool_and_another_spelling_is_a_target_match():
    # the absolute form of the relative path (cwd /repo), passed to a shell instead of read_file
    g = _grade(_pred("bash", {"command": f"cat /repo/{PATH}"}))
    assert g["target_match"] and not g["tool_match"] and not g["exact_match"]
    assert g["matched_rank"] == 0


def test_tool_names_compare_case_insensitively():
    g = _grade(_pred("Read_File", {"path": "elsewhere.txt"}))
    assert g["tool_match"] and g["predicted_tool"] == "Read_File"


def test_a_value_json_escapes_is_still_found():
    cc = _key()
    escaped = '{"path": "src\\/app\\/ledger_ops.py"}'  # JSON may escape the slash; the value is the same
    assert PATH not in escaped
    g = next_action.grade_prediction(_pred("read_file", escaped), cc, next_action.session_hay(_session()))
    assert g["target_match"] and g["exact_match"]


def test_no_tool_call_is_graded_all_false():
    g = _grade(None)
    assert g["predicted_tool"] is None and g["predicted_arguments"] is None and g["matched_rank"] is None
    assert g["tool_match"] is False and g["target_match"] is False and g["exact_match"] is False
    assert g["acted_on_decoy"] is False


def test_arguments_that_are_not_json_are_kept_raw_and_never_exact():
    p = _pred("read_file", '{"path": "src/app/ledger_ops.py"')  # cut short by max_tokens
    assert p.arguments == p.raw
    g = _grade(p)
    assert g["target_match"] and not g["exact_match"] and g["predicted_arguments"] == p.raw


def test_the_grade_has_exactly_the_model_columns_of_the_action_table():
    assert set(_grade(None)) == set(next_action.MODEL_GRADE_COLUMNS)
    n = len(next_action.MODEL_GRADE_COLUMNS)
    assert list(next_action.MODEL_GRADE_COLUMNS) == continuation.ACTION_COLUMNS[-n - 1 : -1]
    assert continuation.ACTION_COLUMNS[-1] == "predicted_by"  # who predicted: the reader's label
    assert list(next_action.RATE_COLUMNS) == continuation.MODEL_COLUMNS


# --------------------------------------------------------------------------- decoys and invented objects


def test_passing_a_decoy_is_acting_on_a_hallucinated_object():
    assert _grade(_pred("read_file", {"path": DECOY}))["acted_on_decoy"]
    # a decoy that is no look-alike of anything held counts only because the key lists it
    unlike = _pred("bash", {"command": "gh issue view TICKET-9999"})
    assert _grade(unlike, _key(decoys=("TICKET-9999",)))["acted_on_decoy"]
    assert not _grade(unlike, _key(decoys=()))["acted_on_decoy"]


def test_an_invented_look_alike_of_a_held_object_is_flagged_without_a_decoy_list():
    cc = _key(decoys=())
    invented = "src/app/ledger_opx.py"
    hay = next_action.session_hay(_session())
    assert normalise(invented) not in hay.text
    assert _grade(_pred("read_file", {"path": invented}), cc)["acted_on_decoy"]
    assert next_action.invented_objects(_pred("read_file", {"path": invented}), hay) == [invented]
    # an identifier too: a look-alike of a one-word argument the session passed
    assert _grade(_pred("grep", {"pattern": "round_cent5", "path": "src"}), cc)["acted_on_decoy"]


@pytest.mark.parametrize(
    "args",
    [
        {"path": PATH},  # held by the session
        {"path": "src/app/ledger_fix.py"},  # new before the cut, but the agent really made it later
        {"path": "docs/architecture_notes.md"},  # new and like nothing the session holds
    ],
)
def test_objects_held_created_later_or_unlike_anything_are_not_flagged(args):
    assert not _grade(_pred("read_file", args), _key(decoys=()))["acted_on_decoy"]


def test_short_values_are_never_look_alikes():
    cc = _key(decoys=())
    s = make_session([_call("bash", {"command": "ls abc"}), ("user", "x")])
    s = dataclasses.replace(s, metadata={})
    hay = next_action.session_hay(s)
    assert next_action.invented_objects(_pred("bash", {"command": "ls", "dir": "abcd"}), hay, ["abc"]) == []
    assert not next_action.grade_prediction(_pred("bash", {"dir": "abcd"}), cc, hay)["acted_on_decoy"]


def test_text_alone_checks_look_alikes_against_the_case_targets():
    cc = _key(decoys=())
    text = next_action.session_hay(_session()).text
    assert next_action.grade_prediction(_pred("read_file", {"path": "src/app/ledger_opx.py"}), cc, text)[
        "acted_on_decoy"
    ]
    assert not next_action.grade_prediction(_pred("read_file", {"path": PATH}), cc, text)["acted_on_decoy"]


# --------------------------------------------------------------------------- the request


def test_nothing_is_appended_after_a_user_or_tool_turn_and_a_short_nudge_after_the_agents_own():
    tool_last = [{"role": "system", "content": "s"}, {"role": "tool", "content": "out"}]
    assert next_action.action_messages(tool_last) == tool_last
    user_last = [{"role": "user", "content": "go"}]
    assert next_action.action_messages(user_last) == user_last
    mine = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "I will look."}]
    got = next_action.action_messages(mine)
    assert got[:2] == mine and got[2] == {"role": "user", "content": next_action.NEXT_STEP_PROMPT}
    assert len(mine) == 2  # the projection's list is not changed


class _FakeClient:
    """Answers every request with a scripted assistant message; records the bodies and purposes."""

    def __init__(self, message):
        self.message, self.bodies = message, []

    def complete(self, body, *, purpose, shape_fingerprint=""):
        self.bodies.append((purpose, body))

        class _C:
            message = self.message
            usage = Usage(prompt_tokens=100, completion_tokens=7)

        return _C()


_TOOLS = ({"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},)
_CONFIG = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": ""}


def test_the_model_reader_offers_the_shape_tools_and_requires_a_call():
    call = {"id": "1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": PATH})}}
    client = _FakeClient({"role": "assistant", "content": None, "tool_calls": [call]})
    reader = ModelReader(_CONFIG, _client=client)
    msgs = [{"role": "user", "content": "go"}, {"role": "tool", "content": "out"}]
    got, usage = reader.next_action(msgs, shape_tools=_TOOLS)
    assert got == _pred("read_file", {"path": PATH}) and usage.completion_tokens == 7
    ((purpose, body),) = client.bodies
    assert purpose == next_action.ACTION_PURPOSE == plan.CONTINUATION_PURPOSE
    assert body["tool_choice"] == "required" and body["tools"] == [dict(t) for t in _TOOLS]
    assert body["max_tokens"] == ACTION_TOKENS
    assert body["messages"][-1] == {"role": "user", "content": TOOL_OUTPUT_PREFIX + "out"}  # as every request
    with pytest.raises(ValueError, match="tools"):
        reader.next_action(msgs, shape_tools=())
    assert len(client.bodies) == 1


def test_a_reply_that_talks_instead_of_calling_is_no_prediction():
    reader = ModelReader(_CONFIG, _client=_FakeClient({"role": "assistant", "content": 'read_file {"path": "x"}'}))
    assert reader.next_action([{"role": "user", "content": "go"}], shape_tools=_TOOLS)[0] is None


class _FakeReader:
    def __init__(self, predicted):
        self.predicted, self.asked = predicted, []

    def next_action(self, messages, *, shape_tools):
        self.asked.append((messages, shape_tools))
        return self.predicted, Usage()


def test_predict_and_grade_asks_once_per_projection_and_never_without_an_action_or_a_tool():
    from compaction_lab import strategies
    from compaction_lab.strategies import CompactionContext

    s = _session()
    cc = _key(s)
    p = strategies.compact(s, "full", cc.case.cut, CompactionContext(window=100_000, output_ceiling=1000))
    reader = _FakeReader(_pred("read_file", {"path": PATH}))
    g = next_action.predict_and_grade(reader, cc, p, _TOOLS, s)
    assert g["exact_match"] and g["matched_rank"] == 0
    ((messages, tools),) = reader.asked
    assert messages == next_action.action_messages(p.messages()) and tools == next_action.offered_tools(_TOOLS, s)
    assert tools[: len(_TOOLS)] == _TOOLS  # the shape's first, then the session's own it lacks
    idle = dataclasses.replace(cc, actions=())
    assert next_action.predict_and_grade(reader, idle, p, _TOOLS, s) == next_action.not_asked()
    assert len(reader.asked) == 1
    # no shape tools: the session's own are offered (reconstructed from its calls), so it is still asked
    next_action.predict_and_grade(reader, cc, p, (), s)
    assert reader.asked[-1][1] == next_action.offered_tools((), s) and len(reader.asked) == 2
    # no tool at all (no shape tool, no recorded call): nothing to call, nothing asked
    bare = dataclasses.replace(s, records=tuple(r for r in s.records if r.kind != "tool_call"))
    assert next_action.predict_and_grade(reader, cc, p, (), bare) == next_action.not_asked()
    assert len(reader.asked) == 2


def test_a_repeated_request_is_answered_from_the_ledger_without_being_sent(tmp_path, monkeypatch):
    """What a killed and resumed run relies on: the second identical request costs nothing."""
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    shared._CLIENTS.clear()
    call = {"id": "1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": PATH})}}
    with FakeOpenAIServer() as server:
        server.script(Scripted(body=completion(None, tool_calls=[call])))
        cfg = {**_CONFIG, "base_url": server.base_url, "max_retries": 0, "ledger": str(tmp_path / "ledger.sqlite")}
        msgs = next_action.action_messages([{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}])
        first, _ = ModelReader(cfg).next_action(msgs, shape_tools=_TOOLS)
        shared._CLIENTS.clear()  # a new process: a new client on the same ledger
        again, _ = ModelReader(cfg).next_action(msgs, shape_tools=_TOOLS)
        assert server.count() == 1 and first == again == _pred("read_file", {"path": PATH})
        assert server.requests[0]["body"]["tool_choice"] == "required"
    calls = open_ledger(cfg["ledger"]).calls()
    assert calls["purpose"].tolist() == [next_action.ACTION_PURPOSE] and (calls["status"] == "done").all()
    shared._CLIENTS.clear()


# --------------------------------------------------------------------------- per arm


def _rows(strategy, case_id, n_actions, grade):
    return [
        {"block": "closed", "case_id": case_id, "strategy": strategy, "action_rank": r, **grade}
        for r in range(n_actions)
    ]


def test_model_rates_count_one_prediction_per_case_and_arm():
    hit = {**next_action.not_asked(), "tool_match": True, "target_match": True, "exact_match": False}
    hit["acted_on_decoy"] = False
    miss = {**hit, "tool_match": False, "target_match": False, "acted_on_decoy": True}
    rows = (
        _rows("codex", "c1", 3, hit)
        + _rows("codex", "c2", 2, miss)
        + _rows("full", "c1", 3, hit)
        + _rows("full", "c2", 2, hit)
        + _rows("pi", "c1", 3, next_action.not_asked())  # offline: never asked
    )
    rates = next_action.model_rates(pd.DataFrame(rows))
    assert list(rates.columns) == ["block", "strategy", *continuation.MODEL_COLUMNS]
    assert rates["strategy"].tolist() == ["codex", "full"]
    codex = rates.set_index("strategy").loc["codex"]
    assert codex["n_predicted"] == 2 and codex["tool_match"] == 0.5 and codex["exact_match"] == 0.0
    assert codex["decoy_actions"] == 1
    assert rates.set_index("strategy").loc["full", "target_match"] == 1.0


def test_model_rates_offline_are_an_empty_table_with_the_columns():
    offline = pd.DataFrame(_rows("full", "c1", 2, next_action.not_asked()))
    for frame in (offline, pd.DataFrame(columns=continuation.ACTION_COLUMNS)):
        rates = next_action.model_rates(frame)
        assert rates.empty and list(rates.columns) == ["block", "strategy", *continuation.MODEL_COLUMNS]


# --------------------------------------------------------------------------- the plan


def test_the_offline_plan_counts_cases_with_a_next_action_times_arms():
    chains = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=2, window_tokens=4000, seed=5))
    src = Sources(tuple(c.session for c in chains), "synthetic", tuple(chains))
    arms = ("full", "codex", "truncate-oldest")
    params = continuation.ContinuationParams(
        n_cases=4, n_questions=6, n_decoys=1, tail_tokens=300, window=2000, output_ceiling=200, strategy_names=arms
    )
    cases = exam_cases.for_source(src, params.case_params())
    sessions = {s.id: s for s in src.sessions}
    acting = [
        c
        for c in cases.cases
        if any(r.kind == "tool_call" and r.source_order >= c.cut for r in sessions[c.session_id].records)
    ]
    assert 0 < len(acting) < len(cases.cases)  # some cases end their session: nothing to predict there
    assert plan.continuation_calls(src, params) == len(acting) * len(arms)


def test_an_imported_sessions_own_tools_are_offered_beside_the_shapes():
    """A pi log calls `read` and `bash`; the shape defines `bash` only: `read` is added, reconstructed from the
    recorded calls (its argument names), and a tool the user ran with `!` is not the agent's."""
    from compaction_lab.core.session import Record, Session

    recs = (
        Record("s", "e0", 0, 0, "tool_call", 'read {"path": "a.py", "offset": 3}', tool="read", call_id="c0"),
        Record("s", "e1", 0, 1, "tool_call", 'bash {"command": "ls"}', tool="bash", call_id="c1"),
        Record("s", "e2", 0, 2, "tool_call", 'read {"path": "b.py", "limit": 9}', tool="read", call_id="c2"),
        Record("s", "e3", 0, 3, "tool_call", 'user_tool {"command": "ls"}', tool="user_tool", call_id="e3"),
    )
    session = Session("s", "pi", recs)
    shape = ({"type": "function", "function": {"name": "Bash", "parameters": {}}},)
    tools = next_action.offered_tools(shape, session)
    assert tools[0] is shape[0] and len(tools) == 2
    added = tools[1]["function"]
    assert added["name"] == "read" and added["description"] == next_action.RECONSTRUCTED_TOOL
    assert list(added["parameters"]["properties"]) == ["path", "offset", "limit"]


class _DrawClient(_FakeClient):
    """As `_FakeClient`, taking the draw a request names (each draw a request of its own)."""

    def complete(self, body, *, purpose, shape_fingerprint="", draw=0):
        self.bodies.append((purpose, body, draw))

        class _C:
            message = self.message
            usage = Usage(prompt_tokens=100, completion_tokens=7)

        return _C()


def test_the_next_action_is_asked_every_draw_and_the_rates_count_them():
    """draws > 1: each case × arm's next-action request is sent once per draw (the draw named from the second on);
    `continuation_predictions` keeps every draw, the action rows draw 0's, and the rates count every draw."""
    from compaction_lab.strategies import CompactionContext

    session = _session()
    call = {"id": "1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": PATH})}}
    client = _DrawClient({"role": "assistant", "content": None, "tool_calls": [call]})
    reader = ModelReader(_CONFIG, _client=client)
    ctx = CompactionContext(window=100_000, output_ceiling=1000)
    res = continuation.run_continuation([_key(session)], {session.id: session}, ["full"], ctx, reader=reader, draws=3)
    assert [d for _, _, d in client.bodies] == [0, 1, 2]
    assert list(res.predictions.columns) == continuation.PREDICTION_COLUMNS
    assert list(res.predictions["draw"]) == [0, 1, 2] and res.predictions["tool_match"].all()
    rates = next_action.model_rates(res.predictions)
    assert rates["n_predicted"].tolist() == [3] and rates["tool_match"].tolist() == [1.0]
    one = continuation.run_continuation([_key(session)], {session.id: session}, ["full"], ctx, reader=reader)
    assert one.predictions is None and len(client.bodies) == 4  # one draw: one request, no predictions table
    with pytest.raises(ValueError, match="draws=2 needs a model reader"):
        continuation.run_continuation([_key(session)], {session.id: session}, ["full"], ctx, draws=2)
