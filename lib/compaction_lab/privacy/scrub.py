"""The run-folder sweep: `scrub_run_folder` masks every text, notebook, HTML, parquet and SQLite file in place.

The final sweep is what masks a redacted run folder: the stages compute on the
sessions as written, so every file they write -- the sessions themselves, the
banks, tables, archive, notebooks and pages -- is masked here, with the run's
one redactor (the names its sessions tell learned first, `Redactor.learn`).

The sweep edits JSON, notebooks and HTML as raw text. A mask never starts or
ends inside a backslash escape and never crosses a quote, so those files stay
valid (the tests check this on generated JSON). PNG figures cannot be
rewritten: they are listed as unscannable and are drawn from masked arguments
(`compaction_lab.report.charts.draw`). Patterns are heuristics: a secret
with no recognisable shape (a bare password in prose) is not found unless it
is the value of an environment variable or a custom pattern names it.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from compaction_lab.privacy.redactor import Redactor, apply, walk

__all__ = [
    "BINARY_SUFFIXES",
    "PARQUET_MAGIC",
    "PARQUET_SUFFIXES",
    "SQLITE_SUFFIXES",
    "TEXT_SUFFIXES",
    "ScrubReport",
    "parquet_strings",
    "run_files",
    "scrub_run_folder",
    "settle_databases",
]


#: Suffixes rewritten as UTF-8 text.
TEXT_SUFFIXES: frozenset[str] = frozenset(
    {
        ".json",
        ".jsonl",
        ".ipynb",
        ".html",
        ".htm",
        ".md",
        ".txt",
        ".csv",
        ".tsv",
        ".svg",
        ".yaml",
        ".yml",
        ".log",
        ".xml",
        ".toml",
        ".ini",
        ".cfg",
        ".py",
        ".js",
        ".css",
        ".rst",
        ".tex",
        ".sh",
        ".out",
        ".err",
    }
)
PARQUET_SUFFIXES: frozenset[str] = frozenset({".parquet"})
SQLITE_SUFFIXES: frozenset[str] = frozenset({".sqlite", ".sqlite3", ".db"})
#: Suffixes known to be binary; other unknown files are sniffed.
BINARY_SUFFIXES: frozenset[str] = frozenset(
    {
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".bmp",
        ".tif",
        ".tiff",
        ".ico",
        ".pdf",
        ".zip",
        ".gz",
        ".bz2",
        ".xz",
        ".zst",
        ".tar",
        ".whl",
        ".pkl",
        ".pickle",
        ".npy",
        ".npz",
        ".feather",
        ".arrow",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
    }
)
_SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
_SQLITE_MAGIC = b"SQLite format 3\x00"
PARQUET_MAGIC = b"PAR1"
_TMP = ".redact-tmp"


@dataclass(frozen=True)
class ScrubReport:
    """What `scrub_run_folder` did.

    Parameters
    ----------
    files_scanned : int
        Text, parquet and SQLite files read.
    files_changed : tuple of str
        Run-folder-relative paths of the files rewritten.
    replacements : int
        Spans masked across all files.
    unscannable : tuple of str
        Files that cannot be rewritten (PNG figures, other binaries, symbolic
        links, databases with contentless full-text indexes); they rely on
        source-level redaction.
    """

    files_scanned: int
    files_changed: tuple[str, ...]
    replacements: int
    unscannable: tuple[str, ...]


def _file_kind(path: Path) -> str:
    """``text``, ``parquet``, ``sqlite``, ``sidecar`` or ``binary``."""
    suffix = path.suffix.lower()
    if any(path.name.endswith(s) for s in _SQLITE_SIDECARS):
        return "sidecar"
    if suffix in SQLITE_SUFFIXES:
        return "sqlite"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in BINARY_SUFFIXES:
        return "binary"
    with open(path, "rb") as fh:
        head = fh.read(8192)
    if head.startswith(_SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if b"\x00" in head:
        return "binary"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the 8 KB window is still text.
        if exc.start < len(head) - 4:
            return "binary"
    return "text"


def run_files(run_dir: Path) -> list[Path]:
    """Every file and symbolic link under `run_dir`, sorted."""
    return sorted(p for p in run_dir.rglob("*") if p.is_file() or p.is_symlink())


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}{_TMP}")
    try:
        tmp.write_bytes(data)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _file_redactor(r: Redactor) -> Redactor:
    """`r` plus the JSON- and HTML-escaped forms of its literals, as files hold them."""
    extra = set()
    for v in r.literals:
        extra.add(json.dumps(v)[1:-1])
        extra.add(json.dumps(v, ensure_ascii=False)[1:-1])
        extra.add(html.escape(v))
    return replace(r, literals=r.literals | frozenset(extra))


def settle_databases(run_dir: Path) -> list[str]:
    """Fold every SQLite file's side files (``-wal``, ``-shm``) into it and drop them; the files settled.

    A WAL file keeps old page images — text a store later masked — until a checkpoint, and a process
    that exits without closing its connection leaves it beside the database. A run folder is shared, so
    before the final sweep each database is checkpointed (``TRUNCATE``), switched to the rollback journal
    (which deletes the side files on close) and VACUUMed when it has free pages (which may hold deleted
    text). A database another process still holds busy is left as it is (named by the caller's sweep).
    """
    run_dir = Path(run_dir)
    settled: list[str] = []
    for p in run_files(run_dir):
        if p.is_symlink() or p.name.endswith(_TMP) or _file_kind(p) != "sqlite":
            continue
        try:
            conn = sqlite3.connect(p, timeout=5.0)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA journal_mode=DELETE")
                if conn.execute("PRAGMA freelist_count").fetchone()[0]:
                    conn.execute("VACUUM")
            finally:
                conn.close()
        except sqlite3.Error:
            continue
        if not any(p.with_name(p.name + s).exists() for s in _SQLITE_SIDECARS[:2]):
            settled.append(p.relative_to(run_dir).as_posix())
    return settled


def scrub_run_folder(run_dir: Path, r: Redactor, *, verbatim: Iterable[str] = ()) -> ScrubReport:
    """Mask every match in the files of a run folder, in place.

    * Text files (`TEXT_SUFFIXES`, and unknown files that sniff as UTF-8) are
      rewritten as raw text: JSON and notebooks stay valid because a marker
      holds no quote or backslash and no match splits an escape.
    * Parquet files: every string value (also inside lists, structs and
      maps), column names and schema metadata; rewritten only when changed.
    * SQLite files: every TEXT value of ordinary tables and of full-text
      (FTS3/4/5) tables. Shadow tables of full-text tables are skipped;
      instead each full-text index is rebuilt so no old token survives, and
      the database is VACUUMed so old text does not linger in free pages.
    * Everything is written atomically (a temporary file, then a rename).
    * Not scanned, in notebooks and HTML pages only (`_opaque_spans`): a PNG embedded as base64 (a
      notebook output's ``"image/png"`` value, an ``<img src="data:image/png;base64,…">``: drawn from
      masked arguments, as the PNG files are, and a match inside base64 is chance that would break the
      image), and each `verbatim` text found whole.

    Parameters
    ----------
    run_dir : path
    r : Redactor
        Nothing is read when it masks nothing (no pattern, literal or
        always-on pattern; a run's `redactor.redactor` always masks URL
        credentials, so a run folder is always swept).
    verbatim : iterable of str, optional
        Texts the pages carry unchanged from installed packages, never from a session (Vega's
        JavaScript in each figure page): left whole where an HTML page holds one.
    """
    run_dir = Path(run_dir)
    if not r.active:
        return ScrubReport(0, (), 0, ())
    fr = _file_redactor(r)
    verbatim = tuple(v for v in verbatim if len(v) >= _OPAQUE_MIN)
    scanned, replacements = 0, 0
    changed: list[str] = []
    unscannable: list[str] = []
    rel = lambda p: p.relative_to(run_dir).as_posix()

    # Databases first: rewriting one removes its -wal / -shm side files.
    files = [p for p in run_files(run_dir) if not p.name.endswith(_TMP)]
    kinds = {p: ("link" if p.is_symlink() else _file_kind(p)) for p in files}
    for p in [p for p in files if kinds[p] == "sqlite"]:
        n, lossy = _scrub_sqlite(p, fr)
        scanned += 1
        if n:
            replacements += n
            changed.append(rel(p))
        if lossy:
            unscannable.append(rel(p))
    for p in files:
        kind = kinds[p]
        if kind == "sqlite":
            continue
        if not p.exists() and not p.is_symlink():  # a side file removed above
            continue
        if kind == "sidecar":
            db = p.with_name(next(p.name[: -len(s)] for s in _SQLITE_SIDECARS if p.name.endswith(s)))
            if db in kinds:
                continue  # its database was rewritten with it merged
            kind = "binary"
        if kind in ("binary", "link"):
            unscannable.append(rel(p))
            continue
        n = _scrub_parquet(p, fr) if kind == "parquet" else _scrub_text(p, fr, verbatim)
        scanned += 1
        if n:
            replacements += n
            changed.append(rel(p))
    return ScrubReport(scanned, tuple(sorted(changed)), replacements, tuple(sorted(unscannable)))


#: A PNG embedded as base64 (its signature, ``iVBORw0KGgo``, through its last character) where only an
#: image can be: a notebook output's ``"image/png"`` value (a JSON string: a session's quote would be
#: escaped there) or an ``<img>`` source (HTML-escaped in a session's text); ended by its closing quote.
_EMBEDDED_PNG = re.compile(
    r'(?:"image/png": "|<img[^<>]{0,200}? src="data:image/png;base64,)'
    r'(?P<png>iVBORw0KGgo[A-Za-z0-9+/]*={0,2}(?:\\n)?)(?=")'
)
#: Opaque spans shorter than this are scanned like the text around them (not worth a cut).
_OPAQUE_MIN = 256


#: The files whose opaque spans are left whole: the notebooks and pages the run renders (a session's
#: own file, JSON Lines, is scanned whole whatever it holds).
_RENDERED = frozenset({".ipynb", ".html", ".htm"})
#: Of those, the pages (where a `verbatim` text is left whole).
_PAGES = frozenset({".html", ".htm"})


def _opaque_spans(s: str, verbatim: tuple[str, ...]) -> list[tuple[int, int]]:
    """Return the [start, end) spans of a page `s` the sweep leaves whole, in order: embedded PNGs, `verbatim`."""
    spans = [m.span("png") for m in _EMBEDDED_PNG.finditer(s) if m.end() - m.start("png") >= _OPAQUE_MIN]
    for v in verbatim:
        at = s.find(v)
        while at >= 0:
            spans.append((at, at + len(v)))
            at = s.find(v, at + len(v))
    kept: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if not kept or a >= kept[-1][1]:  # spans never overlap in a page; one that would is scanned
            kept.append((a, b))
    return kept


def _scrub_text(path: Path, r: Redactor, verbatim: tuple[str, ...] = ()) -> int:
    data = path.read_bytes()
    s = data.decode("utf-8", "surrogateescape")  # keeps bytes that are not UTF-8 as they were
    tally: Counter = Counter()
    # The text between opaque spans is masked piece by piece: every span is led and ended by a quote or a
    # tag a mask never crosses, and a piece's ends only widen what a rule's boundaries accept.
    parts, at = [], 0
    suffix = path.suffix.lower()
    for a, b in _opaque_spans(s, verbatim if suffix in _PAGES else ()) if suffix in _RENDERED else ():
        parts += [apply(r.rules(), s[at:a], tally), s[a:b]]
        at = b
    parts.append(apply(r.rules(), s[at:], tally))
    out = "".join(parts)
    if not tally:
        return 0
    _atomic_write(path, out.encode("utf-8", "surrogateescape"))
    return sum(tally.values())


# ------------------------------------------------------------------ parquet


def _has_string(t) -> bool:
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_string(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has_string(t.value_type)
    if pa.types.is_map(t):
        return _has_string(t.key_type) or _has_string(t.item_type)
    if pa.types.is_struct(t):
        return any(_has_string(t.field(i).type) for i in range(t.num_fields))
    return False


def _scrub_parquet(path: Path, r: Redactor) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rules = r.rules()
    tally: Counter = Counter()
    red = lambda s: apply(rules, s, tally)
    table = pq.read_table(path)
    columns, fields_ = [], []
    for i, field in enumerate(table.schema):
        col = table.column(i)
        if _has_string(field.type):
            before = sum(tally.values())
            if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
                # Redact each distinct value once, then map the column through.
                uniq = pc.unique(col).drop_null()
                vals = uniq.to_pylist()
                new = [red(v) for v in vals]
                if new != vals:
                    col = pa.array(new, type=field.type).take(pc.index_in(col, value_set=uniq))
            else:
                new_vals, ch = walk(col.to_pylist(), red)
                if ch:
                    col = pa.array(new_vals, type=field.type)
            if sum(tally.values()) == before:
                col = table.column(i)
        name = red(field.name)
        fields_.append(field.with_name(name) if name != field.name else field)
        columns.append(col)
    meta = table.schema.metadata or {}
    new_meta = {}
    for k, v in meta.items():
        nv = red(v.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        new_meta[k] = nv
    if not tally:
        return 0
    out = pa.Table.from_arrays(columns, schema=pa.schema(fields_, metadata=new_meta or None))
    md = pq.ParquetFile(path).metadata
    compression = "snappy"
    if md.num_row_groups and md.num_columns:
        compression = md.row_group(0).column(0).compression.lower()
        if compression not in ("snappy", "gzip", "brotli", "zstd", "lz4", "none", "uncompressed"):
            compression = "snappy"
    tmp = path.with_name(f".{path.name}{_TMP}")
    try:
        pq.write_table(out, tmp, compression=compression)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return sum(tally.values())


def parquet_strings(path: Path) -> Iterator[str]:
    """Every metadata entry, column name and string value (nested ones too) of a parquet file."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for k, v in (table.schema.metadata or {}).items():
        yield k.decode("utf-8", "replace")
        yield v.decode("utf-8", "replace")
    for i, field in enumerate(table.schema):
        yield field.name
        if _has_string(field.type):
            yield from _strings(table.column(i).to_pylist())


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v)


# ------------------------------------------------------------------ sqlite

_FTS = re.compile(r"\busing\s+fts[345]\b", re.IGNORECASE)
_FTS_CONTENT = re.compile(r"\bcontent\s*=\s*(?:'([^']*)'|\"([^\"]*)\"|([A-Za-z0-9_]*))", re.IGNORECASE)
#: Shadow tables of FTS3/4 and FTS5 tables: maintained by the virtual table itself.
_FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config", "_segments", "_segdir", "_stat")


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _scrub_sqlite(path: Path, r: Redactor) -> tuple[int, bool]:
    """(spans masked, whether a contentless full-text index could not be cleaned)."""
    # Work on a copy (the backup API merges any WAL), replace the original
    # only when something changed.
    tmp = path.with_name(f".{path.name}{_TMP}")
    tmp.unlink(missing_ok=True)
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    rules = r.rules()
    tally: Counter = Counter()
    lossy = False
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")
            master = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            virtual = {n: sql or "" for n, sql in master if (sql or "").upper().startswith("CREATE VIRTUAL")}
            fts = {n: sql for n, sql in virtual.items() if _FTS.search(sql)}
            shadows = {f"{n}{s}" for n in virtual for s in _FTS_SHADOWS}
            rebuild: list[str] = []
            for name, sql in master:
                if name in shadows or (name in virtual and name not in fts):
                    continue
                if name in fts:
                    content = _fts_content(sql)
                    if content == "":  # contentless: the text is gone, only its tokens remain
                        lossy = True
                        continue
                    rebuild.append(name)
                    if content is not None:  # external content: the content table is scrubbed itself
                        continue
                _scrub_table(conn, name, sql or "", lambda s: apply(rules, s, tally))
            if tally:
                # A rebuild drops every old index segment, so no token of a
                # masked value survives in the index.
                for name in rebuild:
                    conn.execute(f"INSERT INTO {_qi(name)}({_qi(name)}) VALUES('rebuild')")
            conn.commit()
            if tally:
                conn.execute("VACUUM")
        finally:
            conn.close()
        if tally:
            shutil.copymode(path, tmp)
            os.replace(tmp, path)
            for s in _SQLITE_SIDECARS:  # stale side files would be replayed onto the new file
                path.with_name(path.name + s).unlink(missing_ok=True)
    finally:
        tmp.unlink(missing_ok=True)
        for s in _SQLITE_SIDECARS:
            tmp.with_name(tmp.name + s).unlink(missing_ok=True)
    return sum(tally.values()), lossy


def _fts_content(sql: str) -> str | None:
    """Read the ``content=`` option of a full-text table: None when absent (own content)."""
    m = _FTS_CONTENT.search(sql)
    if not m:
        return None
    return next(g for g in m.groups() if g is not None)


def _scrub_table(conn: sqlite3.Connection, name: str, sql: str, red: Callable[[str], str]) -> None:
    info = conn.execute(f"PRAGMA table_info({_qi(name)})").fetchall()
    cols = [row[1] for row in info]
    if not cols:
        return
    if re.search(r"\bWITHOUT\s+ROWID\b", sql, re.IGNORECASE):
        keys = [row[1] for row in sorted(info, key=lambda row: row[5]) if row[5] > 0]
    else:
        keys = ["rowid"]
    select = ", ".join(_qi(k) if k != "rowid" else "rowid" for k in keys) + ", " + ", ".join(map(_qi, cols))
    where = " AND ".join(f"{_qi(k) if k != 'rowid' else 'rowid'} = ?" for k in keys)
    updates = []
    for row in conn.execute(f"SELECT {select} FROM {_qi(name)}"):
        key, vals = row[: len(keys)], row[len(keys) :]
        new = {}
        for c, v in zip(cols, vals, strict=False):
            if isinstance(v, str):
                nv = red(v)
                if nv != v:
                    new[c] = nv
        if new:
            updates.append((new, key))
    for new, key in updates:
        sets = ", ".join(f"{_qi(c)} = ?" for c in new)
        try:
            conn.execute(f"UPDATE {_qi(name)} SET {sets} WHERE {where}", [*new.values(), *key])
        except sqlite3.IntegrityError as exc:
            raise RuntimeError(
                f"redacting table {name!r} makes two rows equal ({exc}); the values differ only in what was masked"
            ) from exc
