"""Tests for `compaction_lab.ingest.sources`: where a run's sessions come from and how they are saved."""

from __future__ import annotations

import json

import pytest

from compaction_lab.ingest import sources


def _chat(path, text):
    path.write_text(
        json.dumps({"role": "user", "content": text})
        + "\n"
        + json.dumps({"role": "assistant", "content": f"answer to {text}"})
        + "\n",
        encoding="utf-8",
    )


@pytest.mark.parametrize(
    "ids",
    [
        ["a b", "a:b", "a_b", "a-b"],
        ["facts", "Facts", "FACTS"],
        ["Case", "case", "CASE", "x" * 300, "x" * 301],
    ],
)
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


def test_one_bad_explicit_path_is_skipped_and_the_rest_studied(tmp_path):
    """Issue 12 item 7: one unrecognised, empty or corrupt path named in session_paths killed the whole
    my_sessions run, although the profile promises such paths are skipped (the run fails only when
    nothing imports); an empty file was reported as an unknown format."""
    good = tmp_path / "good.jsonl"
    _chat(good, "the build number")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"hello": "world"}\n', encoding="utf-8")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    corrupt = tmp_path / "corrupt.jsonl.zst"
    corrupt.write_bytes(b"\x28\xb5\x2f\xfd" + b"\xff" * 64)
    got = sources.gather([str(junk), str(empty), str(corrupt), str(good), str(tmp_path / "missing")], progress=False)
    assert [s.id for s in got.sessions] == ["good"]
    reasons = {(sk.path.rsplit("/", 1)[-1], sk.reason) for sk in got.report.skipped}
    assert {
        ("junk.jsonl", "unknown_format"),
        ("empty.jsonl", "empty_file"),
        ("corrupt.jsonl.zst", "corrupt_compressed"),
        ("missing", "unreadable"),
    } <= reasons
    # Nothing at all imported: one clear error naming the paths and the skips.
    with pytest.raises(ValueError, match="no sessions imported"):
        sources.gather([str(junk), str(empty)], progress=False)
