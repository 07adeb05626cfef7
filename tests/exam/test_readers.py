import json

import pytest

from compaction_lab.core.projection import Projection, Segment
from compaction_lab.exam.grading import grade
from compaction_lab.exam.readers import (
    HISTORY_GET_TOOL,
    HISTORY_SEARCH_TOOL,
    QUESTION_INSTRUCTION,
    HistoryTools,
    Reader,
    SearcherReader,
    ToolCall,
    VerbatimReader,
    content_words,
    messages_tokens,
    question_message,
    request_messages,
)
from compaction_lab.exam.types import NOT_FOUND, Question
from compaction_lab.store.archive import Archive
from tests.helpers import make_session

SID = "s-hand"
ORDER_ID = "ORD-58213-QX"
CACHE = "lru-shrike-1112"
P95 = "184.532 ms"


def session():
    """A hand-made session; the order id lives only in the tool output e3, the cache name only in e5."""
    return make_session(
        [
            ("system", "You are a coding agent."),
            ("user", "Create a test order for customer Uma Park and keep the p95 under 300 ms."),
            (
                "tool_call",
                'http_request {"method": "POST", "url": "/v1/orders"}',
                {"tool": "http_request", "target": "POST /v1/orders", "call_id": "c1"},
            ),
            (
                "tool_output",
                json.dumps({"order": {"id": ORDER_ID, "customer": "Uma Park", "status": "created"}}),
                {"tool": "http_request", "target": "POST /v1/orders", "call_id": "c1"},
            ),
            ("assistant", f"The p95 latency of GET /v1/orders came out at {P95} across the runs."),
            ("assistant", f"I chose an LRU cache for `load_cart`; the cache profile is named `{CACHE}`."),
            ("user", "Thanks. Now run the tests."),
        ],
        session_id=SID,
    )


def projection(*texts, session_id=SID):
    """A hand-made projection: system prompt, the user's first turn, a summary holding `texts`."""
    segs = [
        Segment("system", "system", "You are a coding agent."),
        Segment("tools", "system", "[]"),
        Segment("user_original", "user", "Create a test order for customer Uma Park.", ("e1",)),
        Segment("summary", "user", "Summary of earlier work:\n" + "\n".join(texts)),
    ]
    return Projection(
        strategy="hand",
        algorithm_version="1",
        session_id=session_id,
        cut=7,
        segments=tuple(segs),
        capacity=10_000,
        estimator="tiktoken",
    )


def question(answer, prompt, entry="", decoy=False, aliases=(), qid="q"):
    return Question(
        id=qid,
        case_id="c",
        pointer="tool",
        category="tool_returned_id",
        prompt=prompt,
        answer=answer,
        aliases=aliases,
        source_entry_id=entry,
        source_order=3 if entry else -1,
        decoy=decoy,
    )


Q_ORDER = question(ORDER_ID, "What order ID did the POST /v1/orders call for customer Uma Park return?", "e3")
Q_CACHE = question(CACHE, "What name did the assistant give the cache profile for `load_cart`?", "e5")
Q_P95 = question(
    P95, "What p95 latency did the assistant report for GET /v1/orders?", "e4", aliases=("184.532ms", "184.532")
)
DECOY = question(
    "idem_z4ubt9cq",
    "What prefix did the assistant choose for idempotency keys on POST /v1/orders?",
    decoy=True,
    qid="d",
)


@pytest.fixture
def archive(tmp_path):
    with Archive(tmp_path / "archive.sqlite") as a:
        a.add_session(session())
        yield a


# --------------------------------------------------------------------------- the request


def test_question_message_is_the_final_user_turn_and_messages_are_not_mutated():
    msgs = projection("nothing").messages()
    before = [dict(m) for m in msgs]
    req = request_messages(msgs, Q_ORDER, wording="You can search.")
    assert msgs == before
    assert req[:-1] == msgs and req[0]["role"] == "system"
    last = req[-1]
    assert last["role"] == "user"
    assert last["content"].startswith(Q_ORDER.prompt)
    assert QUESTION_INSTRUCTION in last["content"] and last["content"].endswith("You can search.")
    assert NOT_FOUND in QUESTION_INSTRUCTION
    assert question_message(Q_ORDER)["content"] == Q_ORDER.prompt + "\n\n" + QUESTION_INSTRUCTION


def test_content_words():
    assert content_words("What ID did the `create_order` call at step 212 return?") == ["ID", "create_order"]
    assert content_words("What error did the backfill_orders job fail with when it ran with batch size 250?") == [
        "error",
        "backfill_orders",
        "job",
        "fail",
        "batch",
        "size",
        "250",
    ]
    assert content_words("What p95 latency did the assistant report for GET /v1/orders?") == [
        "p95",
        "latency",
        "GET",
        "/v1/orders",
    ]
    assert content_words("Which file did the user mention in step #3?") == ["file", "mention"]
    # a backticked span is kept whole even when it is a stop word
    assert content_words("What did `the` return?") == ["the"]


# --------------------------------------------------------------------------- verbatim reader


def test_verbatim_retained_iff_present():
    r = VerbatimReader()
    assert isinstance(r, Reader)
    assert r.stand_in and r.name == "verbatim" and "ceiling" in r.label
    kept = projection(f"The POST returned {ORDER_ID}.").messages()
    dropped = projection("An order was created.").messages()
    a = r.answer(kept, Q_ORDER)
    assert a.given == ORDER_ID and grade(Q_ORDER, a.given) and a.stand_in and a.tool_calls == ()
    assert r.answer(dropped, Q_ORDER).given == NOT_FOUND
    # normalised: case and whitespace do not matter; an alias is enough
    assert r.answer(projection(ORDER_ID.lower()).messages(), Q_ORDER).given == ORDER_ID
    assert r.answer(projection("p95 was 184.532ms").messages(), Q_P95).given == P95


def test_verbatim_does_not_read_the_question_itself():
    q = question("created", "What status did the order get: `created`?", "e3")
    assert VerbatimReader().answer(projection("an order").messages(), q).given == NOT_FOUND


def test_verbatim_answers_decoys_not_found():
    msgs = projection(f"idempotency prefix {DECOY.answer}").messages()  # even if it somehow were there
    assert VerbatimReader().answer(msgs, DECOY).given == NOT_FOUND


def test_verbatim_usage_is_the_request_size():
    msgs = projection("An order was created.").messages()
    a = VerbatimReader().answer(msgs, Q_ORDER)
    assert a.input_tokens == messages_tokens(request_messages(msgs, Q_ORDER)) > 0
    assert a.output_tokens == 0


def test_verbatim_usage_counts_each_list_and_each_question_as_sent():
    # The projection's part is counted once per messages list: every question, wording and list still
    # gets its own request's exact size, and a list changed in place is counted again.
    reader = VerbatimReader()
    msgs = projection("An order was created.", "Then it was shipped to the warehouse in Lyon.").messages()
    other = projection("short").messages()
    for m, q, wording in [
        (msgs, Q_ORDER, ""),
        (msgs, DECOY, ""),
        (msgs, Q_ORDER, "Reworded: what status?"),
        (other, Q_ORDER, ""),
        (msgs, Q_ORDER, ""),
    ]:
        got = reader.answer(m, q, wording=wording).input_tokens
        assert got == messages_tokens(request_messages(m, q, wording))
    msgs.append({"role": "user", "content": "one more message with several more tokens in it"})
    assert reader.answer(msgs, Q_ORDER).input_tokens == messages_tokens(request_messages(msgs, Q_ORDER))


# --------------------------------------------------------------------------- history tools


def test_tool_definitions():
    for tool, name, required in (
        (HISTORY_SEARCH_TOOL, "history_search", ["query"]),
        (HISTORY_GET_TOOL, "history_get", ["entry_id"]),
    ):
        assert tool["type"] == "function"
        assert tool["function"]["name"] == name
        assert tool["function"]["parameters"]["required"] == required
        json.dumps(tool)  # JSON-ready


def test_history_tools_record_every_call(archive):
    ht = HistoryTools(archive, SID)
    found = ht.history_search("Uma Park")
    assert "e3" in found.call.result_entry_ids
    assert json.loads(found.content)["hits"]
    got = ht.history_get("e3")
    assert ORDER_ID in got.records[0].text and ORDER_ID in got.content
    missing = ht.history_get("nope")
    assert missing.records == () and "error" in json.loads(missing.content)
    bad = ht.dispatch("history_search", json.dumps({"query": "   "}))
    assert "error" in json.loads(bad.content)
    assert [c.name for c in ht.calls] == ["history_search", "history_get", "history_get", "history_search"]
    assert ht.calls[1] == ToolCall("history_get", {"entry_id": "e3"}, ("e3",))
    assert ht.calls[2].result_entry_ids == ()
    with pytest.raises(ValueError):
        ht.dispatch("rm", {})


def test_history_search_falls_back_to_any_word(archive):
    ht = HistoryTools(archive, SID)
    hits = ht.history_search("order Uma Park zzzunmatched").hits
    assert hits and hits[0].entry_id in {"e1", "e3"}


def test_history_tools_are_scoped_to_their_session(archive):
    assert HistoryTools(archive, "other").history_search("Uma Park").call.result_entry_ids == ()


# --------------------------------------------------------------------------- searcher reader


def test_searcher_recovers_a_value_the_projection_dropped(archive):
    ht = HistoryTools(archive, SID)
    r = SearcherReader(k=3)
    assert isinstance(r, Reader) and r.stand_in and "stand-in" in r.label and r.name == "searcher"
    msgs = projection("An order was created for Uma Park.").messages()
    a = r.answer(msgs, Q_ORDER, ht.tools())
    assert a.given == ORDER_ID and grade(Q_ORDER, a.given) and a.stand_in
    assert a.tool_calls[0].name == "history_search"
    assert {c.name for c in a.tool_calls[1:]} == {"history_get"}
    assert len(a.tool_calls) <= 1 + 3
    assert any("e3" in c.result_entry_ids for c in a.tool_calls if c.name == "history_get")
    assert list(a.tool_calls) == ht.calls  # the tools recorded exactly what the reader reports
    # it read more than the request: the tool results are sized too
    assert a.input_tokens > messages_tokens(request_messages(msgs, Q_ORDER))


def test_searcher_answers_from_the_projection_without_calls_when_it_can(archive):
    ht = HistoryTools(archive, SID)
    a = SearcherReader().answer(projection(f"cache profile {CACHE}").messages(), Q_CACHE, ht.tools())
    assert a.given == CACHE and a.tool_calls == () and ht.calls == []


def test_searcher_required_searches_even_when_the_projection_has_it(archive):
    ht = HistoryTools(archive, SID)
    a = SearcherReader(search="required").answer(projection(f"cache profile {CACHE}").messages(), Q_CACHE, ht.tools())
    assert a.given == CACHE and a.tool_calls and a.tool_calls[0].name == "history_search"


def test_searcher_answers_decoys_not_found(archive):
    for mode in ("allowed", "required"):
        ht = HistoryTools(archive, SID)
        a = SearcherReader(search=mode).answer(projection("nothing").messages(), DECOY, ht.tools())
        assert a.given == NOT_FOUND and grade(DECOY, a.given)
        assert a.tool_calls  # it looked, and found nothing


def test_searcher_never_mode_and_no_tools_make_no_calls(archive):
    msgs = projection("An order was created.").messages()
    ht = HistoryTools(archive, SID)
    a = SearcherReader(search="never").answer(msgs, Q_ORDER, ht.tools())
    assert a.given == NOT_FOUND and a.tool_calls == () and ht.calls == []
    b = SearcherReader(search="allowed").answer(msgs, Q_ORDER, ())
    assert b.given == NOT_FOUND and b.tool_calls == ()


def test_searcher_ignores_the_wording(archive):
    msgs = projection("An order was created.").messages()
    answers = {
        w: SearcherReader().answer(msgs, Q_ORDER, HistoryTools(archive, SID).tools(), wording=w)
        for w in ("", "Search if needed.", "You MUST search.")
    }
    assert len({(a.given, a.tool_calls) for a in answers.values()}) == 1


def test_searcher_reads_only_the_top_k(archive):
    ht = HistoryTools(archive, SID)
    a = SearcherReader(k=1).answer(projection("x").messages(), Q_P95, ht.tools())
    assert sum(c.name == "history_get" for c in a.tool_calls) <= 1


def test_searcher_rejects_bad_parameters():
    with pytest.raises(ValueError):
        SearcherReader(search="sometimes")
    with pytest.raises(ValueError):
        SearcherReader(k=0)


def test_the_verbatim_reader_never_answers_from_another_projections_text():
    """It normalises a projection once for all its questions; a new list, or the same list grown, is read again."""
    from compaction_lab.exam.readers import VerbatimReader
    from compaction_lab.exam.types import Question

    q = Question("q", "c", "tool", "identifier", "Which ID?", "ORD-58213")
    reader = VerbatimReader()
    held = [{"role": "user", "content": "the order is ORD-58213"}]
    assert reader.answer(held, q).given == "ORD-58213"
    assert reader.answer(held, q).given == "ORD-58213"  # asked again of the same projection
    dropped = [{"role": "user", "content": "the order was dropped"}]
    assert reader.answer(dropped, q).given == "NOT_FOUND"
    dropped.append({"role": "assistant", "content": "now ORD-58213 again"})  # the same list, grown
    assert reader.answer(dropped, q).given == "ORD-58213"
    assert reader.answer(held, q).given == "ORD-58213"
