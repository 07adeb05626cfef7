"""Property tests: every importer, fed real session files with FILE-level damage (issue #12, acceptance 2).

`test_ingest_fuzz` damages lines; this damages files the way disks, crashes,
copies and other tools do. The bases are the same real and hand-written
fixtures (JSONL: the first lines of each Claude Code, pi, Codex and chat
JSONL fixture; whole-file JSON: the SWE-agent ``.traj`` files and the OpenCode
export; plus the OpenCode storage tree). Damages, one test each so that every
importer meets every one of them:

* a UTF-8 byte-order mark, compressed or not;
* lone UTF-16 surrogate escapes (``\\udXXX``) put into string values;
* zstd compression damaged at a random offset (a flipped byte, a cut, junk
  bytes), in one frame or several, with and without a checksum, written in
  one block or flushed every few lines;
* a NUL tail (the file cut at a random offset and padded with NULs);
* an empty or whitespace-only file, compressed or not;
* permission bits that deny reading the file or its folder;
* symbolic link loops, a dangling link and a second way into the folder.

Properties, checked on the format's importer directly and through
`load_sessions` on the file and on its folder:

1. Never a traceback: nothing but the documented `UnknownFormat` from
   `detect` (and then one counted file-level skip from `load_sessions`).
2. Every record before the damage is kept: the records the undamaged import
   traces to lines that lie wholly before the damage are all there
   (`test_ingest_fuzz.Baseline`); a BOM, a lone surrogate (as U+FFFD) or a
   link change nothing at all.
3. Every skip is counted with its reason and TRUE line: the line-level skips
   are exactly those the documented rules give for what decoded, a zstd
   damage is one ``corrupt_compressed`` skip at the 1-based line it cuts (a
   byte-at-a-time reference decoder says which), a NUL tail one ``nul_tail``
   skip at the line it starts on, and the file-level faults one skip each
   (``empty_file``, ``unreadable``, ``symlink_loop``, ``dangling_symlink``,
   ``duplicate_path``).

Derandomized, no example database; about fifteen seconds on one core
(``FUZZ_EXAMPLES=150`` for a longer hunt).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import pytest
import zstandard
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from compaction_lab.ingest import importer, load_sessions
from compaction_lab.ingest.import_audit import ImportAudit
from tests.ingest.test_ingest_files import reference_decode
from tests.ingest.test_ingest_fuzz import (
    _UNPARSED,
    BLANK_OR_NUL,
    BOM,
    FIX,
    FUZZ_SETTINGS,
    JSONL_BASES,
    LINE_REASONS,
    WHOLE_BASES,
    _parse,
    assemble,
    base_lines,
    baseline,
    check_load_sessions,
    check_reasons,
    check_sessions,
    expected_line_skips,
    missing,
    ref_multiset,
)

#: Examples per base file and damage (FUZZ_EXAMPLES raises it for a longer hunt).
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 20)
FEW = max(2, EXAMPLES // 3)  # damages with little to vary

BASES = [pytest.param(*p.values, True, id=p.id, marks=p.marks) for p in JSONL_BASES] + [
    pytest.param(*p.values, False, id=p.id, marks=p.marks) for p in WHOLE_BASES
]


# --------------------------------------------------------------------------- helpers


def content_of(src: Path, jsonl: bool) -> bytes:
    """The undamaged base: the first lines of a JSONL fixture, or the whole document."""
    return assemble(base_lines(src)) if jsonl else src.read_bytes()


@contextmanager
def folder():
    d = Path(tempfile.mkdtemp(prefix="damage-"))
    try:
        yield d
    finally:
        for p in [d, *d.rglob("*")]:
            if not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(d, ignore_errors=True)


def direct(fmt: str, path: Path):
    audit = ImportAudit()
    sessions = list(importer(fmt).load(path, audit))
    check_sessions(sessions, fmt)
    check_reasons(audit)
    return sessions, audit


def via(path: Path):
    audit = ImportAudit()
    sessions = list(load_sessions(path, audit))
    check_sessions(sessions)
    check_reasons(audit)
    return sessions, audit


def dump(sessions) -> list[str]:
    """Everything an import produced, comparable across files (not the source path).

    Not ASCII-escaped, so a lone surrogate left anywhere fails a strict UTF-8 encode.
    """
    out = []
    for s in sessions:
        out.append(
            json.dumps([s.id, s.source_format, dict(s.metadata)], sort_keys=True, default=str, ensure_ascii=False)
        )
        out.extend(json.dumps(r.to_dict(), sort_keys=True, default=str, ensure_ascii=False) for r in s.records)
    return out


@cache
def clean(fmt: str, src: Path, jsonl: bool) -> tuple[tuple[str, ...], Counter]:
    """The undamaged import: (dump, reasons)."""
    with folder() as d:
        path = d / src.name
        path.write_bytes(content_of(src, jsonl))
        sessions, audit = direct(fmt, path)
        return tuple(dump(sessions)), audit.reasons


def assert_same_as_clean(fmt: str, src: Path, jsonl: bool, sessions, audit) -> None:
    want, reasons = clean(fmt, src, jsonl)
    assert dump(sessions) == list(want)
    assert audit.reasons == reasons


def line_skips(audit: ImportAudit) -> Counter:
    return Counter((s.line, s.reason) for s in audit.skipped if s.reason in LINE_REASONS)


def assert_line_skips(audit: ImportAudit, decoded: bytes) -> None:
    """Property 3 for what decoded: the documented line-level skips, each at its line."""
    want, _ = expected_line_skips(decoded)
    got = line_skips(audit)
    assert not (want - got), f"line skips missing: {want - got}"
    for reason in ("invalid_utf8", "malformed_json", "truncated_last_line", "nul_tail"):
        assert audit.reasons[reason] == sum(v for (_, r), v in want.items() if r == reason), reason


def assert_lines_kept(fmt: str, src: Path, sessions, intact: int) -> None:
    """Property 2: the records of the first `intact` lines (wholly before the damage) are there."""
    if intact == 0:
        return
    plain, keyed = baseline(fmt, src).expected({i: i for i in range(1, intact + 1)})
    got_plain, got_keyed = ref_multiset(fmt, sessions)
    assert not missing(plain, got_plain), f"records before the damage lost: {missing(plain, got_plain)}"
    assert not missing(keyed, got_keyed), f"records before the damage lost: {missing(keyed, got_keyed)}"


def whole_lines(data: bytes, end: int) -> int:
    """Lines of `data` that end (newline included) at or before byte `end`."""
    return data.count(b"\n", 0, end)


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search for the first difference
    while lo < hi:
        mid = (lo + hi) // 2
        if a[: mid + 1] == b[: mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


# --------------------------------------------------------------------------- BOM


@pytest.mark.parametrize("fmt, src, jsonl", BASES)
@settings(FUZZ_SETTINGS, max_examples=FEW)
@given(compressed=st.booleans())
def test_bom_changes_nothing(fmt, src, jsonl, compressed):
    data = BOM + content_of(src, jsonl)
    with folder() as d:
        path = d / (src.name + (".zst" if compressed else ""))
        path.write_bytes(zstandard.ZstdCompressor().compress(data) if compressed else data)
        sessions, audit = direct(fmt, path)
        assert_same_as_clean(fmt, src, jsonl, sessions, audit)
        check_load_sessions(path, fmt, sessions, audit)


# --------------------------------------------------------------------------- lone surrogates

#: Where a JSON string value opens (after a key's colon).
_VALUE_OPENS = re.compile(rb'":\s*"')
SURROGATES = st.integers(0xD800, 0xDFFF)


@pytest.mark.parametrize("fmt, src, jsonl", BASES)
@settings(FUZZ_SETTINGS, max_examples=EXAMPLES)
@given(data=st.data())
def test_lone_surrogates_are_replaced_not_fatal(fmt, src, jsonl, data):
    base = content_of(src, jsonl)
    opens = [m.end() for m in _VALUE_OPENS.finditer(base)]
    if not opens:
        return
    chosen = sorted(data.draw(st.sets(st.sampled_from(opens), min_size=1, max_size=3), label="string values"))
    codes = [data.draw(SURROGATES, label="surrogate") for _ in chosen]

    def put(escapes: list[bytes]) -> bytes:
        out, last = [], 0
        for pos, esc in zip(chosen, escapes, strict=False):
            out += [base[last:pos], esc + b"x"]  # 'x': a high surrogate cannot pair with what follows
            last = pos
        return b"".join(out) + base[last:]

    damaged = put([b"\\u%04x" % c for c in codes])
    replaced = put([b"\\ufffd"] * len(codes))
    if jsonl:  # one note per line that parses to an object
        lines = replaced.split(b"\n")
        hit = {base.count(b"\n", 0, pos) for pos in chosen}  # the escapes add no newline
        notes = sum(1 for i in hit if isinstance(_parse(lines[i]), dict))
    else:
        notes = int(_parse(replaced) is not _UNPARSED)
    note(f"surrogates {[hex(c) for c in codes]} at {chosen}")
    with folder() as d:
        (d / "damaged").mkdir()
        (d / "replaced").mkdir()
        path, twin = d / "damaged" / src.name, d / "replaced" / src.name
        path.write_bytes(damaged)
        twin.write_bytes(replaced)
        sessions, audit = direct(fmt, path)
        want, want_audit = direct(fmt, twin)
        assert dump(sessions) == dump(want)  # exactly as if U+FFFD had been written
        assert audit.reasons == want_audit.reasons
        assert audit.notes == (Counter(lone_surrogates_replaced=notes) if notes else Counter())
        for line in dump(sessions):
            line.encode("utf-8")  # nothing left that SQLite or parquet could not write
        check_load_sessions(path, fmt, sessions, audit)


# --------------------------------------------------------------------------- zstd damage


def compress(data: bytes, layout: str, checksum: bool) -> bytes:
    cctx = zstandard.ZstdCompressor(write_checksum=checksum)
    if layout == "one frame":
        return cctx.compress(data)
    lines = data.splitlines(keepends=True)
    if layout == "frames":  # appended runs: a frame per third of the file
        k = max(1, len(lines) // 3)
        return b"".join(cctx.compress(b"".join(lines[i : i + k])) for i in range(0, len(lines), k))
    obj = cctx.compressobj()  # a log writer: flushed every few lines
    out = []
    for i in range(0, len(lines), 3):
        out += [obj.compress(b"".join(lines[i : i + 3])), obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)]
    return b"".join(out) + obj.flush()


ZSTD_DAMAGES = ("flip", "cut", "junk")


@pytest.mark.parametrize("fmt, src, jsonl", BASES)
@settings(FUZZ_SETTINGS, max_examples=EXAMPLES)
@given(data=st.data())
def test_zstd_damage_keeps_everything_before_it(fmt, src, jsonl, data):
    plain = content_of(src, jsonl)
    layout = data.draw(st.sampled_from(["flushed", "flushed", "frames", "one frame"]), label="layout")
    packed = compress(plain, layout, data.draw(st.booleans(), label="checksum"))
    kind = data.draw(st.sampled_from(ZSTD_DAMAGES), label="damage")
    at = data.draw(st.integers(0, len(packed) - 1), label="at compressed byte")
    if kind == "flip":
        bad = bytearray(packed)
        bad[at] ^= data.draw(st.integers(1, 255), label="xor")
        bad = bytes(bad)
    elif kind == "cut":
        bad = packed[:at]
    else:
        bad = packed[:at] + data.draw(st.binary(min_size=1, max_size=16), label="junk") + packed[at:]
    good, failed = reference_decode(bad)
    note(f"{layout}, {kind} at {at}/{len(packed)}: {len(good)}/{len(plain)} bytes decode, failed={failed}")
    event("damage detected" if failed else "damage not detected (or harmless)")
    event("nothing decodes" if not good else "all decodes" if len(good) >= len(plain) else "part decodes")
    with folder() as d:
        path = d / (src.name + ".zst")
        path.write_bytes(bad)
        sessions, audit = direct(fmt, path)
        # Property 2: lines wholly decoded, and decoded right, before the damage.
        correct = common_prefix(good, plain)
        complete = good[: good.rfind(b"\n") + 1] if failed else good
        assert_lines_kept(fmt, src, sessions, whole_lines(plain, min(correct, len(complete))) if jsonl else 0)
        cut_line = good.count(b"\n") + 1
        if failed:
            # Property 3: one corrupt_compressed skip at the line the damage cut.
            assert [s.line for s in audit.skipped if s.reason == "corrupt_compressed"] == [cut_line]
            assert "compressed byte" in next(s.detail for s in audit.skipped if s.reason == "corrupt_compressed")
        else:
            assert audit.reasons["corrupt_compressed"] == 0
        if jsonl:
            # What decoded is judged line by line; a sentinel object keeps the NUL-tail rule
            # (which a damage pre-empts) out of the oracle.
            assert_line_skips(audit, complete + b"{}\n" if failed else good)
        elif failed:
            if good == plain:  # only the checksum or trailing junk broke: the document is whole
                assert dump(sessions) == list(clean(fmt, src, jsonl)[0])
            elif _parse(good.rstrip(BLANK_OR_NUL)) is _UNPARSED:
                assert not sessions and audit.reasons == Counter(corrupt_compressed=1)
        elif good == plain:
            assert_same_as_clean(fmt, src, jsonl, sessions, audit)
        check_load_sessions(path, fmt, sessions, audit)
        for where in (path, d):  # named or in a folder, the damage is found at the same line
            _, via_audit = via(where)
            lines = [s.line for s in via_audit.skipped if s.reason == "corrupt_compressed"]
            assert lines == ([cut_line] if failed else []), (where, via_audit.skipped)


# --------------------------------------------------------------------------- NUL tails


@pytest.mark.parametrize("fmt, src, jsonl", BASES)
@settings(FUZZ_SETTINGS, max_examples=EXAMPLES)
@given(data=st.data())
def test_nul_tail_keeps_everything_before_it(fmt, src, jsonl, data):
    plain = content_of(src, jsonl)
    at = data.draw(st.one_of(st.just(len(plain)), st.integers(0, len(plain))), label="cut at")
    nuls = data.draw(st.integers(1, 5000), label="NUL bytes")
    damaged = plain[:at] + b"\x00" * nuls + data.draw(st.sampled_from([b"", b"\n", b"\x00\n\n"]), label="after")
    tail_line = plain.count(b"\n", 0, at) + 1
    with folder() as d:
        path = d / src.name
        path.write_bytes(damaged)
        sessions, audit = direct(fmt, path)
        assert [s.line for s in audit.skipped if s.reason == "nul_tail"] == [tail_line]
        if jsonl:
            assert_lines_kept(fmt, src, sessions, whole_lines(plain, at))
            assert_line_skips(audit, damaged)
        elif not plain[:at].strip():
            assert not sessions and audit.reasons == Counter(nul_tail=1)
        elif plain[:at].rstrip() == plain.rstrip():  # only blanks were cut: the document is whole
            assert dump(sessions) == list(clean(fmt, src, jsonl)[0])
            assert audit.reasons == clean(fmt, src, jsonl)[1] + Counter(nul_tail=1)
        else:  # the document was cut: it no longer parses (or decodes, if cut inside a character)
            assert not sessions and audit.n_skipped == 2
            assert set(audit.reasons) <= {"nul_tail", "malformed_json", "invalid_utf8"}
        check_load_sessions(path, fmt, sessions, audit)


# --------------------------------------------------------------------------- empty files


BLANKS = st.sampled_from([b"", b"\n", b"   ", b"\n\n\t \r\n", b" \n" * 100])


@pytest.mark.parametrize("fmt, src, jsonl", BASES)
@settings(FUZZ_SETTINGS, max_examples=FEW)
@given(blank=BLANKS, compressed=st.booleans())
def test_empty_file_is_one_empty_file_skip(fmt, src, jsonl, blank, compressed):
    with folder() as d:
        path = d / (src.name + (".zst" if compressed else ""))
        path.write_bytes(zstandard.ZstdCompressor().compress(blank) if compressed else blank)
        sessions, audit = direct(fmt, path)
        assert not sessions and audit.reasons == Counter(empty_file=1)
        for where in (path, d):
            sessions, via_audit = via(where)
            assert (
                not sessions and via_audit.reasons == Counter(empty_file=1) and via_audit.skipped[0].path == str(path)
            )


# --------------------------------------------------------------------------- permission bits


@pytest.mark.parametrize("fmt, src, jsonl", BASES)
@settings(FUZZ_SETTINGS, max_examples=FEW)
@given(locked=st.sampled_from(["file", "folder"]), mode=st.sampled_from([0o000, 0o200, 0o300]))
def test_unreadable_file_or_folder_is_one_unreadable_skip(fmt, src, jsonl, locked, mode, permission_bits):
    with folder() as d:
        (d / "sub").mkdir()
        path = d / "sub" / src.name
        path.write_bytes(content_of(src, jsonl))
        (path if locked == "file" else d / "sub").chmod(mode)
        if locked == "file":
            sessions, audit = direct(fmt, path)
            assert not sessions and audit.reasons == Counter(unreadable=1)
        for where in [path, d] if locked == "file" else [d]:
            sessions, audit = via(where)
            assert not sessions and audit.reasons == Counter(unreadable=1)
            (skip,) = audit.skipped
            assert skip.path == str(path if locked == "file" else d / "sub")
            assert "Permission denied" in skip.detail


# --------------------------------------------------------------------------- symbolic links


@pytest.mark.parametrize("fmt, src, jsonl", BASES)
@settings(FUZZ_SETTINGS, max_examples=FEW)
@given(extra=st.sets(st.sampled_from(["self-loop", "loop-pair", "dangling", "dir-loop", "second-way"]), min_size=1))
def test_symlink_loops_are_counted_and_the_file_read_once(fmt, src, jsonl, extra):
    expected = Counter()
    with folder() as d:
        (d / "sub").mkdir()
        real = d / "sub" / src.name
        real.write_bytes(content_of(src, jsonl))
        suffix = "".join(src.suffixes[-1:])
        if "self-loop" in extra:
            os.symlink(f"self{suffix}", d / f"self{suffix}")
            expected["symlink_loop"] += 1
        if "loop-pair" in extra:
            os.symlink(f"b{suffix}", d / f"a{suffix}")
            os.symlink(f"a{suffix}", d / f"b{suffix}")
            expected["symlink_loop"] += 2
        if "dangling" in extra:
            os.symlink(f"gone{suffix}", d / f"dangling{suffix}")
            expected["dangling_symlink"] += 1
        if "dir-loop" in extra:
            os.symlink("..", d / "sub" / "up")
            expected["symlink_loop"] += 1
        if "second-way" in extra:
            os.symlink("sub", d / "zz-again")
            expected["duplicate_path"] += 1
        sessions, audit = via(d)
        want, reasons = clean(fmt, src, jsonl)
        assert dump(sessions) == list(want)  # read exactly once
        assert audit.reasons == reasons + expected


# --------------------------------------------------------------------------- the OpenCode storage tree

STORAGE = FIX / "opencode" / "storage"
STORAGE_FILES = sorted(str(p.relative_to(STORAGE)) for p in STORAGE.rglob("*.json"))


@settings(FUZZ_SETTINGS, max_examples=4 * EXAMPLES)
@given(rel=st.sampled_from(STORAGE_FILES), damage=st.sampled_from(["bom", "surrogate", "nul", "empty", "unreadable"]))
def test_opencode_storage_file_damage(rel, damage, permission_bits):
    with folder() as d:
        tree = d / "storage"
        shutil.copytree(STORAGE, tree)
        want, want_audit = direct("opencode", tree)
        f = tree / rel
        data = f.read_bytes()
        if damage == "bom":
            f.write_bytes(BOM + data)
        elif damage == "surrogate":
            # Compared with the same tree holding U+FFFD there (an id may change: links follow).
            m = _VALUE_OPENS.search(data)
            f.write_bytes(data[: m.end()] + b"\\ufffd" + data[m.end() :])
            want, want_audit = direct("opencode", tree)
            f.write_bytes(data[: m.end()] + b"\\udfff" + data[m.end() :])
        elif damage == "nul":
            f.write_bytes(data + b"\x00" * 100)
        elif damage == "empty":
            f.write_bytes(b"")
        else:
            f.chmod(0)
        sessions, audit = direct("opencode", tree)
        if damage in ("bom", "surrogate", "nul"):
            assert dump(sessions) == dump(want)
            extra = Counter(nul_tail=1) if damage == "nul" else Counter()
            assert audit.reasons == want_audit.reasons + extra
            assert audit.notes == (Counter(lone_surrogates_replaced=1) if damage == "surrogate" else Counter())
        else:
            reason = "empty_file" if damage == "empty" else "unreadable"
            assert [s.path for s in audit.skipped if s.reason == reason] == [str(f)]
        sessions2, audit2 = via(tree)
        assert dump(sessions2) == dump(sessions)
