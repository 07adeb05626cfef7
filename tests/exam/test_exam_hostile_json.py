"""JSON the exam reads from others (a model's tool-call arguments, a captured shape's tools, a pointer mix)
is parsed with the one depth bound (`core.bounded_json`, issue 25 item 14): too deep is "not JSON", never
a `RecursionError`."""

from __future__ import annotations

import json

import pytest

from compaction_lab.core.bounded_json import MAX_DEPTH
from compaction_lab.core.projection import Projection, Segment
from compaction_lab.exam.exams.open_book import shape_tools_of
from compaction_lab.exam.questions import bank
from compaction_lab.exam.questions.probes.mining import ProbeSpec
from compaction_lab.exam.readers.model import ModelReader
from tests.deep_json import HOSTILE_DEPTH, deep_array, deep_object


@pytest.mark.parametrize("arguments", [deep_array(), deep_object(), deep_object(MAX_DEPTH + 1)])
def test_a_models_tool_call_nested_past_the_bound_gets_an_error_it_can_read(arguments):
    """Was: `RecursionError` out of the reader (the whole exam arm lost). The harness answers with an error
    naming the problem and counts the call, as for any malformed arguments."""
    calls: list = []
    reply = ModelReader._run({}, {"name": "history_search", "arguments": arguments}, calls)
    assert f"deeper than {MAX_DEPTH} levels" in json.loads(reply)["error"]
    (call,) = calls
    assert call.name == "history_search" and len(call.arguments["raw"]) <= 500


def _with_tools(text: str) -> Projection:
    return Projection("s", "1", "sid", 0, (Segment("tools", "system", text),), 100, "tiktoken")


def test_a_shapes_tools_nested_past_the_bound_read_as_none():
    tools = [{"type": "function", "function": {"name": "bash"}}]
    assert shape_tools_of(_with_tools(json.dumps(tools))) == tuple(tools)
    for depth in (MAX_DEPTH + 1, HOSTILE_DEPTH):
        assert shape_tools_of(_with_tools(deep_array(depth))) == ()


@pytest.mark.parametrize("spec", [bank.BankSpec, ProbeSpec])
def test_a_pointer_mix_nested_past_the_bound_is_a_value_error(spec):
    mix = '{"assistant": ' + deep_array() + "}"
    with pytest.raises(ValueError, match=f"deeper than {MAX_DEPTH} levels"):
        spec.from_mapping({"pointer_mix": mix})
