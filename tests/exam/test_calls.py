"""A recorded call's arguments read back (`exam.actions.calls`): nested past the bound, they stay the text they were
(issue 44 item 2: ``"[" * 2000 + "]" * 2000`` was a `RecursionError` in notebook 06 and the Inspect task)."""

from __future__ import annotations

import json

import pytest

from compaction_lab.core.bounded_json import MAX_DEPTH
from compaction_lab.core.session import Record
from compaction_lab.exam.actions import next_action
from compaction_lab.exam.actions.calls import agent_calls, call_arguments, call_key, canonical_arguments
from compaction_lab.exam.exams import continuation
from compaction_lab.ingest import ImportAudit, load_sessions
from compaction_lab.ingest.sources import Sources
from tests.deep_json import deep_array, deep_object, write_rollout

#: What the issue's probe sent: 4 KB of brackets, past Python's recursion limit but small enough that the
#: importer keeps it whole (it is refused as JSON there too, so the record holds the text).
PROBE_DEPTH = 2000


@pytest.mark.parametrize(
    "arguments", [deep_array(PROBE_DEPTH), deep_object(PROBE_DEPTH), deep_array(MAX_DEPTH + 1), deep_array()]
)
def test_arguments_nested_past_the_bound_are_kept_as_text(arguments):
    record = Record("s", "e1", 0, 1, "tool_call", f"shell {arguments}", tool="shell", call_id="c1")
    assert call_arguments(record) == arguments
    assert canonical_arguments(record) == arguments
    assert call_key(record) == ("shell", arguments)


def test_arguments_within_the_bound_are_still_parsed():
    nested = deep_array(MAX_DEPTH)
    record = Record("s", "e1", 0, 1, "tool_call", f"shell {nested}", tool="shell", call_id="c1")
    assert call_arguments(record) == json.loads(nested)


def test_an_imported_rollout_with_the_probes_call_runs_the_continuation_exam(tmp_path):
    """The issue's probe end to end: a Codex rollout whose calls carry arguments nested 2,000 levels, imported,
    keyed and graded by the continuation exam (notebook 06's and the Inspect task's path: `keys_for`,
    `offered_tools`, `run_continuation`) without error; the calls' arguments are kept as text."""
    audit = ImportAudit()
    sessions = list(load_sessions(write_rollout(tmp_path, depth=PROBE_DEPTH), audit))
    assert audit.n_skipped == 0 and len(sessions) == 1
    (session,) = sessions
    calls = agent_calls(session)
    assert [call_arguments(c) for c in calls[:2]] == [deep_array(PROBE_DEPTH), deep_object(PROBE_DEPTH)]

    params = continuation.ContinuationParams(
        n_cases=4, n_questions=4, n_decoys=1, tail_tokens=50, window=2000, output_ceiling=200, strategy_names=("full",)
    )
    cases = continuation.keys_for(Sources(tuple(sessions), "imported"), params)
    actions = [a for k in cases.keys for a in k.actions]
    assert [(a.tool, a.arguments) for a in actions][:1] == [("shell", deep_object(PROBE_DEPTH))]
    tools = next_action.offered_tools((), session)
    assert [t["function"]["name"] for t in tools] == ["shell", "apply_patch"]
    result = continuation.run_continuation(list(cases.keys), cases.sessions, ["full"], params.context())
    assert len(result.actions) == len(actions) > 0
