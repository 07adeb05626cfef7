"""Units of import: spans of whole sessions, audit segments, the admission rule — each reading equals one reading."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import zstandard

from compaction_lab.ingest import ImportAudit, importer, load_sessions, plan
from compaction_lab.ingest.files import Span
from compaction_lab.ingest.import_audit import MAX_SKIP_DETAILS
from compaction_lab.ingest.importers import codex
from compaction_lab.ingest.units import Admission, read_unit, split_spans
from tests.helpers import FIXTURES

CODEX = sorted((FIXTURES / "codex").glob("*.jsonl"))


def _concatenated(folder: Path, bom: bool = False) -> Path:
    """Every Codex fixture back to back in one file: several sessions (one resumed: same id twice), a broken line."""
    out = folder / "many.jsonl"
    data = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in CODEX)
    out.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return out


def _sessions(paths, **kw):
    audit = ImportAudit()
    return [(s.id, s.records, s.metadata) for s in load_sessions(paths, audit, **kw)], audit


@pytest.mark.parametrize("bom", [False, True])
def test_spans_start_where_the_importer_starts_a_session(tmp_path, bom):
    path = _concatenated(tmp_path, bom)
    spans = split_spans(path, codex, target=1)  # every session boundary becomes a cut
    assert spans is not None and len(spans) >= 3
    lines = path.read_bytes().split(b"\n")
    for span in spans[1:]:
        # Each later span opens on a session_meta line naming a new session, at its true line number.
        first = lines[span.first_line - 1]
        assert b'"session_meta"' in first and path.read_bytes()[span.start :].startswith(first)
    assert spans[0].start == 0 and spans[-1].end == path.stat().st_size
    assert all(a.end == b.start for a, b in zip(spans, spans[1:], strict=False))


@pytest.mark.parametrize("bom", [False, True])
def test_reading_span_by_span_equals_reading_the_file(tmp_path, bom):
    path = _concatenated(tmp_path, bom)
    whole_audit, split_audit = ImportAudit(), ImportAudit()
    whole = list(codex.load(path, whole_audit))
    split = [s for span in split_spans(path, codex, target=1) or [] for s in codex.load(path, split_audit, span=span)]
    assert [(s.id, s.records) for s in split] == [(s.id, s.records) for s in whole]
    assert split_audit == whole_audit and whole_audit.n_skipped > 0  # the broken fixture's lines, at the same numbers


def test_marker_lines_that_open_no_session_are_no_cuts(tmp_path):
    """The marker inside another line's text, a malformed or not-UTF-8 marker line, CRLF and no final newline.

    Only lines the importer itself would start a session at become cuts, at their true offsets and line numbers.
    """
    meta = '{"timestamp":"t","type":"session_meta","payload":{"id":"%s"}}'
    said = '{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":"%s"}}'
    lines = [
        meta % "a",
        said % 'quoting \\"session_meta\\" and {\\"type\\":\\"session_meta\\"}',
        '{"type":"session_meta","payload":{"id":"b"}',  # malformed: cut off
        r'{"type":"session_meta","payload":{"id":"b\xff"}}',  # not UTF-8 (the escape is replaced below)
        meta % "b",
        said % "in b",
        meta % "b",  # resumed: the same id continues b
        meta % "c",
        said % "in c, no final newline",
    ]
    data = "\r\n".join(lines).encode().replace(b"\\xff", b"\xff")
    path = tmp_path / "marked.jsonl"
    path.write_bytes(data)
    spans = split_spans(path, codex, target=1)
    assert spans is not None
    starts = [(s.start, s.first_line) for s in spans]
    offset = {i + 1: data.index(line.encode()) for i, line in enumerate(lines) if line in (meta % "b", meta % "c")}
    assert starts == [(0, 1), (offset[5], 5), (data.index((meta % "c").encode()), 8)]
    whole_audit, split_audit = ImportAudit(), ImportAudit()
    whole = list(codex.load(path, whole_audit))
    split = [s for span in spans for s in codex.load(path, split_audit, span=span)]
    assert [(s.id, s.records) for s in split] == [(s.id, s.records) for s in whole]
    assert [s.id for s in whole] == ["a", "b", "c"] and split_audit == whole_audit and whole_audit.n_skipped == 2


def test_a_resumed_session_is_not_cut_in_two(tmp_path):
    """The same id in a second session_meta continues the session: no span starts there."""
    path = FIXTURES / "codex" / "rollout-2025-09-15T08-00-00-two-sessions.jsonl"
    spans = split_spans(path, codex, target=1)
    starts = {s.first_line for s in spans or []}
    assert 5 not in starts  # line 5 repeats the id of line 2


def test_small_compressed_or_unmarked_files_are_read_whole(tmp_path):
    path = _concatenated(tmp_path)
    assert split_spans(path, codex, target=path.stat().st_size) is None  # less than twice the target
    zst = tmp_path / "many.jsonl.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
    assert split_spans(zst, codex, target=1) is None
    assert split_spans(next((FIXTURES / "pi").glob("*.jsonl")), importer("pi"), target=1) is None
    with pytest.raises(ValueError, match="compressed"):
        list(codex.load(zst, ImportAudit(), span=Span(0, 10)))


def test_a_split_plan_gives_the_sessions_and_audit_of_one_reading(tmp_path):
    path = _concatenated(tmp_path)
    paths = [path, FIXTURES]  # the public sessions (tests/fixtures/public) included
    whole, whole_audit = _sessions(paths)
    steps = list(plan(paths, split_bytes=1))
    assert sum(1 for st in steps if st.unit and st.unit.span) >= 3
    split, split_audit = _sessions(paths, engine="sync")  # the engine's reading: split plan, units as tasks
    assert split == whole and split_audit == whole_audit
    assert whole_audit.reasons["duplicate_session"] > 0  # the concatenated file repeats the fixtures


def test_audit_segments_merge_into_the_units_audit():
    path = FIXTURES / "codex" / "rollout-2025-09-16T12-00-00-broken.jsonl"
    one = ImportAudit()
    list(codex.load(path, one))
    merged = ImportAudit()
    pairs = list(read_unit(next(st.unit for st in plan([path]) if st.unit), codex))
    for segment, _ in pairs:
        merged.merge(segment)
    assert pairs[-1][1] is None and merged == one and one.n_skipped > 0


def test_merge_caps_skip_details_as_one_audit_would():
    a, b, one = ImportAudit(), ImportAudit(), ImportAudit()
    for i in range(MAX_SKIP_DETAILS - 3):
        a.skip("a", i, "malformed_json")
        one.skip("a", i, "malformed_json")
    for i in range(10):
        b.skip("b", i, "invalid_utf8")
        one.skip("b", i, "invalid_utf8")
    b.note("lone_surrogates_replaced", 2)
    one.note("lone_surrogates_replaced", 2)
    a.merge(b)
    assert a == one and len(a.skipped) == MAX_SKIP_DETAILS and a.n_skipped == MAX_SKIP_DETAILS + 7


def test_admission_keeps_identical_data_once_and_renames_other_content():
    adm = Admission()
    assert adm.admit("codex", "s", b"1") == "s"
    assert adm.admit("codex", "s", b"1") is None
    assert adm.admit("codex", "s", b"2") == "s~2"
    assert adm.admit("pi", "s", b"1") == "s"  # another format: another id space
    assert dataclasses.is_dataclass(adm)
