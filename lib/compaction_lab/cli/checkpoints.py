"""Compactions: ``project``, ``checkpoints``.

``compaction-lab project PATH --strategy NAME``
    Force a compaction and print the projection's segments (or JSON).
``compaction-lab checkpoints list`` / ``checkpoints release KEY``
    Inspect compaction checkpoints; release a stuck "started" fence.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from compaction_lab.cli._common import COMMANDS

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers
    from compaction_lab.core.session import Session


def _history_tokens(session, cut: int, strat, ctx) -> int:
    """Return the input size the strategy's own estimator sees before the cut (shape included)."""
    from compaction_lab.strategies.base import ESTIMATORS, history

    est = ESTIMATORS[strat.estimator]
    shape = ctx.shape.for_session(session)
    texts = [shape.system_prompt, shape.tools_text()] + [r.text for r in history(session, cut)]
    return sum(est(t) for t in texts)


def _cmd_project(args: argparse.Namespace) -> int:
    from compaction_lab import strategies, summarize
    from compaction_lab.ingest import ImportAudit, IngestError, load_sessions
    from compaction_lab.run import params
    from compaction_lab.strategies import CompactionContext, calibration

    try:
        strat = strategies.get(args.strategy)
        provider = summarize.get_summarizer(args.summarizer)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Before any import: a window the output ceiling fills leaves the strategy nothing to keep.
    bad = params.window_problems(
        args.window, args.output_ceiling, [args.strategy], names=("--window", "--output-ceiling")
    )
    if bad:
        print("\n".join(f"error: {b}" for b in bad), file=sys.stderr)
        return 2
    ctx = CompactionContext(window=args.window, output_ceiling=args.output_ceiling, summarizer=provider)
    audit = ImportAudit()
    try:
        sessions: Sequence[Session] = [
            s for s in load_sessions(args.path, audit) if not args.session or s.id == args.session
        ]
    except (IngestError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not sessions:
        print(f"error: no session{' ' + args.session if args.session else ''} in {args.path}", file=sys.stderr)
        return 2
    from compaction_lab.core.excerpt import for_stage

    sessions = for_stage(sessions, "the projections")  # records over the per-record cap, excerpted and said so
    results = []
    for s in sessions:
        cut = len(s.records) if args.cut is None else args.cut
        if not 0 <= cut <= len(s.records):
            print(f"error: --cut {cut} outside session {s.id} (0..{len(s.records)})", file=sys.stderr)
            return 2
        if args.respect_trigger:
            used = _history_tokens(s, cut, strat, ctx)
            # a trigger upstream drives from the API's usage compares the session's own model tokens
            if not strat.fires(used, calibration.calibrated_context(s, ctx)):
                msg = (
                    f"{s.id}: {strat.name}'s trigger does not fire at {used:,} tokens ({strat.estimator}); nothing cut"
                )
                results.append({"session_id": s.id, "compacted": False, "input_tokens": used, "message": msg})
                if not args.json:
                    print(msg)
                continue
        proj = strategies.compact(s, args.strategy, cut, ctx)
        results.append({"session_id": s.id, "compacted": True, **proj.to_json()})
        if not args.json:
            _print_projection(proj)
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2, ensure_ascii=False, default=str))
    return 0


def _print_projection(proj) -> None:
    from compaction_lab.strategies.labels import strategy_label

    print(
        f"{proj.session_id}: {strategy_label(proj)} ({proj.algorithm_version}) at cut {proj.cut} — "
        f"{proj.tokens:,} tokens in {len(proj.segments)} segments; capacity {proj.capacity:,} ({proj.estimator})"
    )
    print(f"{'#':>4}  {'segment':<18} {'role':<9} {'record':<12} {'tokens':>8}  entries")
    for i, seg in enumerate(proj.segments):
        ids = ", ".join(seg.entry_ids[:3]) + (" …" if len(seg.entry_ids) > 3 else "")
        label = f"  [{seg.label}]" if seg.label else ""
        print(f"{i:>4}  {seg.kind:<18} {seg.role:<9} {seg.record_kind or '':<12} {seg.tokens:>8,}  {ids}{label}")
    if proj.summary_request is not None:
        req = proj.summary_request
        print(f"summary request: {req.shape}, template {req.template}, fingerprint {req.fingerprint()[:16]}")
    if proj.receipt is not None:
        r = proj.receipt
        print(
            f"receipt: summarizer {r.summarizer}{' (stand-in)' if r.stand_in else ''}"
            f"{', fallback used' if r.fallback else ''}{', ' + r.error if r.error else ''}"
        )
    print()


def _cmd_checkpoints_list(args: argparse.Namespace) -> int:
    from compaction_lab.store.checkpoints import CheckpointError, default_path, list_checkpoints

    if not args.db and not default_path().exists():
        # The default place, before anything was checkpointed: nothing to list, and nothing is created.
        print(f"no checkpoint database at {default_path()}: nothing checkpointed yet", file=sys.stderr)
        if args.json:
            print("[]")
        return 0
    try:
        rows = list_checkpoints(args.db, status=args.status, session_id=args.session)
    except CheckpointError as exc:  # a mistyped --db is said so, never created
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        print("no checkpoints", file=sys.stderr)
        return 0
    for r in rows:
        extra = f" owner {r.get('owner')} ({r.get('owner_liveness', '?')})" if r.get("status") == "started" else ""
        print(f"{r['key']}  {r['status']:<10} {r.get('strategy') or ''}{extra}")
    return 0


def _cmd_checkpoints_release(args: argparse.Namespace) -> int:
    from compaction_lab.store.checkpoints import CheckpointError, release_checkpoint

    try:
        released = release_checkpoint(args.key, args.db, force=args.force)
    except (CheckpointError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not released:
        print(f"error: no checkpoint {args.key}", file=sys.stderr)
        return 1
    print(f"released {args.key}")
    return 0


@COMMANDS.register("checkpoints", rank=40)
def add_commands(sub: Subparsers) -> None:
    """Add ``project`` and ``checkpoints`` (``list``, ``release``) to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
    proj = sub.add_parser("project", help="force a compaction and print the projection")
    proj.add_argument("path", help="a session file or directory (any supported format)")
    proj.add_argument("--strategy", required=True, help="strategy name (docs/strategies.md lists them)")
    proj.add_argument("--session", help="only this session id")
    proj.add_argument("--window", type=int, default=128_000, help="context window W (default 128000)")
    proj.add_argument("--output-ceiling", type=int, default=32_000, help="output ceiling O (default 32000)")
    proj.add_argument("--cut", type=int, help="compact records before this source_order (default: the end)")
    proj.add_argument("--respect-trigger", action="store_true", help="compact only if the strategy's trigger fires")
    proj.add_argument("--summarizer", default="extractive", help="none or extractive (offline stand-in)")
    proj.add_argument("--json", action="store_true", help="segments with text, totals, summary request shape")
    proj.set_defaults(func=_cmd_project)

    ck = sub.add_parser("checkpoints", help="list compaction checkpoints or release a stuck one")
    cksub = ck.add_subparsers(dest="checkpoints_command", required=True)
    cl = cksub.add_parser("list", help="every checkpoint with its status")
    cl.add_argument("--status", choices=["started", "committed", "superseded"])
    cl.add_argument("--session", help="only this session id")
    cl.add_argument("--db", help="checkpoint database (default: data/checkpoints/checkpoints.sqlite)")
    cl.add_argument("--json", action="store_true")
    cl.set_defaults(func=_cmd_checkpoints_list)
    cr = cksub.add_parser("release", help="delete a stuck 'started' fence (an operator action)")
    cr.add_argument("key", help="SESSION:CUT:ALGO:HASH as printed by list")
    cr.add_argument("--force", action="store_true", help="also delete a committed checkpoint")
    cr.add_argument("--db", help="checkpoint database")
    cr.set_defaults(func=_cmd_checkpoints_release)
