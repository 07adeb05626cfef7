"""The tally's tasks: one unit read in pieces by several tasks gives what one reading gives."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from compaction_lab.ingest import ImportAudit, load_sessions
from compaction_lab.ingest.files import Span
from compaction_lab.ingest.units import Unit
from compaction_lab.tally import composition
from compaction_lab.tally import tasks as tally_tasks
from tests.helpers import FIXTURES

CODEX = FIXTURES / "codex"
#: The largest Codex fixture: one session of ~11 KB, tool calls and their outputs far apart.
ONE_SESSION = CODEX / "rollout-2025-09-14T10-02-11-0199a1b2-7c3d-7e10-9f00-5d2c8e4b1a01.jsonl"


def _unit(path: Path) -> Unit:
    return Unit(path, "codex", None, path.stat().st_size)


def _same(a: composition.Tally, b: composition.Tally) -> None:
    pd.testing.assert_frame_equal(a.table, b.table)
    assert a.audit == b.audit


def test_a_session_split_across_tasks_gives_the_tally_of_one_task():
    whole = composition.tally([ONE_SESSION], scheduler="sync")
    pieces = tally_tasks.plan_pieces(_unit(ONE_SESSION), 1024)
    assert len(pieces) >= 5  # the one session is read by several tasks
    split = composition.tally([ONE_SESSION], scheduler="sync", piece_bytes=1024)
    assert (whole.stats.parts, split.stats.parts) == (1, len(pieces))
    _same(split, whole)
    # ... and what the library's own reading gives.
    audit = ImportAudit()
    plain = composition.composition_table(list(load_sessions([ONE_SESSION], audit)), scheduler="sync")
    pd.testing.assert_frame_equal(split.table, plain)
    assert split.audit == audit


@pytest.mark.parametrize("piece_bytes", [200, 700, 3000])
def test_every_codex_fixture_in_pieces_of_any_size_equals_one_reading(piece_bytes):
    """Two sessions in one file, damaged lines (skips with line numbers), sessions without a meta line."""
    whole = composition.tally([CODEX], scheduler="sync")
    split = composition.tally([CODEX], scheduler="sync", piece_bytes=piece_bytes)
    assert split.stats.parts > whole.stats.parts
    assert whole.audit.n_skipped > 0  # the broken fixture's skips are in both, at the same lines
    _same(split, whole)


def test_pieces_start_at_object_lines_after_the_last_session_start_with_their_line_numbers(tmp_path):
    path = tmp_path / "two.jsonl"
    lines = ONE_SESSION.read_bytes().splitlines(keepends=True)
    second = [
        json.dumps({**json.loads(x), "payload": {**json.loads(x)["payload"], "id": "second"}}).encode() + b"\n"
        if b'"session_meta"' in x
        else x
        for x in lines
    ]
    path.write_bytes(b"".join(lines + second))
    second_start = len(b"".join(lines))
    pieces = tally_tasks.plan_pieces(_unit(path), 1024)
    assert len(pieces) > 2
    data = path.read_bytes()
    assert pieces[0].span is not None and pieces[0].span.start == 0 and pieces[0].first
    assert pieces[1].span is not None and pieces[1].span.start > second_start  # the marker line stays in piece 0
    for before, p in zip(pieces[:-1], pieces[1:], strict=True):
        assert p.span is not None and before.span is not None and before.span.end == p.span.start
        assert data[p.span.start : p.span.start + 1] == b"{" and data[p.span.start - 1 : p.span.start] == b"\n"
        assert p.span.first_line == data.count(b"\n", 0, p.span.start) + 1
        assert not p.first and p.size == p.span.end - p.span.start
    assert pieces[-1].span is not None and pieces[-1].span.end == len(data)


def test_no_piece_starts_after_a_line_a_whole_reading_would_hold_back(tmp_path):
    """No piece ends with a line ending in NULs (a crash's tail, maybe), even with blank lines after it."""
    lines = ONE_SESSION.read_bytes().splitlines(keepends=True)
    damaged = [x.rstrip(b"\n") + b"\x00\x00\n" if i % 2 else x for i, x in enumerate(lines)]
    blank = [x + (b"\x00\n\n" if i % 3 else b"\n") for i, x in enumerate(lines)]
    for name, body in (("nul.jsonl", damaged), ("blank.jsonl", blank)):
        path = tmp_path / name
        path.write_bytes(b"".join(body))
        data = path.read_bytes()
        pieces = tally_tasks.plan_pieces(_unit(path), 600)
        assert len(pieces) > 1
        for p in pieces[1:]:
            assert p.span is not None
            assert not data[: p.span.start].rstrip().endswith(b"\x00")
        _same(composition.tally([path], scheduler="sync", piece_bytes=600), composition.tally([path], scheduler="sync"))


def test_small_compressed_or_unsplittable_units_are_read_whole(tmp_path):
    assert tally_tasks.plan_pieces(_unit(ONE_SESSION), ONE_SESSION.stat().st_size) == (_unit(ONE_SESSION),)
    zst = next(CODEX.glob("*.zst"), None) or _zstd_copy(tmp_path)
    assert tally_tasks.plan_pieces(_unit(zst), 100) == (_unit(zst),)
    pi = next((FIXTURES / "public" / "pi").glob("*.jsonl"))
    unit = Unit(pi, "pi", None, pi.stat().st_size)
    assert tally_tasks.plan_pieces(unit, 100) == (unit,)  # pi marks no session starts


def _zstd_copy(tmp_path: Path) -> Path:
    import zstandard

    out = tmp_path / "rollout.jsonl.zst"
    out.write_bytes(zstandard.ZstdCompressor().compress(ONE_SESSION.read_bytes()))
    return out


def test_a_session_read_in_pieces_and_met_again_is_a_duplicate_or_renamed_by_its_content(tmp_path):
    """The digest of a session read in pieces is computed (from one reading) only when its id comes again."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    same = tmp_path / "a" / ONE_SESSION.name
    same.write_bytes(ONE_SESSION.read_bytes())
    edited = tmp_path / "b" / ONE_SESSION.name
    data = ONE_SESSION.read_bytes()
    at = data.rindex(b'"output":"') + len(b'"output":"')
    edited.write_bytes(data[:at] + b"x" + data[at:])  # one character more in the last tool output
    for paths in ([ONE_SESSION, same], [ONE_SESSION, edited], [ONE_SESSION, same, edited], [edited, same, same]):
        whole = composition.tally(paths, scheduler="sync")
        _same(composition.tally(paths, scheduler="sync", piece_bytes=1024), whole)
    assert composition.tally([ONE_SESSION, same, edited], scheduler="sync").audit.reasons["duplicate_session"] == 1
    ids = set(composition.tally([ONE_SESSION, edited], scheduler="sync", piece_bytes=1024).table["session_id"])
    assert len(ids) == 2 and any(i.endswith("~2") for i in ids)


def test_a_later_piece_holding_two_sessions_is_refused():
    read = tally_tasks.read_for_tally(
        _unit(CODEX / "rollout-2025-09-15T08-00-00-two-sessions.jsonl"), "cl100k_base", "tiktoken"
    )
    assert len(read.sessions) == 2
    with pytest.raises(ValueError, match="continues one"):
        tally_tasks.stitch([read, read])


def test_stitched_totals_and_audit_segments():
    whole = tally_tasks.read_for_tally(_unit(ONE_SESSION), "cl100k_base", "tiktoken")
    pieces = tally_tasks.plan_pieces(_unit(ONE_SESSION), 1024)
    reads = [tally_tasks.read_for_tally(p, "cl100k_base", "tiktoken", whole=False) for p in pieces]
    assert all(len(r.sessions) == 1 for r in reads)
    joined = tally_tasks.stitch(reads)
    assert len(joined.sessions) == 1 and len(joined.segments) == 2
    (a,), (b,) = joined.sessions, whole.sessions
    assert (a.session_id, a.n_records, a.totals) == (b.session_id, b.n_records, b.totals)
    assert a.digest is None and b.digest is not None
    assert tally_tasks.session_digest(_unit(ONE_SESSION), 0) == b.digest
    assert isinstance(joined.segments[0], ImportAudit) and joined.segments[1] == ImportAudit()


def test_pieces_of_a_span_keep_its_line_numbers(tmp_path):
    """A span of a large file (not at its start) is cut with the span's own first line."""
    data = ONE_SESSION.read_bytes()
    head = b'{"timestamp":"2025-09-14T10:00:00.000Z","type":"event_msg","payload":{"type":"x"}}\n' * 7
    path = tmp_path / "spanned.jsonl"
    path.write_bytes(head + data)
    span = Span(len(head), len(head) + len(data), 8)
    pieces = tally_tasks.plan_pieces(Unit(path, "codex", span, len(data)), 1024)
    assert len(pieces) > 2
    for p in pieces:
        assert p.span is not None
        assert p.span.first_line == path.read_bytes().count(b"\n", 0, p.span.start) + 1


# --------------------------------------------------------------------------- a pool of forked workers, the JSON


def test_a_tally_on_a_pool_of_forked_workers_equals_this_process(tmp_path):
    """Every fixture, and sessions read in pieces by both workers and met again, as one reading in this process."""
    here = composition.tally([FIXTURES], scheduler="sync")
    pooled = composition.tally([FIXTURES], scheduler="pool")
    assert (pooled.stats.engine, here.stats.engine) == ("pool", "sync")
    _same(pooled, here)
    (tmp_path / "a").mkdir()
    again = tmp_path / "a" / ONE_SESSION.name
    again.write_bytes(ONE_SESSION.read_bytes())
    whole = composition.tally([CODEX, again], scheduler="sync")
    split = composition.tally([CODEX, again], scheduler="pool", piece_bytes=700)
    assert split.stats.parts > whole.stats.parts and whole.audit.reasons["duplicate_session"] == 1
    _same(split, whole)


def test_auto_tallies_from_pool_from_bytes_on_a_pool(monkeypatch):
    from compaction_lab.engine import scheduler

    if not scheduler.fork_available():
        pytest.skip("auto picks a pool only where workers are forked")
    monkeypatch.delenv(scheduler.SCHEDULER_ENV, raising=False)
    size = ONE_SESSION.stat().st_size
    monkeypatch.setattr(scheduler, "POOL_FROM_BYTES", size + 1)
    assert composition.tally([ONE_SESSION]).stats.engine == "sync"
    monkeypatch.setattr(scheduler, "POOL_FROM_BYTES", size)
    pooled = composition.tally([ONE_SESSION])
    assert pooled.stats.engine == "pool"
    _same(pooled, composition.tally([ONE_SESSION], scheduler="sync"))


_AWKWARD = ["a/b", "é\u2028x", '\x7f\x01"\\/\x7f', "😀 \U00020000", "tab\there\n", "<&>", "\\u007f", ""]


@pytest.mark.parametrize("n", [0, 1, len(_AWKWARD)])
def test_the_json_of_a_tally_is_what_pandas_writes(n):
    rows = tuple(
        {"session_id": s, "source_format": "co/dex", "kind": "user", "records": i, "chars": 10**12 + i, "tokens": 0}
        for i, s in enumerate(_AWKWARD[:n])
    )
    t = composition.Tally(rows, ImportAudit(), None)  # no stats needed
    assert t.to_json() == t.table.to_json(orient="records", indent=2)
    real = composition.tally([FIXTURES], scheduler="sync")
    assert real.to_json() == real.table.to_json(orient="records", indent=2)


@pytest.mark.parametrize("scheduler", ["sync", "pool"])
def test_the_tally_command_with_json_imports_no_table_library(scheduler):
    """What a person waits for: ``compaction-lab tally --json`` loads neither pandas nor Dask (nor numpy in this process).

    A pool's workers are forked with numpy loaded (`tally_tasks.prepare`): once, not in each of them.
    """
    import subprocess
    import sys

    heavy = ("pandas", "pyarrow", "altair", "dask", "distributed") + (("numpy",) if scheduler == "sync" else ())
    code = (
        "import sys; from compaction_lab.cli import main; "
        f"rc = main(['tally', '--json', '--scheduler', {scheduler!r}, {str(CODEX)!r}]); "
        f"print([m for m in {heavy!r} if m in sys.modules], rc, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr.strip().splitlines()[-1] == "[] 0"
    assert json.loads(proc.stdout) == json.loads(composition.tally([CODEX], scheduler="sync").to_json())


@pytest.mark.parametrize("scheduler", ["sync", "pool"])
def test_meanwhile_runs_once_here_once_the_first_tasks_are_started(scheduler):
    calls = []
    result = composition.tally([CODEX], scheduler=scheduler, meanwhile=lambda: calls.append(len(calls)))
    assert calls == [0] and result.stats.units > 1
    _same(result, composition.tally([CODEX], scheduler="sync"))
