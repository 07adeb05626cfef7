"""What the ``model`` summarizer returns for each kind of answer (issue 46: an empty answer is an answer).

A provider that answers normally with no text has billed the call: the summarizer returns ``""`` with
the usage, and each arm decides what an empty summary means. A blank answer stays blank (Codex tells
it from no text); text is stripped as before; no text cut at the output limit stays a failure.
"""

import pytest

from compaction_lab import summarize
from compaction_lab.core.projection import SummaryRequest
from compaction_lab.endpoints import shared
from compaction_lab.summarize.base import SummaryUnavailable
from tests.fake_openai_server import FakeOpenAIServer, Scripted, completion
from tests.helpers import fake_model

USAGE = {"prompt_tokens": 1200, "completion_tokens": 350, "total_tokens": 1550}


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def summarizer(server, tmp_path):
    shared._CLIENTS.clear()  # one client per config per process: a fresh ledger per test
    return summarize.get_summarizer("model", fake_model(server.base_url, tmp_path / "ledger.sqlite"))


def _request(n: int = 0) -> SummaryRequest:
    return SummaryRequest(
        strategy="pi",
        shape="dedicated",
        system="Summarise.",
        tools=(),
        messages=({"role": "user", "content": f"the conversation {n}"},),
        template="pi-checkpoint",
        max_output_tokens=500,
    )


def test_an_empty_answer_is_returned_as_empty_text_with_its_usage(server, summarizer):
    server.script(Scripted(body=completion("", usage=USAGE)))
    res = summarizer.summarize(_request())
    assert res.text == ""
    assert (res.input_tokens, res.output_tokens) == (1200, 350)  # billed: the reasoning it spent counts


def test_no_content_at_all_is_empty_text(server, summarizer):
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    server.script(
        Scripted(body=completion(None, usage=USAGE)),
        Scripted(body=completion(None, tool_calls=[call], finish_reason="tool_calls", usage=USAGE)),
    )
    assert summarizer.summarize(_request(1)).text == ""
    assert summarizer.summarize(_request(2)).text == ""  # a tool call is no text


def test_a_blank_answer_stays_blank_and_text_is_stripped(server, summarizer):
    server.script(Scripted(body=completion(" \n\t ")), Scripted(body=completion("\n  Goal: ship it.  \n")))
    assert summarizer.summarize(_request(1)).text == " \n\t "  # a blank message, not "no message"
    assert summarizer.summarize(_request(2)).text == "Goal: ship it."


def test_no_text_at_the_output_limit_is_still_unavailable(server, summarizer):
    server.script(Scripted(body=completion("", finish_reason="length", usage=USAGE)))
    with pytest.raises(SummaryUnavailable, match="finish_reason=length"):
        summarizer.summarize(_request())


def test_text_cut_at_the_output_limit_is_returned(server, summarizer):
    server.script(Scripted(body=completion("Goal: ship", finish_reason="length")))
    assert summarizer.summarize(_request()).text == "Goal: ship"


def test_a_provider_error_is_unavailable(server, summarizer):
    server.script(Scripted(status=401, body={"error": {"message": "bad key"}}))
    with pytest.raises(SummaryUnavailable):
        summarizer.summarize(_request())


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (None, ""),
        ("", ""),
        ("  ", "  "),
        (" a ", "a"),
        ([{"type": "text", "text": " a"}, {"type": "text", "text": "b "}], "ab"),
        ([{"type": "image_url", "image_url": {"url": "x"}}], ""),
    ],
)
def test_answer_text(content, text):
    from compaction_lab.summarize.endpoint import answer_text  # here: the other tests run without it

    assert answer_text(content) == text
