import pytest

from compaction_lab.projection import Projection, Segment, SummaryRequest


def _proj():
    segs = (
        Segment("system", "system", "SYS"),
        Segment("tools", "system", "[tools]"),
        Segment("user_original", "user", "do X", ("e1",), record_kind="user"),
        Segment("omitted_marker", "user", "[omitted e2]", ("e2",)),
        Segment("tail", "assistant", "ok", ("e3",), record_kind="assistant"),
        Segment("tail", "tool", "out", ("e4",), record_kind="tool_output"),
        Segment("tail", "tool", "out2", ("e5",), record_kind="tool_output"),
    )
    return Projection("s", "v-1", "sess", 6, segs, 1000, "tiktoken").finalize()


def test_segment_validation():
    with pytest.raises(ValueError, match="segment kind"):
        Segment("bogus", "user", "x")
    with pytest.raises(ValueError, match="role"):
        Segment("tail", "robot", "x")


def test_finalize_counts_every_segment():
    p = _proj()
    assert all(s.tokens > 0 for s in p.segments)
    assert p.tokens == sum(s.tokens for s in p.segments)


def test_messages_join_same_role_and_skip_tools():
    msgs = _proj().messages()
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool"]
    assert msgs[1]["content"] == "do X\n\n[omitted e2]"
    assert all("[tools]" not in m["content"] for m in msgs)


def test_text_rows_and_json():
    p = _proj()
    assert p.text().startswith("SYS") and "out2" in p.text()
    rows = p.to_rows("case-1")
    assert [r["position"] for r in rows] == list(range(7)) and rows[3]["entry_ids"] == ["e2"]
    j = p.to_json(include_text=False)
    assert j["tokens"] == p.tokens and "text" not in j["segments"][0] and j["summary_request"] is None
    assert p.entry_ids() == {"e1", "e2", "e3", "e4", "e5"}


def test_summary_request_fingerprints():
    a = SummaryRequest("s", "dedicated", "SYS", (), ({"role": "user", "content": "x"},), "t", 100)
    b = SummaryRequest("s", "dedicated", "SYS", (), ({"role": "user", "content": "y"},), "t", 100)
    c = SummaryRequest("s", "dedicated", "SYS2", (), ({"role": "user", "content": "x"},), "t", 100)
    assert a.fingerprint() != b.fingerprint() and a.shape_fingerprint() == b.shape_fingerprint()
    assert a.shape_fingerprint() != c.shape_fingerprint()
    body = a.to_openai()
    assert body["messages"][0] == {"role": "system", "content": "SYS"} and "tools" not in body
