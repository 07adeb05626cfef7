"""Reading a source's bytes: the one file-opening path every importer uses, heads for sniffing, JSONL and JSON.

Every importer reads files through `open_binary` (and on top of it `read_head`, `iter_jsonl`,
`load_json`), so the same file-level faults are handled the same way for every format:

* a leading UTF-8 byte-order mark is stripped, compressed or not;
* every line or document is decoded by `json_repair.parse_json` (a JSONL line by its fast path,
  `json_repair.fast_decode`, first; only a line it refuses is judged by the rules of `_parse_line`);
* ``.zst`` files (or any file opening with the zstd magic) are decoded frame after frame in small
  steps; a damaged or cut-off stream ends the file there as ``corrupt_compressed``, every complete
  line before it imported;
* a tail of NUL bytes is counted once as ``nul_tail``, the records before it kept;
* an unreadable file is an ``unreadable`` skip with the operating system's reason, never an exception.

JSONL is streamed line by line, so memory is bounded by the largest session (and the largest line),
not the file.

Design: docs/session-formats.md#bad-input and docs/session-formats.md#compressed-input.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from compaction_lab.core.paths import SQLITE_HEADER
from compaction_lab.ingest.import_audit import ImportAudit, os_reason
from compaction_lab.ingest.json_repair import fast_decode, parse_json
from compaction_lab.ingest.outline import OUTLINE_CHUNK, outline

#: Bytes of a source read for content sniffing.
HEAD_BYTES = 64 * 1024
#: Parsed JSONL lines offered to sniffers.
HEAD_LINES = 20
#: Read buffer of a file streamed line by line (`iter_jsonl`). Python's default (8 KiB) is
#: smaller than a typical log line, which then costs several reads and joins: 4x slower.
STREAM_BUFFER = 1 << 20
#: Compressed bytes fed to the zstd decoder per step. Small, so that one step's
#: output stays bounded even for very compressible data, and so that the
#: byte-exact replay after a damage (`_ZstdStream`) stays cheap.
ZSTD_STEP = 16 * 1024

SQLITE_MAGIC = SQLITE_HEADER  # one definition of the SQLite file header (paths checks storage with it)
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BOM = b"\xef\xbb\xbf"
#: What `bytes.strip()` strips, plus NUL: the bytes a NUL tail may consist of.
_BLANK_OR_NUL = b" \t\n\r\x0b\x0c\x00"


@dataclass(frozen=True)
class Damage:
    """Where a compressed stream stopped decoding.

    Attributes
    ----------
    offset : int
        Byte offset in the compressed file where the decoder failed (the file
        size when the stream is cut off mid-frame).
    decoded : int
        Decoded bytes delivered before it (every byte the decoder produced).
    error : str
        The decoder's message.
    """

    offset: int
    decoded: int
    error: str

    def describe(self) -> str:
        """Return the damage as a skip's detail says it."""
        return f"zstd: {self.error} (detected at compressed byte {self.offset}; {self.decoded} bytes decoded before it)"


class _ZstdStream(io.RawIOBase):
    """The decoded bytes of a zstd file, frame after frame, up to the first damage (never raises on it).

    Compressed input is fed in `ZSTD_STEP` steps. When a step fails, the
    output the decoder produced inside that step would be lost, so the frame
    is decoded again up to the step and the failing step replayed one byte at
    a time: every byte decoded before the damage is delivered, and the
    damage's exact compressed offset is known. After the damage the stream
    ends (EOF) and `damage` says where and why; a stream that ends mid-frame
    (a cut-off file) is a damage too.
    """

    def __init__(self, f: BinaryIO):
        import zstandard

        self._zstd = zstandard
        self._dctx = zstandard.ZstdDecompressor()
        self._f = f
        self._pos = 0  # compressed bytes read so far
        # the decoder of the current frame (None between frames)
        self._dobj: zstandard.ZstdDecompressionObj | None = None
        self._frame_start = 0  # compressed offset of the current frame
        self._frame_out = 0  # bytes the current frame delivered
        self._out = bytearray()  # decoded, not yet read
        self._done = False
        self._first = True
        self.decoded = 0
        self.damage: Damage | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        # The first read waits for 3 bytes (or the end) so a leading BOM can be recognised.
        while not self._done and (not self._out or (self._first and len(self._out) < len(BOM))):
            self._step()
        if self._first:
            self._first = False
            if self._out.startswith(BOM):
                del self._out[: len(BOM)]
        n = min(len(b), len(self._out))
        with memoryview(self._out) as view:
            b[:n] = view[:n]
        del self._out[:n]
        return n

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()

    def _emit(self, out: bytes) -> None:
        self._out += out
        self._frame_out += len(out)
        self.decoded += len(out)

    def _fail(self, offset: int, error: str) -> None:
        self.damage = Damage(offset, self.decoded, error)
        self._done = True

    def _step(self) -> None:
        data = self._f.read(ZSTD_STEP)
        if not data:
            if self._dobj is not None:
                self._fail(self._pos, "compressed stream ends mid-frame (file cut off)")
            self._done = True
            return
        start = self._pos
        self._pos += len(data)
        self._feed(data, start)

    def _feed(self, data: bytes, start: int) -> None:
        while data and not self._done:
            if self._dobj is None:
                self._dobj = self._dctx.decompressobj()
                self._frame_start, self._frame_out = start, 0
            try:
                out = self._dobj.decompress(data)
            except self._zstd.ZstdError as exc:
                self._replay(data, start, str(exc))
                return
            self._emit(out)
            if not self._dobj.eof:
                return
            # The frame ended inside this step: the rest starts the next frame.
            rest = self._dobj.unused_data
            start += len(data) - len(rest)
            data, self._dobj = rest, None

    def _replay(self, data: bytes, start: int, error: str) -> None:
        """Deliver what the failed step decoded before the damage, and find the damage's offset."""
        dobj = self._dctx.decompressobj()
        try:
            self._f.seek(self._frame_start)
            todo, produced = start - self._frame_start, 0
            while todo > 0:  # the frame up to this step decodes as before (its output was delivered)
                chunk = self._f.read(min(todo, 1 << 20))
                if not chunk:
                    break
                todo -= len(chunk)
                produced += len(dobj.decompress(chunk))
        except (OSError, io.UnsupportedOperation, self._zstd.ZstdError):
            produced = -1
        if produced != self._frame_out:  # cannot replay (unseekable): the step's output is lost
            self._fail(start, error)
            return
        for i in range(len(data)):
            try:
                out = dobj.decompress(data[i : i + 1])
            except self._zstd.ZstdError as exc:
                self._fail(start + i, str(exc))
                return
            self._emit(out)
            if dobj.eof:  # cannot happen for the step that failed; keep decoding if it does
                self._f.seek(self._pos)  # where the steps left off (the replay moved the file)
                self._dobj = None
                self._feed(dobj.unused_data + data[i + 1 :], start + i + 1 - len(dobj.unused_data))
                return
        self._fail(start + len(data), error)


def open_binary(path: str | Path, buffering: int = -1) -> BinaryIO:
    """Open a file for streaming binary reads: zstd decoded transparently, a leading BOM stripped.

    A ``.zst`` suffix or the zstd magic number selects the streaming decoder
    (`_ZstdStream`), so a compressed multi-GB log is never inflated in memory
    and a damaged one yields everything before the damage (see `damage_of`).
    `buffering` is the plain file's read buffer, as `open` takes it (the
    default suits reading a head; `STREAM_BUFFER` reading a whole file).

    Raises
    ------
    OSError
        When the file cannot be opened or read (callers count it ``unreadable``).
    """
    path = Path(path)
    f = open(path, "rb", buffering=buffering)
    try:
        magic = f.read(4)
        if path.suffix == ".zst" or magic == ZSTD_MAGIC:
            f.seek(0)
            return io.BufferedReader(_ZstdStream(f), buffer_size=1 << 20)
        f.seek(len(BOM) if magic.startswith(BOM) else 0)
    except BaseException:
        f.close()
        raise
    return f


def damage_of(f: object) -> Damage | None:
    """Return the damage that ended a stream from `open_binary` (None when it decoded to the end)."""
    return getattr(getattr(f, "raw", None), "damage", None)


def is_compressed(f: BinaryIO) -> bool:
    """Tell whether a stream from `open_binary` decodes a compressed file."""
    return isinstance(getattr(f, "raw", None), _ZstdStream)


def find_damage(path: str | Path) -> tuple[Damage | None, int]:
    """Decode a whole file (streaming) to find a damage: ``(damage or None, the 1-based line it cuts)``.

    For a compressed file no format recognised: its head may decode to garbage
    that the decoder only notices at the end (a content checksum).

    Raises
    ------
    OSError
        When the file cannot be read.
    """
    newlines = 0
    with open_binary(path) as f:
        while chunk := f.read(1 << 20):
            newlines += chunk.count(b"\n")
        return damage_of(f), newlines + 1


def read_magic(path: str | Path, n: int = 16) -> bytes:
    """Return the first `n` bytes of a file as stored (no decompression, no BOM stripping).

    Raises
    ------
    OSError
        When the file cannot be read.
    """
    with open(path, "rb") as f:
        return f.read(n)


@dataclass(frozen=True)
class Head:
    """The first bytes and parsed JSONL lines of a source, for sniffing by content.

    Attributes
    ----------
    raw : bytes
        Up to `HEAD_BYTES` decoded bytes (BOM stripped).
    lines : tuple
        The JSON values of the first `HEAD_LINES` lines that parse. A first line longer than the head
        is read on to its end and offered as its outline (`outline.outline`: its shape and short
        values), so sniffers judge it as they judge any parsed line, whatever its length or spacing.
    damage : Damage or None
        Set when a compressed file's damage cut the head short (`raw` is then
        everything that decoded).
    blank : bool
        The whole file holds nothing but whitespace and NUL bytes (or nothing).
    compressed : bool
        The file is decoded (zstd).
    """

    path: Path
    raw: bytes
    lines: tuple[Any, ...]
    is_dir: bool = False
    is_sqlite: bool = False
    damage: Damage | None = None
    blank: bool = False
    compressed: bool = False

    @property
    def objects(self) -> list[Mapping[str, Any]]:
        """The parsed head lines that are JSON objects."""
        return [o for o in self.lines if isinstance(o, dict)]


def read_head(path: str | Path) -> Head:
    """Read what sniffers look at: up to `HEAD_BYTES` and the JSON lines within them.

    Reads through `open_binary` like the importers do (BOM stripped, zstd
    decoded up to any damage). When the head ends inside the file's first
    line, the rest of that line is read in chunks and outlined
    (`outline.outline`): memory stays bounded whatever the line's length.

    Raises
    ------
    OSError
        When the file cannot be read.
    """
    path = Path(path)
    if path.is_dir():
        return Head(path, b"", (), is_dir=True)
    with open_binary(path) as f:
        raw = f.read(HEAD_BYTES)
        blank = not raw.strip(_BLANK_OR_NUL)
        while blank:  # a blank head: the file is empty only if the rest is blank too
            more = f.read(HEAD_BYTES)
            if not more:
                break
            blank = not more.strip(_BLANK_OR_NUL)
        first = raw.lstrip(_BLANK_OR_NUL)
        long_first = bool(first) and len(raw) == HEAD_BYTES and b"\n" not in first and not raw.startswith(SQLITE_MAGIC)
        # The head ends inside the first line: its outline, reading on to the line's end.
        outlined = outline(first, iter(lambda: f.read(OUTLINE_CHUNK), b"")) if long_first else None
        damage, compressed = damage_of(f), is_compressed(f)
    # Read-ahead may have met a damage past the head: it cut the head only if the head is short.
    cut = damage if damage is not None and len(raw) < HEAD_BYTES else None
    if raw.startswith(SQLITE_MAGIC):
        return Head(path, raw, (), is_sqlite=True)
    if long_first:
        return Head(path, raw, () if outlined is None else (outlined,), damage=cut, compressed=compressed)
    lines: list[Any] = []
    for chunk in raw.split(b"\n")[:HEAD_LINES]:
        chunk = chunk.strip(_BLANK_OR_NUL)  # a NUL-tailed last line still shows its JSON
        if not chunk:
            continue
        try:
            lines.append(parse_json(chunk.decode("utf-8"))[0])
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
    return Head(path, raw, tuple(lines), damage=cut, blank=blank and damage is None, compressed=compressed)


@dataclass(frozen=True)
class _Line:
    """The verdict on one physical line: a JSON object, or the reason it is skipped."""

    obj: dict[str, Any] | None = None
    reason: str | None = None
    detail: str = ""
    surrogates: bool = False


def _parse_line(raw: bytes, terminated: bool) -> _Line | None:
    """Judge one JSONL line (None for a blank line); pure, so the rules live in one place."""
    stripped = raw.strip()
    if not stripped:
        return None
    try:
        obj, replaced = parse_json(stripped)  # the bytes: decoded as UTF-8 only if the fast parser refuses them
    except UnicodeDecodeError as exc:  # before any parse, as a decode of the line would
        return _Line(reason="invalid_utf8", detail=str(exc))
    except (ValueError, RecursionError) as exc:  # absurdly deep nesting is malformed too
        return _Line(reason="malformed_json" if terminated else "truncated_last_line", detail=str(exc))
    if not isinstance(obj, dict):
        return _Line(reason="not_an_object", detail=type(obj).__name__)
    return _Line(obj=obj, surrogates=replaced)


def _ends_in_nul(raw: bytes) -> bool:
    return raw.rstrip().endswith(b"\x00")


@dataclass(frozen=True)
class Span:
    """A byte range of a plain (uncompressed) JSONL file that holds whole sessions.

    Attributes
    ----------
    start, end : int
        Byte offsets; `start` is the first byte of a line, `end` the first
        byte of the line after the span (or the file size).
    first_line : int
        The 1-based line number of the line at `start`, so skips and entry ids
        read in a span carry the numbers a whole-file reading gives.
    """

    start: int
    end: int
    first_line: int = 1


def iter_jsonl(
    path: str | Path, audit: ImportAudit, span: Span | None = None
) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    """Stream the JSON objects of a JSONL file with their 1-based line numbers and raw bytes.

    Bad lines are skipped and counted in `audit` (invalid UTF-8, malformed
    JSON, a truncated last line, a value that is not an object); blank lines
    are ignored; an empty file is counted once as ``empty_file``; an
    unreadable one as ``unreadable``. A NUL tail is one ``nul_tail`` skip at
    the line where it starts (text before the NULs on that line is read as a
    cut-off last line). A compressed file's damage is one
    ``corrupt_compressed`` skip at the line it cuts; the complete lines
    before it are yielded. Lone surrogates are replaced (noted
    ``lone_surrogates_replaced``, one per line).

    With a `span`, only the lines of that byte range are read, numbered from
    its ``first_line`` (a span of a compressed file is an error: it cannot be
    entered in the middle).
    """
    try:
        f = open_binary(path, STREAM_BUFFER)
    except OSError as exc:
        audit.skip(path, None, "unreadable", os_reason(exc))
        return
    with f:
        if span is None:
            yield from _jsonl_objects(path, f, audit)
            return
        if is_compressed(f):
            raise ValueError(f"{path}: a span cannot be read from a compressed file")
        if span.start:
            f.seek(span.start)
        yield from _jsonl_objects(path, _span_lines(f, span), audit, span.first_line - 1, in_span=True)


def _span_lines(f: BinaryIO, span: Span) -> Iterator[bytes]:
    """Yield the lines of `f` from its position up to the span's end."""
    pos = f.tell()
    for raw in f:
        if pos >= span.end:
            return
        pos += len(raw)
        yield raw


def _jsonl_objects(
    path: str | Path,
    f: Iterable[bytes],
    audit: ImportAudit,
    lineno: int = 0,
    in_span: bool = False,
) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    seen_data = in_span  # a span is cut at session lines: never empty, and the file's emptiness is not its to judge

    def judge(lineno: int, raw: bytes, terminated: bool) -> tuple[int, dict[str, Any], bytes] | None:
        nonlocal seen_data
        obj = fast_decode(raw)  # the usual line: one object, taken as it is (see json_repair)
        if isinstance(obj, dict):
            seen_data = True
            return lineno, obj, raw
        verdict = _parse_line(raw, terminated)  # every other line: the rules, from the start
        if verdict is None:
            return None
        seen_data = True
        if verdict.obj is None:
            # `_parse_line` gives every verdict without an object a reason.
            audit.skip(path, lineno, cast(str, verdict.reason), verdict.detail)
            return None
        if verdict.surrogates:
            audit.note("lone_surrogates_replaced")
        return lineno, verdict.obj, raw

    # Lines are judged one behind the reader: what the last line means (cut by a damage,
    # the start of a NUL tail) is only known at the end of the file. A line ending in NULs
    # is held with the NUL/blank lines after it until data shows it is no tail after all.
    # The usual line holds no NUL: it is held alone (`held`), without the list (`tail`).
    held: tuple[int, bytes] | None = None
    tail: list[tuple[int, bytes]] | None = None
    try:
        for raw in f:
            lineno += 1
            if tail is not None:
                if not raw.strip(_BLANK_OR_NUL):
                    tail.append((lineno, raw))
                    continue
                for n, line in tail:
                    if (item := judge(n, line, line.endswith(b"\n"))) is not None:
                        yield item
                tail = None
            elif held is not None:
                if (item := judge(held[0], held[1], held[1].endswith(b"\n"))) is not None:
                    yield item
            if b"\x00" in raw and _ends_in_nul(raw):
                tail, held = [(lineno, raw)], None
            else:
                held = (lineno, raw)
    except OSError as exc:  # an I/O error ends the file, not the import
        for n, line in tail if tail is not None else [held] if held is not None else []:
            if (item := judge(n, line, line.endswith(b"\n"))) is not None:
                yield item
        audit.skip(path, lineno + 1, "unreadable", os_reason(exc))
        return
    pending = tail if tail is not None else [held] if held is not None else []
    damage = damage_of(f)
    if damage is not None:
        # The damage cut the last line (unless it struck right after a newline): counted at
        # its true line number; every complete line before it is judged as usual.
        cut = pending.pop()[0] if pending and not pending[-1][1].endswith(b"\n") else lineno + 1
        for n, line in pending:
            if (item := judge(n, line, True)) is not None:
                yield item
        audit.skip(path, cut, "corrupt_compressed", damage.describe())
        return
    if pending and _ends_in_nul(pending[0][1]):
        first, raw = pending[0]
        # Text before the NULs is a cut-off last line (kept if it still parses).
        if (item := judge(first, raw.rstrip(_BLANK_OR_NUL), False)) is not None:
            yield item
        nuls = sum(line.count(b"\x00") for _, line in pending)
        audit.skip(path, first, "nul_tail", f"{nuls} NUL bytes from line {first} to the end of the file")
        return
    for n, line in pending:
        if (item := judge(n, line, line.endswith(b"\n"))) is not None:
            yield item
    if not seen_data:
        audit.skip(path, None, "empty_file")


def load_json(path: str | Path, audit: ImportAudit) -> Any | None:
    """Parse a whole-file JSON document (``.traj``, export JSON); None (counted) when it fails.

    Read through `open_binary` (BOM stripped, zstd decoded). A NUL tail is
    counted (``nul_tail``) and ignored; a compressed file's damage is one
    ``corrupt_compressed`` skip (the document is still used if what decoded
    parses); lone surrogates are replaced (noted).
    """
    try:
        with open_binary(path) as f:
            data = f.read()
            damage = damage_of(f)
    except OSError as exc:
        audit.skip(path, None, "unreadable", os_reason(exc))
        return None
    # A damage ends the data wherever it struck: NULs before it are no crash's tail.
    body = data.rstrip(_BLANK_OR_NUL) if damage is None else data
    tail = data[len(body) :]
    if b"\x00" in tail:
        at = len(body) + tail.index(b"\x00")
        nuls = tail.count(b"\x00")
        audit.skip(path, data.count(b"\n", 0, at) + 1, "nul_tail", f"{nuls} NUL bytes at the end of the file")
    elif not body.strip() and damage is None:
        audit.skip(path, None, "empty_file")
        return None
    if damage is not None:
        audit.skip(path, data.count(b"\n") + 1, "corrupt_compressed", damage.describe())
    if not body.strip():
        return None
    try:
        doc, replaced = parse_json(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        if damage is None:
            audit.skip(path, None, "invalid_utf8", str(exc))
        return None
    except (ValueError, RecursionError) as exc:
        if damage is None:  # a document cut by the damage is already counted
            audit.skip(path, None, "malformed_json", str(exc)[:200] or type(exc).__name__)
        return None
    if replaced:
        audit.note("lone_surrogates_replaced")
    if doc is None:
        # `null` parses, but holds nothing: counted, so the caller's None is never silent.
        audit.skip(path, None, "not_an_object", "document is null")
    return doc
