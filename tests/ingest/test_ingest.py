"""The registry: detection, directory walks, duplicate sessions, the unknown-format error."""

import shutil

import pytest

from compaction_lab import ingest
from compaction_lab.ingest import ImportAudit, IngestError, UnknownFormat, load_sessions
from tests.helpers import FIXTURES, PUBLIC_FIXTURES

HERE_FIXTURES = FIXTURES

#: Today's importers in their sniffing order (most specific first). An added importer needs no edit here.
TODAYS_ORDER = ("opencode", "swe_agent", "codex", "claude_code", "pi", "chat_jsonl")


def test_importers_register_themselves_in_sniffing_order():
    assert [f for f in ingest.formats() if f in TODAYS_ORDER] == list(TODAYS_ORDER)
    assert ingest.formats() == ingest.IMPORTERS.names()
    for fmt in ingest.formats():
        imp = ingest.importer(fmt)
        # what the `Importer` protocol asks of a module: its format name, a sniffer, a loader
        assert imp.FORMAT == fmt and callable(imp.sniff) and callable(imp.load)
    with pytest.raises(IngestError, match="unknown format 'nope'; known: opencode, swe_agent, codex"):
        ingest.importer("nope")


def test_unknown_file_is_one_clear_error(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"hello": 1}\n')
    with pytest.raises(UnknownFormat) as info:
        ingest.detect(f)
    for fmt in ingest.formats():
        assert fmt in str(info.value)


def test_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        list(load_sessions(tmp_path / "nope"))


def test_directory_walk_counts_unknown_files_and_ignores_non_candidates(tmp_path):
    shutil.copy(HERE_FIXTURES / "chat_jsonl" / "fix-flaky-test.jsonl", tmp_path / "a.jsonl")
    (tmp_path / "junk.jsonl").write_text('{"hello": 1}\n')
    (tmp_path / "README.md").write_text("# not a session\n")
    audit = ImportAudit()
    sessions = list(load_sessions(tmp_path, audit))
    assert [s.source_format for s in sessions] == ["chat_jsonl"]
    assert audit.reasons["unknown_format"] == 1 and audit.files == 1


def test_identical_session_from_two_sources_is_kept_once():
    audit = ImportAudit()
    storage = HERE_FIXTURES / "opencode" / "storage"
    export = HERE_FIXTURES / "opencode" / "export.json"
    sessions = list(load_sessions([storage, export], audit))
    assert len(sessions) == 1
    assert audit.reasons["duplicate_session"] == 1


def test_same_id_different_content_is_kept_under_a_new_id(tmp_path):
    src = HERE_FIXTURES / "chat_jsonl" / "fix-flaky-test.jsonl"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    shutil.copy(src, tmp_path / "one" / "s.jsonl")
    lines = src.read_text().splitlines()
    (tmp_path / "two" / "s.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    audit = ImportAudit()
    sessions = list(load_sessions(tmp_path, audit))
    assert [s.id for s in sessions] == ["s", "s~2"]
    assert sessions[1].metadata["renamed_from"] == "s"
    assert all(r.session_id == "s~2" for r in sessions[1].records)
    assert audit.n_skipped == 0


def test_every_real_fixture_is_detected_by_content(tmp_path):
    expected = {"claude-code": "claude_code", "pi": "pi", "swe-agent": "swe_agent"}
    for folder, fmt in expected.items():
        for f in (PUBLIC_FIXTURES / folder).iterdir():
            # Renamed to a neutral name: detection must not rely on the file name.
            neutral = tmp_path / f"{folder}-{f.stem}.data"
            shutil.copy(f, neutral)
            assert ingest.detect(neutral) == fmt, f


def test_real_fixtures_import_without_skips():
    audit = ImportAudit()
    sessions = list(load_sessions(PUBLIC_FIXTURES, audit))
    assert audit.n_skipped == 0, audit.skipped
    assert {s.source_format for s in sessions} == {"claude_code", "pi", "swe_agent"}
    assert audit.records == sum(len(s.records) for s in sessions)
