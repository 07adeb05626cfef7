"""Agent sessions and the archive of originals: ``import``, ``history``, ``tally``.

``compaction-lab import PATH...``
    Import sessions (any supported format, files or directories) into the
    archive of originals; re-importing adds nothing twice.
``compaction-lab history search QUERY`` / ``history get ENTRY_ID``
    Search the archive (SQLite FTS5) / print an original record exactly.
``compaction-lab tally PATH...``
    Import and print what fills the sessions (the composition table).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from compaction_lab.cli._common import COMMANDS, engine_arguments

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers


def _import_audit_line(audit) -> None:
    print(audit.summary(), file=sys.stderr)
    for skip in audit.skipped[:20]:
        where = f"{skip.path}:{skip.line}" if skip.line else skip.path
        print(f"  skipped {where}: {skip.reason} {skip.detail}".rstrip(), file=sys.stderr)
    if audit.n_skipped > 20:
        print(f"  ... {audit.n_skipped - 20} more skips", file=sys.stderr)


def _cmd_import(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    from compaction_lab.engine.scheduler import EngineError, is_address, open_engine, scheduler_setting
    from compaction_lab.ingest import ImportAudit, IngestError, check_paths, load_sessions
    from compaction_lab.store.archive import Archive, ArchiveError

    audit = ImportAudit()
    try:
        check_paths(args.paths)  # a path that does not exist is refused before the archive is created
        with ExitStack() as opened:
            # A cluster is reached before the archive is opened: one that cannot be leaves no empty
            # archive behind. ``auto`` is sized to the input, so load_sessions opens it.
            setting = scheduler_setting(args.scheduler)
            engine = opened.enter_context(open_engine(setting)) if is_address(setting) else setting
            arch = opened.enter_context(Archive(args.archive))
            # One writer (this process) keeps the archive one SQLite file with one FTS index;
            # the engine's workers read and parse the sources (see docs/cluster.md).
            sessions = load_sessions(args.paths, audit, formats=args.format, engine=engine)
            result = arch.add_sessions(sessions, progress=not args.quiet)
            total = arch.count()
            where = arch.path
    except (IngestError, FileNotFoundError, ArchiveError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _import_audit_line(audit)
    print(
        f"archive {where}: {result.records_added} new records "
        f"({result.records_seen - result.records_added} already there), {total} in all"
    )
    return _nothing_imported(audit)


def _nothing_imported(audit) -> int:
    """0 when a session was imported; else 2, with one line saying so (the skips were printed above).

    Skipped files are counted, never fatal, while anything imports: one bad file
    among many must not hide the rest; but a command that imported nothing did
    not do what was asked.
    """
    if audit.sessions:
        return 0
    print(f"error: no session imported ({audit.n_skipped} sources skipped; reasons above)", file=sys.stderr)
    return 2


def _positive_int(text: str) -> int:
    """Read an integer >= 1, as an argparse type (``--limit 0`` would silently find nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (>= 1), got {value}")
    return value


def _open_archive(args: argparse.Namespace):
    from compaction_lab.store.archive import Archive

    return Archive(args.archive, readonly=True)


def _cmd_history_search(args: argparse.Namespace) -> int:
    from compaction_lab.store.archive import ArchiveError

    try:
        with _open_archive(args) as arch:
            hits = arch.search(
                " ".join(args.query), session=args.session, limit=args.limit, raw=args.raw, any_term=args.any
            )
    except (ArchiveError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], indent=2, ensure_ascii=False))
        return 0
    if not hits:
        print("no matches", file=sys.stderr)
        return 1
    for h in hits:
        what = h.kind + (f" {h.tool}" if h.tool else "") + (f" {h.target}" if h.target else "")
        print(f"{h.entry_id}  [{h.session_id} #{h.source_order}] {what[:100]}")
        print(f"    {' '.join(h.snippet.split())}")
    return 0


def _cmd_history_get(args: argparse.Namespace) -> int:
    from compaction_lab.store.archive import ArchiveError

    try:
        with _open_archive(args) as arch:
            recs = arch.get(args.entry_id, session=args.session)
    except ArchiveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.block is not None:
        recs = [r for r in recs if r.block_index == args.block]
    if not recs:
        print(f"error: no entry {args.entry_id!r} in the archive", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r.to_dict() for r in recs], indent=2, ensure_ascii=False))
        return 0
    sessions = {r.session_id for r in recs}
    if len(recs) == 1:
        # Exactly the original text, byte for byte: no header, no added newline.
        sys.stdout.write(recs[0].text)
        sys.stdout.flush()
        return 0
    if len(sessions) > 1:
        print(f"note: entry {args.entry_id!r} exists in {len(sessions)} sessions; use --session", file=sys.stderr)
    for r in recs:
        print(f"--- {r.session_id} {r.entry_id} block {r.block_index} ({r.kind}{' ' + r.tool if r.tool else ''}) ---")
        print(r.text)
    return 0


def _cmd_tally(args: argparse.Namespace) -> int:
    import functools
    import importlib

    from compaction_lab.core.tokens import EncodingUnavailable
    from compaction_lab.engine.scheduler import EngineError
    from compaction_lab.ingest import IngestError
    from compaction_lab.tally import composition

    try:
        result = composition.tally(
            args.paths,
            formats=args.format,
            encoding=args.encoding,
            tokenizer=args.tokenizer,
            scheduler=args.scheduler,
            progress=not args.json and sys.stderr.isatty(),
            # The table is printed with pandas (JSON is not): imported while the workers read.
            meanwhile=None if args.json else functools.partial(importlib.import_module, "pandas"),
        )
    except (IngestError, FileNotFoundError, EngineError, EncodingUnavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    audit = result.audit
    _import_audit_line(audit)
    if args.json:
        print(result.to_json())  # without pandas: a person waits for this command
        return _nothing_imported(audit)
    if not result.rows:
        return _nothing_imported(audit)
    import pandas as pd

    comp = result.table
    with pd.option_context("display.max_rows", None, "display.width", 200):
        print(composition.with_shares(comp).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        print()
        print(
            composition.coarse_view(comp)
            .query("session_id == 'ALL'")
            .to_string(index=False, float_format=lambda x: f"{x:.3f}")
        )
    return 0


@COMMANDS.register("history", rank=30)
def add_commands(sub: Subparsers) -> None:
    """Add ``import``, ``history`` (``search``, ``get``) and ``tally`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
    from compaction_lab.ingest import formats

    known = formats()  # the registered importers, in sniffing order
    imp = sub.add_parser("import", help="import sessions into the archive of originals")
    imp.add_argument("paths", nargs="+", help="session files or directories (any supported format)")
    imp.add_argument("--archive", help="archive file (default: data/archive/originals.sqlite)")
    imp.add_argument("--format", action="append", choices=known, help="only these formats (repeatable)")
    imp.add_argument("--quiet", action="store_true", help="no progress bar")
    engine_arguments(imp, tokenizer=False)
    imp.set_defaults(func=_cmd_import)

    hist = sub.add_parser("history", help="search or fetch original records in the archive")
    hsub = hist.add_subparsers(dest="history_command", required=True)
    hs = hsub.add_parser("search", help="full-text search (every word matched literally)")
    hs.add_argument("query", nargs="+")
    hs.add_argument("--session", help="only this session id")
    hs.add_argument("--limit", type=_positive_int, default=10, help="most hits to print (default 10)")
    hs.add_argument("--any", action="store_true", help="match any word instead of all")
    hs.add_argument("--raw", action="store_true", help="the query is FTS5 syntax")
    hs.add_argument("--json", action="store_true")
    hs.add_argument("--archive", help="archive file")
    hs.set_defaults(func=_cmd_history_search)
    hg = hsub.add_parser("get", help="print an original record exactly")
    hg.add_argument("entry_id")
    hg.add_argument("--session", help="session id, when the entry id is not unique")
    hg.add_argument("--block", type=int, help="only this block of the entry")
    hg.add_argument("--json", action="store_true")
    hg.add_argument("--archive", help="archive file")
    hg.set_defaults(func=_cmd_history_get)

    tally = sub.add_parser("tally", help="import and print what fills the sessions")
    tally.add_argument("paths", nargs="+")
    tally.add_argument("--format", action="append", choices=known, help="only these formats (repeatable)")
    tally.add_argument("--encoding", default="cl100k_base", help="report tokenizer")
    tally.add_argument("--json", action="store_true", help="the composition table as JSON records")
    engine_arguments(tally)
    tally.set_defaults(func=_cmd_tally)
