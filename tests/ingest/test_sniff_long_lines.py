"""Sniffing a source whose first line is longer than the head (issue 44 item 9).

A first line past the `files.HEAD_BYTES` window was judged by a regular expression written for one JSON
spacing (Codex's compact form) or not at all (chat JSONL): a chat log whose first conversation carries a
long system prompt, or a rollout written with ``", "`` / ``": "`` separators, was an ``unknown_format`` skip
and lost whole. Now the first line is read on, as far as it goes, into a bounded outline of its JSON
(`ingest.outline`), and every sniffer judges that as it judges a parsed line.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from compaction_lab.ingest import ImportAudit, detect, load_sessions
from compaction_lab.ingest.files import HEAD_BYTES, read_head
from compaction_lab.ingest.outline import OUTLINE_CHARS, outline
from tests.helpers import FIXTURES

#: A system prompt of 200 KB: three times the head.
PROMPT = "Follow the repository conventions; run the tests you touch. " * 3400

SEPARATORS = {"compact": (",", ":"), "spaced": (", ", ": "), "wide": (" ,  ", " :\t ")}


def _write(path: Path, objs: list[dict], separators: tuple[str, str]) -> Path:
    path.write_text("".join(json.dumps(o, separators=separators) + "\n" for o in objs), "utf-8")
    return path


def _import(path: Path) -> tuple[list, ImportAudit]:
    audit = ImportAudit()
    return list(load_sessions(path, audit)), audit


@pytest.mark.parametrize("spacing", SEPARATORS)
@pytest.mark.parametrize("role_last", [False, True])
def test_chat_jsonl_whose_first_conversation_is_200_kb_imports(tmp_path, spacing, role_last):
    system = {"content": PROMPT, "role": "system"} if role_last else {"role": "system", "content": PROMPT}
    first = {"messages": [system, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    second = {"messages": [{"role": "user", "content": "and again"}, {"role": "assistant", "content": "yes"}]}
    p = _write(tmp_path / "chats.jsonl", [first, second], SEPARATORS[spacing])
    assert p.stat().st_size > 3 * HEAD_BYTES
    assert detect(p) == "chat_jsonl"
    sessions, audit = _import(p)
    assert audit.n_skipped == 0 and len(sessions) == 2
    assert PROMPT in [r.text for r in sessions[0].records]


def _rollout(prompt: str) -> list[dict]:
    fixture = FIXTURES / "codex" / "rollout-2025-09-14T10-02-11-0199a1b2-7c3d-7e10-9f00-5d2c8e4b1a01.jsonl"
    objs = [json.loads(ln) for ln in fixture.read_text("utf-8").splitlines() if ln.strip()]
    objs[0]["payload"]["base_instructions"] = {"text": prompt}
    return objs


@pytest.mark.parametrize("spacing", SEPARATORS)
@pytest.mark.parametrize("prompt", ["short", PROMPT])
def test_a_codex_rollout_with_any_spacing_and_a_long_first_line_imports(tmp_path, spacing, prompt):
    objs = _rollout(prompt)
    p = _write(tmp_path / "rollout-2025-09-14T10-02-11-spaced.jsonl", objs, SEPARATORS[spacing])
    assert detect(p) == "codex"
    sessions, audit = _import(p)
    assert audit.n_skipped == 0 and len(sessions) == 1
    assert sessions[0].metadata["system_prompt"] == prompt
    compact = _write(tmp_path / "compact.jsonl", objs, SEPARATORS["compact"])
    (same,), _ = _import(compact)
    assert [r.to_dict() for r in sessions[0].records] == [r.to_dict() for r in same.records]


def test_a_claude_code_line_with_its_keys_past_the_head_is_recognised(tmp_path):
    """The link keys after a pasted image of 200 KB: a scan of the head's text could not see them."""
    first = {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "image", "source": {"data": "A" * 200_000}}]},
        "parentUuid": None,
        "sessionId": "s-late",
        "uuid": "u-1",
    }
    nxt = {"type": "assistant", "parentUuid": "u-1", "sessionId": "s-late", "uuid": "u-2", "message": {}}
    p = _write(tmp_path / "late.jsonl", [first, nxt], SEPARATORS["spaced"])
    assert detect(p) == "claude_code"


def test_a_long_first_line_that_is_not_json_is_still_unknown(tmp_path):
    p = tmp_path / "notes.jsonl"
    p.write_text("x" * (3 * HEAD_BYTES) + "\n", "utf-8")
    _, audit = _import(p)
    assert [s.reason for s in audit.skipped] == ["unknown_format"]


def test_the_outline_keeps_the_shape_and_short_values_and_bounds_the_rest():
    text = json.dumps(
        {"type": "t", "n": 3.5, "ok": True, "none": None, "long": "y" * 10_000, "list": [1, [2, {"k": "v"}]]}
    ).encode()
    got = outline(text[:5], _chunks(text[5:], 7))
    assert got["type"] == "t" and got["n"] == 3.5 and got["ok"] is True and got["none"] is None
    assert got["long"] == "y" * OUTLINE_CHARS and got["list"] == [1, [2, {"k": "v"}]]
    escaped = json.dumps({"a": 'q"\\\u00e9\n' * 3, "b": 1}).encode()
    assert outline(escaped[:3], _chunks(escaped[3:], 2)) == json.loads(escaped)
    assert outline(b"not json at all", iter(())) is None
    assert outline(b'{"cut": "the line ends in', iter(())) == {"cut": "the line ends in"}


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64])
def test_what_is_read_past_never_hides_a_later_key(chunk):
    """Members past `OUTLINE_ITEMS` are read past by counting brackets: brackets, quotes and backslashes
    inside strings, cut anywhere by the chunks, do not end the array early or late."""
    tricky = ['x]\\"}', "\\", '[{"', "\\\\]", "\\u005d", "]]]"]
    members = [tricky[i % len(tricky)] if i % 3 else {"k": [tricky[i % len(tricky)], {"n": i}]} for i in range(200)]
    text = json.dumps({"first": members, "role": "found", "last": [1, "]"]}).encode()
    got = outline(text[:1], _chunks(text[1:], chunk))
    assert got["role"] == "found" and got["last"] == [1, "]"] and got["first"] == members[: len(got["first"])]


def _chunks(data: bytes, n: int):
    return iter(data[i : i + n] for i in range(0, len(data), n))


def test_reading_a_huge_first_line_costs_a_bounded_outline(tmp_path):
    """A first line of 24 MB (a pasted file, deep structures) is read through in chunks: the head costs a
    small fraction of it, whatever its shape."""
    big = {
        "messages": [
            {"role": "system", "content": "z" * 8_000_000},
            {"role": "user", "content": [{"type": "text", "text": str(i)} for i in range(200_000)]},
        ],
        "deep": json.loads("[" * 150 + "]" * 150),
        "keys": {f"k{i}": i for i in range(100_000)},
    }
    p = tmp_path / "huge.jsonl"
    p.write_text(json.dumps(big) + "\n", "utf-8")
    assert p.stat().st_size > 10_000_000
    tracemalloc.start()
    try:
        head = read_head(p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6_000_000
    (first,) = head.objects
    assert first["messages"][0] == {"role": "system", "content": "z" * OUTLINE_CHARS}
    assert len(json.dumps(first)) < 1_000_000
