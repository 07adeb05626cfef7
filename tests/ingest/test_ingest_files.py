"""File-level faults (issue #12): the one file-opening path and the one folder walk.

Every importer reads through `ingest.files` (BOM, lone surrogates, NUL tails,
compression damage, unreadable files) and `load_sessions` walks folders once
(`iter_sources`: links to folders followed once, loop-safe, every skip counted
with its reason). Each test here failed on the code before the issue was
fixed, except the ones marked as guards.

Permission-denied files and folders: the suite may run as root, for whom
``chmod 000`` denies nothing. The `permission_bits` fixture then makes the
owner's read bit bite in the library's one ``open`` and in ``os.scandir``
(what the kernel does for everyone else); as a normal user it does nothing and
the kernel denies for real, so the same tests hold either way.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
import zstandard

from compaction_lab import cli
from compaction_lab.ingest import detect, files, importer, load_sessions
from compaction_lab.ingest.files import HEAD_BYTES, read_head
from compaction_lab.ingest.import_audit import NOTES, REASONS, ImportAudit, UnknownFormat
from tests.helpers import FIXTURES, PUBLIC_FIXTURES

FIX = FIXTURES
CHAT = FIX / "chat_jsonl" / "fix-flaky-test.jsonl"
PI = FIX / "pi" / "main.jsonl"
TRAJ = FIX / "swe_agent" / "function_calling.traj"
EXPORT = FIX / "opencode" / "export.json"
STORAGE = FIX / "opencode" / "storage"
BOM = b"\xef\xbb\xbf"


# --------------------------------------------------------------------------- helpers


def imported(paths) -> tuple[list, ImportAudit]:
    audit = ImportAudit()
    return list(load_sessions(paths, audit)), audit


def direct(fmt: str, path: Path) -> tuple[list, ImportAudit]:
    audit = ImportAudit()
    return list(importer(fmt).load(path, audit)), audit


def skips(audit: ImportAudit) -> list[tuple[int | None, str]]:
    return [(s.line, s.reason) for s in audit.skipped]


def records(sessions) -> list[tuple]:
    return [(s.id, r.entry_id, r.block_index, r.kind, r.text) for s in sessions for r in s.records]


def strings(value) -> list[str]:
    """Every str inside a JSON-like value (keys included)."""
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            out.extend(k for k in v if isinstance(k, str))
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return out


def assert_utf8_clean(sessions) -> None:
    """What SQLite, parquet and every UTF-8 writer need: no str the strict codec refuses."""
    for s in sessions:
        for text in [s.id, *strings(dict(s.metadata))] + [t for r in s.records for t in strings(r.to_dict())]:
            text.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate


def lines_of(path: Path, n: int | None = None) -> list[bytes]:
    lines = path.read_bytes().splitlines(keepends=True)
    return lines[:n] if n else lines


# --------------------------------------------------------------------------- 1. lone surrogates


ISSUE_CHAT = b'{"role":"user","content":"hi \\ud800 there"}\n{"role":"assistant","content":"ok"}\n'


def test_issue_file_imports_into_the_archive(tmp_path):
    """The reporter's command: `import` of a chat log with a lone surrogate no longer crashes."""
    from compaction_lab.store.archive import Archive

    (tmp_path / "chat.jsonl").write_bytes(ISSUE_CHAT)
    assert cli.main(["import", str(tmp_path / "chat.jsonl"), "--archive", str(tmp_path / "a.sqlite"), "--quiet"]) == 0
    with Archive(tmp_path / "a.sqlite", readonly=True) as arch:
        assert [r.text for r in arch.get("L1")] == ["hi \ufffd there"]


def test_lone_surrogate_is_replaced_and_noted_not_skipped(tmp_path):
    (tmp_path / "chat.jsonl").write_bytes(ISSUE_CHAT)
    sessions, audit = imported(tmp_path / "chat.jsonl")
    assert [r.text for r in sessions[0].records] == ["hi \ufffd there", "ok"]
    assert audit.notes == Counter(lone_surrogates_replaced=1) and audit.n_skipped == 0
    assert "lone_surrogates_replaced 1" in audit.summary()
    assert set(audit.notes) <= set(NOTES) and not set(NOTES) & set(REASONS)
    assert_utf8_clean(sessions)


def test_folder_with_a_lone_surrogate_file_imports_every_file(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(ISSUE_CHAT)
    shutil.copy(CHAT, tmp_path / "b.jsonl")
    sessions, audit = imported(tmp_path)
    assert sorted(s.id for s in sessions) == ["a", "b"] and audit.n_skipped == 0
    assert_utf8_clean(sessions)


def _with_surrogate(path: Path, needle: bytes, tmp_path: Path, name: str | None = None) -> Path:
    """A copy of a fixture whose first `needle` (a JSON string's opening) gets a lone surrogate."""
    data = path.read_bytes()
    assert needle in data, needle
    out = tmp_path / (name or path.name)
    out.write_bytes(data.replace(needle, needle + b"\\uDC80x", 1))
    return out


@pytest.mark.parametrize(
    "fmt, src, needle",
    [
        ("chat_jsonl", CHAT, b'"content": "'),
        ("pi", PI, b'"text": "'),
        ("claude_code", FIX / "claude_code" / "main.jsonl", b'"text": "'),
        (
            "codex",
            FIX / "codex" / "rollout-2025-09-14T10-02-11-0199a1b2-7c3d-7e10-9f00-5d2c8e4b1a01.jsonl",
            b'"text":"The CSV',
        ),
        ("swe_agent", TRAJ, b'"content": "'),
        ("opencode", EXPORT, b'"text": "'),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_importer_replaces_lone_surrogates(tmp_path, fmt, src, needle):
    path = _with_surrogate(src, needle, tmp_path)
    sessions, audit = direct(fmt, path)
    clean, clean_audit = direct(fmt, src)
    assert_utf8_clean(sessions)
    assert audit.notes["lone_surrogates_replaced"] == 1 and audit.reasons == clean_audit.reasons
    assert len(records(sessions)) == len(records(clean))
    assert any("\ufffdx" in r.text for s in sessions for r in s.records)


def test_surrogates_in_json_nested_in_a_string_are_replaced(tmp_path):
    """Codex keeps tool arguments as a JSON string; a surrogate escaped inside it reaches the target."""
    line = {
        "timestamp": "t",
        "type": "response_item",
        "payload": {
            "type": "function_call",
            "name": "shell",
            "call_id": "c1",
            "arguments": '{"command": ["bash", "-lc", "cat caf\\ud800.txt"]}',
        },
    }
    path = tmp_path / "rollout.jsonl"
    path.write_text(json.dumps(line) + "\n")
    sessions, audit = direct("codex", path)
    (rec,) = sessions[0].records
    assert rec.target == "cat caf\ufffd.txt"
    assert_utf8_clean(sessions)


def test_opencode_storage_and_database_rows_replace_surrogates(tmp_path):
    from tests.ingest.test_ingest_opencode import build_db

    tree = tmp_path / "storage"
    shutil.copytree(STORAGE, tree)
    part = sorted((tree / "part").glob("*/*.json"))[0]
    doc = part.read_bytes()
    part.write_bytes(doc.replace(b'"text": "', b'"text": "\\ud800', 1) if b'"text": "' in doc else doc)
    sessions, audit = direct("opencode", tree)
    assert audit.notes["lone_surrogates_replaced"] == 1
    assert_utf8_clean(sessions)

    db = build_db(tmp_path / "opencode.db", extra_rows=False)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE part SET data = ? WHERE id = (SELECT min(id) FROM part)",
            (json.dumps({"type": "text", "text": "\ud800"}, ensure_ascii=True),),
        )
    sessions, audit = direct("opencode", db)
    assert audit.notes["lone_surrogates_replaced"] == 1
    assert_utf8_clean(sessions)


def test_opencode_database_row_that_is_not_utf8_is_one_skip(tmp_path):
    """A row SQLite cannot decode as UTF-8 used to end the whole database (OperationalError)."""
    from tests.ingest.test_ingest_opencode import build_db

    db = build_db(tmp_path / "opencode.db", extra_rows=False)
    clean, _ = direct("opencode", db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE part SET data = CAST(? AS TEXT) WHERE id = (SELECT max(id) FROM part)", (b'{"x": "\xff"}',)
        )
    sessions, audit = direct("opencode", db)
    assert audit.reasons == Counter(invalid_utf8=1)
    assert len(records(sessions)) >= len(records(clean)) - 2  # one part (a call and its output at most)


def test_valid_surrogate_pairs_are_kept_and_not_noted(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b'{"role": "user", "content": "ok \\ud83d\\ude00"}\n')
    sessions, audit = imported(path)
    assert sessions[0].records[0].text == "ok \U0001f600" and not audit.notes


# --------------------------------------------------------------------------- 4. compressed files


def reference_decode(data: bytes) -> tuple[bytes, bool]:
    """What a zstd decoder can deliver before failing, fed one byte at a time: (bytes, failed).

    Independent of the library: the oracle of "every byte decoded before the damage".
    """
    dctx, out, dobj, failed = zstandard.ZstdDecompressor(), bytearray(), None, False
    for i in range(len(data)):
        if dobj is None:
            dobj = dctx.decompressobj()
        try:
            out += dobj.decompress(data[i : i + 1])
        except zstandard.ZstdError:
            failed = True
            break
        if dobj.eof:
            dobj = None
    return bytes(out), failed or dobj is not None


def compress_in_blocks(data: bytes, lines_per_block: int = 3, checksum: bool = True) -> bytes:
    """zstd as a log writer makes it: one frame, flushed every few lines (many small blocks)."""
    cctx = zstandard.ZstdCompressor(write_checksum=checksum)
    chunks, lines = [], data.splitlines(keepends=True)
    obj = cctx.compressobj()
    for i in range(0, len(lines), lines_per_block):
        chunks.append(obj.compress(b"".join(lines[i : i + lines_per_block])))
        chunks.append(obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
    chunks.append(obj.flush())
    return b"".join(chunks)


def _damaged(data: bytes, frac: float) -> tuple[bytes, int]:
    """`data` with the first byte at or after `frac` of it, that the decoder notices, flipped."""
    start = int(len(data) * frac)
    for pos in range(start, len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        if reference_decode(bytes(bad))[1]:
            return bytes(bad), pos
    raise AssertionError("no detectable damage position")


def test_zstd_damage_keeps_every_line_decoded_before_it(tmp_path):
    plain = b"".join(lines_of(PI)) * 3
    packed = compress_in_blocks(plain)
    bad, pos = _damaged(packed, 0.8)
    good, failed = reference_decode(bad)
    assert failed and 0 < len(good) < len(plain)
    complete = good[: good.rfind(b"\n") + 1]
    cut_line = complete.count(b"\n") + 1

    (tmp_path / "s.jsonl.zst").write_bytes(bad)
    (tmp_path / "want").mkdir()
    (tmp_path / "want" / "s.jsonl").write_bytes(complete)
    sessions, audit = direct("pi", tmp_path / "s.jsonl.zst")
    want, _ = direct("pi", tmp_path / "want" / "s.jsonl")
    assert records(sessions) == records(want)  # every record of the complete lines, nothing else
    assert skips(audit) == [(cut_line, "corrupt_compressed")]
    assert "compressed byte" in audit.skipped[0].detail


def test_zstd_damage_so_early_nothing_decodes_is_corrupt_compressed_not_unknown(tmp_path):
    plain = b"".join(lines_of(CHAT))
    bad = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(plain))
    bad[8] ^= 0xFF
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(bytes(bad))
    assert reference_decode(bytes(bad)) == (b"", True)
    for where in (path, tmp_path):  # named and found in a folder
        sessions, audit = imported(where)
        assert sessions == [] and skips(audit) == [(1, "corrupt_compressed")], audit.skipped
        assert "compressed byte" in audit.skipped[0].detail
    assert read_head(path).damage is not None


def test_cut_off_zst_file_keeps_its_complete_lines(tmp_path):
    plain = b"".join(lines_of(CHAT))
    packed = compress_in_blocks(plain, lines_per_block=2)
    cut = packed[: len(packed) * 2 // 3]
    good, failed = reference_decode(cut)
    assert failed and good
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(cut)
    sessions, audit = direct("chat_jsonl", path)
    complete = good[: good.rfind(b"\n") + 1]
    (tmp_path / "want").mkdir()
    (tmp_path / "want" / "c.jsonl").write_bytes(complete)
    assert records(sessions) == records(direct("chat_jsonl", tmp_path / "want" / "c.jsonl")[0])
    assert skips(audit) == [(complete.count(b"\n") + 1, "corrupt_compressed")]
    assert "mid-frame" in audit.skipped[0].detail


def test_read_head_reads_through_the_same_recovering_path(tmp_path):
    plain = b"".join(lines_of(CHAT))
    bad, _ = _damaged(compress_in_blocks(plain, lines_per_block=1), 0.5)
    good, _ = reference_decode(bad)
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(bad)
    head = read_head(path)
    assert head.raw == good[:HEAD_BYTES] and head.damage is not None
    assert head.damage.decoded == len(good)
    assert detect(path) == "chat_jsonl"


def test_multi_frame_zst_imports_every_frame(tmp_path):
    """Guard: frames written one after another (appends, ``cat a.zst b.zst``) are all read."""
    lines = lines_of(CHAT)
    half = len(lines) // 2
    cctx = zstandard.ZstdCompressor()
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(cctx.compress(b"".join(lines[:half])) + cctx.compress(b"".join(lines[half:])))
    sessions, audit = direct("chat_jsonl", path)
    clean, _ = direct("chat_jsonl", CHAT)
    assert [r.text for r in sessions[0].records] == [r.text for r in clean[0].records] and audit.n_skipped == 0


def test_damaged_compressed_whole_json_document_is_one_skip(tmp_path):
    bad = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(TRAJ.read_bytes()))
    bad[len(bad) // 2] ^= 0xFF
    path = tmp_path / "t.traj.zst"
    path.write_bytes(bytes(bad))
    sessions, audit = direct("swe_agent", path)
    assert sessions == [] and list(audit.reasons) == ["corrupt_compressed"]


# --------------------------------------------------------------------------- 5. unreadable, symlinks, one walk


def test_unreadable_named_file_is_counted_not_raised(tmp_path, permission_bits):
    path = tmp_path / "s.jsonl"
    shutil.copy(CHAT, path)
    path.chmod(0)
    sessions, audit = imported([path, CHAT])
    assert [s.id for s in sessions] == [CHAT.stem.replace(".jsonl", "")]
    assert skips(audit) == [(None, "unreadable")] and "Permission denied" in audit.skipped[0].detail


def test_unreadable_subfolder_and_file_are_counted_and_the_rest_imports(tmp_path, permission_bits):
    shutil.copy(CHAT, tmp_path / "a.jsonl")
    (tmp_path / "locked").mkdir()
    shutil.copy(CHAT, tmp_path / "locked" / "b.jsonl")
    shutil.copy(CHAT, tmp_path / "c.jsonl")
    (tmp_path / "c.jsonl").chmod(0)
    (tmp_path / "locked").chmod(0)
    try:
        sessions, audit = imported(tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert [s.id for s in sessions] == ["a"]
    assert audit.reasons == Counter(unreadable=2)
    assert {Path(s.path).name for s in audit.skipped} == {"locked", "c.jsonl"}
    assert all("Permission denied" in s.detail for s in audit.skipped)


def test_unreadable_opencode_storage_files_are_counted(tmp_path, permission_bits):
    tree = tmp_path / "storage"
    shutil.copytree(STORAGE, tree)
    part_dir = sorted((tree / "part").iterdir())[0]
    msg_file = sorted((tree / "message").glob("*/*.json"))[-1]
    part_dir.chmod(0)
    msg_file.chmod(0)
    try:
        sessions, audit = direct("opencode", tree)
    finally:
        part_dir.chmod(0o755)
    assert len(sessions) == 1
    assert audit.reasons["unreadable"] == 2
    assert {Path(s.path).name for s in audit.skipped if s.reason == "unreadable"} == {part_dir.name, msg_file.name}


def test_unreadable_opencode_database_named_explicitly_is_counted(tmp_path, permission_bits):
    from tests.ingest.test_ingest_opencode import build_db

    db = build_db(tmp_path / "opencode.db", extra_rows=False)
    db.chmod(0)
    sessions, audit = imported(db)
    assert sessions == [] and list(audit.reasons) == ["unreadable"]


def test_symlinked_folders_are_followed_once_and_loops_counted(tmp_path):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(CHAT, root / "sub" / "a.jsonl")
    shutil.copy(PI, elsewhere / "b.jsonl")
    os.symlink(elsewhere, root / "linked")  # followed: it is the only way in
    os.symlink("..", root / "sub" / "up")  # a loop back into the walk
    os.symlink(root / "sub", root / "again")  # a second way into sub
    os.symlink(root / "linked", root / "zz-twice")  # and a second way into elsewhere
    sessions, audit = imported(root)
    assert sorted(s.source_path.split("/")[-2] + "/" + s.id for s in sessions) == [
        "linked/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
        "sub/a",
    ]
    assert audit.reasons == Counter(symlink_loop=1, duplicate_path=2)
    loop = next(s for s in audit.skipped if s.reason == "symlink_loop")
    assert loop.path == str(root / "sub" / "up")


def test_dangling_and_looping_file_links_are_counted(tmp_path):
    shutil.copy(CHAT, tmp_path / "a.jsonl")
    os.symlink("missing.jsonl", tmp_path / "gone.jsonl")
    os.symlink("self.jsonl", tmp_path / "self.jsonl")
    os.symlink("missing-folder", tmp_path / "gone-folder")
    sessions, audit = imported(tmp_path)
    assert [s.id for s in sessions] == ["a"]
    assert sorted((Path(s.path).name, s.reason) for s in audit.skipped) == [
        ("gone-folder", "dangling_symlink"),
        ("gone.jsonl", "dangling_symlink"),
        ("self.jsonl", "symlink_loop"),
    ]
    for name, reason in (("gone.jsonl", "dangling_symlink"), ("self.jsonl", "symlink_loop")):
        _, named = imported(tmp_path / name)
        assert list(named.reasons) == [reason]


def test_missing_path_still_fails_first(tmp_path):
    """Guard: a path that does not exist at all is a bad parameter, not a skip."""
    with pytest.raises(FileNotFoundError):
        imported(tmp_path / "nope")


# --------------------------------------------------------------------------- 7. explicit paths, empty files


def test_named_unrecognised_file_is_a_skip_and_the_rest_imports(tmp_path):
    junk = tmp_path / "notes.jsonl"
    junk.write_text('{"hello": "world"}\n')
    sessions, audit = imported([junk, CHAT])
    assert len(sessions) == 1 and audit.reasons == Counter(unknown_format=1)
    assert "chat_jsonl" in audit.skipped[0].detail and "codex" in audit.skipped[0].detail
    with pytest.raises(UnknownFormat):  # detect itself still says so
        detect(junk)


@pytest.mark.parametrize("content", [b"", b"  \n\n\t\n"], ids=["zero-bytes", "whitespace"])
def test_empty_file_is_empty_file_wherever_it_is_found(tmp_path, content):
    (tmp_path / "e.jsonl").write_bytes(content)
    for where in (tmp_path / "e.jsonl", tmp_path):
        sessions, audit = imported(where)
        assert sessions == [] and audit.reasons == Counter(empty_file=1)


def test_named_paths_of_every_kind_of_fault_never_raise(tmp_path, permission_bits):
    """What a my_sessions profile may list: one bad path never stops the others."""
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "junk.json").write_text('{"hello": 1}')
    (tmp_path / "locked.jsonl").write_bytes(ISSUE_CHAT)
    (tmp_path / "locked.jsonl").chmod(0)
    (tmp_path / "bad.jsonl.zst").write_bytes(files.ZSTD_MAGIC + b"garbage")
    os.symlink("nowhere", tmp_path / "dangling.jsonl")
    names = ["empty.jsonl", "junk.json", "locked.jsonl", "bad.jsonl.zst", "dangling.jsonl"]
    sessions, audit = imported([tmp_path / n for n in names] + [CHAT])
    assert len(sessions) == 1
    assert audit.reasons == Counter(
        empty_file=1, unknown_format=1, unreadable=1, corrupt_compressed=1, dangling_symlink=1
    )


# --------------------------------------------------------------------------- 12. byte-order mark


def test_bom_keeps_the_pi_header(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(BOM + PI.read_bytes())
    sessions, audit = imported(path)
    clean, clean_audit = imported(PI)
    assert sessions[0].id == clean[0].id == "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    assert records(sessions) == records(clean) and audit.reasons == clean_audit.reasons


@pytest.mark.parametrize("src", [CHAT, TRAJ, EXPORT], ids=lambda p: p.name)
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "zst"])
def test_bom_is_no_data_for_any_format_compressed_or_not(tmp_path, src, compressed):
    data = BOM + src.read_bytes()
    path = tmp_path / (src.name + (".zst" if compressed else ""))
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if compressed else data)
    sessions, audit = imported(path)
    clean, clean_audit = imported(src)
    assert records(sessions) == records(clean) and audit.reasons == clean_audit.reasons


# --------------------------------------------------------------------------- NUL tails


def test_nul_tail_keeps_every_record_before_it_and_is_counted(tmp_path):
    lines = lines_of(CHAT)
    path = tmp_path / CHAT.name
    path.write_bytes(b"".join(lines) + b"\x00" * 4096)
    sessions, audit = direct("chat_jsonl", path)
    clean, _ = direct("chat_jsonl", CHAT)
    assert records(sessions) == records(clean)
    assert skips(audit) == [(len(lines) + 1, "nul_tail")]


def test_nul_tail_cutting_a_line_counts_the_cut_line_and_the_tail(tmp_path):
    lines = lines_of(CHAT)
    path = tmp_path / CHAT.name
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:20] + b"\x00" * 100)
    sessions, audit = direct("chat_jsonl", path)
    n = len(lines)
    (tmp_path / "want").mkdir()
    (tmp_path / "want" / CHAT.name).write_bytes(b"".join(lines[:-1]))
    assert records(sessions) == records(direct("chat_jsonl", tmp_path / "want" / CHAT.name)[0])
    assert sorted(skips(audit)) == [(n, "nul_tail"), (n, "truncated_last_line")]


def test_nul_tail_after_a_whole_json_document_keeps_the_document(tmp_path):
    path = tmp_path / TRAJ.name
    path.write_bytes(TRAJ.read_bytes() + b"\x00" * 512)
    sessions, audit = imported(path)
    clean, _ = imported(TRAJ)
    assert records(sessions) == records(clean)
    assert [r for _, r in skips(audit)] == ["nul_tail"]


def test_file_of_nothing_but_nuls_is_one_nul_tail(tmp_path):
    (tmp_path / "c.jsonl").write_bytes(b"\x00" * 64)
    for where in (tmp_path / "c.jsonl", tmp_path):
        sessions, audit = imported(where)
        assert sessions == [] and skips(audit) == [(1, "nul_tail")]


def test_real_fixtures_still_import_without_skips_or_notes():
    """Guard: the shared reading path changes nothing for clean files."""
    sessions, audit = imported(PUBLIC_FIXTURES)
    assert audit.n_skipped == 0 and not audit.notes and sessions
