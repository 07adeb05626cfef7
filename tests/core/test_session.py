import pytest

from compaction_lab.core.session import CONTEXT_KINDS, Record, Session
from tests.helpers import make_session


def test_jsonl_round_trip_is_exact(small_session):
    data = small_session.to_jsonl()
    back = Session.from_jsonl(data)
    assert back == small_session
    assert back.to_jsonl() == data


def test_written_and_read_a_line_at_a_time_it_is_the_same_session_and_bytes(small_session, tmp_path):
    path = tmp_path / "s.jsonl"
    small_session.write_jsonl(path)
    assert path.read_bytes() == small_session.to_jsonl()
    assert b"".join(small_session.jsonl_lines()) == small_session.to_jsonl()
    assert Session.read_jsonl(path) == small_session


def test_a_record_hook_sees_each_record_as_it_is_read_and_its_result_is_kept(small_session, tmp_path):
    path = tmp_path / "s.jsonl"
    small_session.write_jsonl(path)
    seen = []

    def shout(r: Record) -> Record:
        seen.append(r.entry_id)
        return Record(**{**r.to_dict(), "text": r.text.upper()})

    back = Session.read_jsonl(path, shout)
    assert seen == [r.entry_id for r in small_session.records]
    assert [r.text for r in back.records] == [r.text.upper() for r in small_session.records]


def test_reading_lines_skips_blank_ones_and_refuses_none_or_bad_json(small_session):
    lines = [b"\n", *small_session.jsonl_lines(), b"  \n"]
    assert Session.from_lines(lines) == small_session
    with pytest.raises(ValueError, match="empty session JSONL"):
        Session.from_lines([b"\n", b""])
    with pytest.raises(ValueError):  # json.JSONDecodeError, the standard library's own message
        Session.from_lines([next(small_session.jsonl_lines()), b'{"session_id": "s", "text": '])


def test_lines_may_be_str_and_non_ascii_text_survives(tmp_path):
    s = make_session([("user", "café 東京 🚀 — naïve\u2028line"), ("assistant", "ok")])
    path = tmp_path / "s.jsonl"
    s.write_jsonl(path)
    assert Session.read_jsonl(path) == s
    assert Session.from_lines(path.read_text(encoding="utf-8").split("\n")) == s


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


def test_cwd_is_the_recorded_working_directory_or_none():
    def with_meta(meta):
        return Session("s", "test", (), metadata=meta)

    assert with_meta({"cwd": "/w/repo"}).cwd == "/w/repo"
    assert with_meta({"cwd": ""}).cwd is None and with_meta({"cwd": 3}).cwd is None and with_meta({}).cwd is None
