"""Tests for `compaction_lab.sources`: where a run's sessions come from and how they are saved."""

from __future__ import annotations

import json

import pytest

from compaction_lab import sources


def _chat(path, text):
    path.write_text(json.dumps({"role": "user", "content": text}) + "\n"
                    + json.dumps({"role": "assistant", "content": f"answer to {text}"}) + "\n", encoding="utf-8")


@pytest.mark.parametrize("ids", [
    ["a b", "a:b", "a_b", "a-b"],
    ["facts", "Facts", "FACTS"],
    ["Case", "case", "CASE", "x" * 300, "x" * 301],
])
def test_session_files_are_distinct_for_distinct_ids(ids):
    names = [sources.session_file(i) for i in ids]
    assert len(set(names)) == len(ids)
    # Case-insensitive file systems must not merge them either.
    assert len({n.lower() for n in names}) == len(ids)
    assert all(n.endswith(".jsonl") and "/" not in n and ":" not in n and len(n) < 200 for n in names)
    assert "facts.jsonl" not in names


def test_plain_ids_keep_their_name():
    assert sources.session_file("0195c1de-7f2a-4b1e.x_y") == "0195c1de-7f2a-4b1e.x_y.jsonl"


def test_colliding_ids_and_a_facts_file_are_all_studied(tmp_path):
    """Issue 12 item 3: ids `a b`, `a:b`, `a_b` all became sessions/a_b.jsonl and a chat file named
    facts.jsonl collided with the planted-facts file; the run studied 2 of 4 sessions."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    for stem in ("a b", "a:b", "a_b", "facts"):
        _chat(inbox / f"{stem}.jsonl", f"question from {stem}")
    got = sources.gather([str(inbox)], progress=False)
    assert sorted(s.id for s in got.sessions) == ["a b", "a:b", "a_b", "facts"]
    run = tmp_path / "run"
    sources.save(got, run)
    back = sources.load_saved(run)
    assert sorted(s.id for s in back) == ["a b", "a:b", "a_b", "facts"]
    assert {s.id: s.records for s in back} == {s.id: s.records for s in got.sessions}
