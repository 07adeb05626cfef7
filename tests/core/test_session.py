import pytest

from compaction_lab.core.session import CONTEXT_KINDS, Record, Session
from tests.helpers import make_session


def test_jsonl_round_trip_is_exact(small_session):
    data = small_session.to_jsonl()
    back = Session.from_jsonl(data)
    assert back == small_session
    assert back.to_jsonl() == data


def test_records_must_be_in_strict_source_order():
    a = Record("s", "e0", 0, 5, "user", "x")
    b = Record("s", "e1", 0, 5, "assistant", "y")
    with pytest.raises(ValueError, match="source_order"):
        Session(id="s", source_format="t", records=(a, b))


def test_record_session_id_must_match():
    with pytest.raises(ValueError, match="belongs to session"):
        Session(id="other", source_format="t", records=(Record("s", "e0", 0, 0, "user", "x"),))


def test_unknown_kind_rejected():
    with pytest.raises(ValueError, match="unknown record kind"):
        Record("s", "e0", 0, 0, "chatter", "x")


def test_meta_is_not_context(small_session):
    assert "meta" not in CONTEXT_KINDS
    meta_chars = sum(r.chars for r in small_session if r.kind == "meta")
    assert meta_chars > 0
    assert small_session.chars == sum(r.chars for r in small_session) - meta_chars


def test_pointer_classes():
    s = make_session([("user", "a"), ("reasoning", "b"), ("tool_output", "c"), ("system", "d")])
    assert [r.pointer for r in s] == ["user", "assistant", "tool", None]
