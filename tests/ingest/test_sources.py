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
    reasons = {(sk.path.rsplit("/", 1)[-1], sk.reason) for sk in got.audit.skipped}
    assert {
        ("junk.jsonl", "unknown_format"),
        ("empty.jsonl", "empty_file"),
        ("corrupt.jsonl.zst", "corrupt_compressed"),
        ("missing", "unreadable"),
    } <= reasons
    # Nothing at all imported: one clear error naming the paths and the skips.
    with pytest.raises(ValueError, match="no sessions imported"):
        sources.gather([str(junk), str(empty)], progress=False)


def test_an_import_saves_its_audit_and_an_old_run_folder_still_opens(tmp_path):
    """The import's audit is stored as import_audit.json; a run folder from before the rename holds
    import_report.json, which `load_audit` reads when the new name is missing."""
    good = tmp_path / "good.jsonl"
    _chat(good, "the port number")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"hello": "world"}\n', encoding="utf-8")
    got = sources.gather([str(good), str(junk)], progress=False)
    assert got.audit is not None and got.audit.n_skipped == 1
    run = tmp_path / "run"
    run.mkdir()
    (run / sources.OLD_AUDIT_FILE).write_text('{"sessions": 99}', encoding="utf-8")  # left by an older run
    sources.save(got, run)
    assert (run / sources.AUDIT_FILE).is_file() and not (run / sources.OLD_AUDIT_FILE).exists()
    saved = sources.load_audit(run)
    assert saved is not None
    assert (saved["files"], saved["sessions"], saved["records"], saved["skipped"]) == (
        got.audit.files,
        got.audit.sessions,
        got.audit.records,
        got.audit.n_skipped,
    )
    assert saved["reasons"] == dict(got.audit.reasons) == {"unknown_format": 1}

    old = tmp_path / "old_run"
    old.mkdir()
    (run / sources.AUDIT_FILE).rename(old / sources.OLD_AUDIT_FILE)
    assert sources.load_audit(old) == saved
    # Both present: the new name wins.
    (old / sources.AUDIT_FILE).write_text(json.dumps({**saved, "sessions": 7}), encoding="utf-8")
    assert sources.load_audit(old)["sessions"] == 7


def test_a_synthetic_run_has_no_audit_and_a_damaged_one_is_one_clear_error(tmp_path):
    synthetic_run = tmp_path / "synthetic"
    synthetic_run.mkdir()
    assert sources.load_audit(synthetic_run) is None
    (synthetic_run / sources.OLD_AUDIT_FILE).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="import_report.json: the import audit is not a JSON object"):
        sources.load_audit(synthetic_run)
    (synthetic_run / sources.AUDIT_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="import_audit.json: cannot read the import audit"):
        sources.load_audit(synthetic_run)
