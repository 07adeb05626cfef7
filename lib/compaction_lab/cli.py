"""``compaction-lab`` command line.

``compaction-lab run --profile NAME [--set K=V ...] [--sweep K=V1,V2 ...] [--redact|--no-redact]``
    Execute the profile's notebook chain into a new run folder and print the
    folder's path as the last line (scripts read it). Exits 1 with the
    failing cell's error when a notebook fails, 2 on a bad profile. With
    ``--sweep``, one run folder per value combination and a comparison
    folder (``sweep.parquet``, ``sweep.html``), whose path is printed last.
    SIGINT / SIGTERM mark the run folder ``interrupted`` and exit 130 / 143
    with one line naming it; run folders whose process died without a word
    (kill -9) are warned about and marked ``dead`` when the next run starts.
``compaction-lab runs [--results DIR] [--json]``
    List the run folders, newest first: status (ok / failed / interrupted /
    dead / running), profile, start, wall time, the failing notebook.
``compaction-lab profiles``
    List the profiles and what each is for.
``compaction-lab providers``
    List the endpoint presets (``run --provider NAME`` / ``--set model=NAME``):
    base URL, model, key variable (never a key), price table, cache rule.
``compaction-lab doctor [--profile P] [--set K=V ...] [--provider NAME] [--spend] [--no-plan]``
    Check the environment and the profile's endpoint before a run spends
    (key variable named, never printed; ``--spend``: one 1-token request),
    and count the calls a run would make and their cost (a dry run against a
    stand-in endpoint: nothing sent).
``compaction-lab import PATH...``
    Import sessions (any supported format, files or directories) into the
    archive of originals; re-importing adds nothing twice.
``compaction-lab history search QUERY`` / ``history get ENTRY_ID``
    Search the archive (SQLite FTS5) / print an original record exactly.
``compaction-lab tally PATH...``
    Import and print what fills the sessions (the composition table).
``compaction-lab project PATH --strategy NAME``
    Force a compaction and print the projection's segments (or JSON).
``compaction-lab checkpoints list`` / ``checkpoints release KEY``
    Inspect compaction checkpoints; release a stuck "started" fence.
``compaction-lab exam --profile P``
    The closed-book exam without notebooks: per-strategy recall with intervals.
``compaction-lab verify [--update]``
    Rebuild, with no model and no network, every request the exam and each
    strategy's summary step would send and check them against the call-shape
    fingerprints, the documented summary-request shapes and the lock
    (``data/shapes/verify.lock.json``). Exits 1 with the changed parts and a
    diff on drift; ``--update`` rewrites the lock after an intended change.
``compaction-lab capture-shape (--from-request FILE | --from-codex FILE) --name NAME [--force]``
    Record a call shape (system prompt + tool definitions) from an
    OpenAI-style request body or a Codex rollout's recorded instructions into
    ``data/shapes/NAME.json``; prints its path and fingerprint.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compaction_lab import __version__

if TYPE_CHECKING:
    from compaction_lab.core.session import Session


def _cmd_run(args: argparse.Namespace) -> int:
    """``run``: SIGINT / SIGTERM end it with one line naming the run folder and 130 / 143, never a traceback."""
    from compaction_lab.run import lifecycle

    # Guarded from the first moment, so even a Ctrl-C while the profile loads ends cleanly.
    with lifecycle.stop_on_signals():
        try:
            return _run_command(args)
        except lifecycle.RunInterrupted as exc:
            print(("" if args.quiet else "\n") + str(exc), file=sys.stderr)  # the newline ends a progress bar
            return exc.exit_code


def _profile_overrides(prof: Any, assignments: list[str] | None, provider: str | None) -> dict[str, Any]:
    """``--set K=V`` and ``--provider NAME`` as chain-wide overrides (the preset's model, cache rule and
    price table; ``--set`` wins). Raises ProfileError."""
    from compaction_lab.run import runner as report

    overrides = dict(report.parse_assignment(a) for a in assignments or [])
    if provider:
        from compaction_lab.endpoints import presets
        from compaction_lab.run import params

        declared = {k for nb in prof.notebooks for k in params.declared_parameters(nb)}
        overrides = {**presets.preset_overrides(provider, declared), **overrides}
    return overrides


def _sweep_summary(sw: Any) -> int:
    """Print a sweep's runs and where its comparison is (the sweep folder last, on stdout); 1 if a run is not ok."""
    from compaction_lab.run import sweep

    failed = [st for _, _, st in sw.runs if st not in ("ok", sweep.COMPLETED_EARLIER)]
    for combo, res, st in sw.runs:
        print(f"  {combo}: {res.run_dir if res else st}", file=sys.stderr)
    print(f"comparison: {sw.report}", file=sys.stderr)
    print(sw.folder)
    return 1 if failed else 0


def _resume_command(args: argparse.Namespace) -> int:
    """``run --resume SWEEP_DIR``: the plan in the folder says what to run; only where and how loudly are taken."""
    from compaction_lab.engine import EngineError
    from compaction_lab.run import runner as report
    from compaction_lab.run import sweep

    given = [
        flag
        for flag, value in (
            ("--profile", args.profile),
            ("--set", args.set),
            ("--provider", args.provider),
            ("--sweep", args.sweep),
            ("--no-sweep", args.no_sweep),
            ("--name", args.name),
            ("--results", args.results),
            ("--tokenizer", args.tokenizer),
            ("--allow-unknown", args.allow_unknown),
            ("--redact/--no-redact", args.redact is not None),
        )
        if value
    ]
    if given:
        print(
            f"error: --resume runs the sweep as its plan (sweep.json) says; {', '.join(given)} cannot change it",
            file=sys.stderr,
        )
        return 2
    try:
        sw = sweep.resume_sweep(args.resume, progress=not args.quiet, scheduler=args.scheduler)
    except (report.ProfileError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"ran {len(sw.executed)} of {len(sw.runs)} planned runs", file=sys.stderr)
    return _sweep_summary(sw)


def _run_command(args: argparse.Namespace) -> int:
    from compaction_lab.engine import EngineError
    from compaction_lab.run import runner as report
    from compaction_lab.run import sweep

    if args.resume:
        return _resume_command(args)
    try:
        prof = report.load_profile(args.profile or "default")
        overrides = _profile_overrides(prof, args.set, args.provider)
        sweeps = {} if args.no_sweep else dict(prof.sweeps)
        sweeps.update(sweep.parse_sweep(a) for a in args.sweep or [])
    except report.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    results = Path(args.results) if args.results else None
    if args.tokenizer:
        overrides["tokenizer"] = args.tokenizer
    if sweeps:
        if args.name:
            print("error: --name names one run; a sweep names its runs after the swept values", file=sys.stderr)
            return 2
        try:
            sw = sweep.run_sweep(
                prof,
                sweeps,
                results=results,
                overrides=overrides,
                progress=not args.quiet,
                redact=args.redact,
                allow_unknown=args.allow_unknown,
                scheduler=args.scheduler,
            )
        except (report.ProfileError, EngineError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _sweep_summary(sw)
    if args.scheduler:
        overrides["scheduler"] = args.scheduler  # one run: where its notebooks' heavy work runs
    try:
        result = report.run_profile(
            prof,
            results=results,
            run_name=args.name,
            progress=not args.quiet,
            overrides=overrides,
            redact=args.redact,
            allow_unknown=args.allow_unknown,
        )
    except report.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except report.NotebookFailed as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        print(exc.traceback, file=sys.stderr)
        print(f"partial run folder (executed notebook and run.json kept): {exc.run_dir}", file=sys.stderr)
        return 1
    for nb in result.notebooks:
        print(f"  {nb.notebook}: {nb.seconds:.1f} s", file=sys.stderr)
    if result.report:
        print(f"report: {result.report}", file=sys.stderr)
    print(result.run_dir)
    return 0


def _cmd_runs(args: argparse.Namespace) -> int:
    from compaction_lab.core import paths
    from compaction_lab.run import lifecycle

    results = Path(args.results) if args.results else paths.results_dir()
    try:
        listing = lifecycle.list_runs(results)
    except OSError as exc:
        print(f"error: cannot list {results}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(listing.to_dict(), indent=2, default=str))
    elif not listing.runs:
        print(lifecycle.format_listing(listing), file=sys.stderr)
    else:
        print(lifecycle.format_listing(listing))
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from compaction_lab.run import params
    from compaction_lab.run import runner as report

    names = report.list_profiles()
    if not names:
        print("no profiles found", file=sys.stderr)
        return 1
    for name in names:
        try:
            p = params.checked(report.load_profile(name))  # a profile that could not run is listed as invalid
            desc = p.description.splitlines()[0] if p.description else ""
            swept = ""
            if p.sweeps:
                n = 1
                for values in p.sweeps.values():
                    n *= len(values)
                swept = f"  sweeps {', '.join(f'{k}×{len(v)}' for k, v in p.sweeps.items())} ({n} runs)"
            print(f"{name:<14} {desc}  [{', '.join(p.notebooks)}]{swept}")
        except report.ProfileError as exc:
            print(f"{name:<14} (invalid: {exc})")
    return 0


def _cmd_providers(args: argparse.Namespace) -> int:
    from compaction_lab.endpoints import presets
    from compaction_lab.privacy.secrets import mask_url

    names = presets.list_presets()
    if not names:
        print("no endpoint presets found", file=sys.stderr)
        return 1
    for name in names:
        try:
            p = presets.load_preset(name)
        except ValueError as exc:
            print(f"{name:<10} (invalid: {exc})")
            continue
        key = p.model.get("api_key_env") or "none"  # the variable's NAME; its value is never read here
        print(
            f"{name:<10} {mask_url(str(p.model.get('base_url')))}  model={p.model.get('model')}  key={key}  "
            f"price_table={p.price_table or 'none'}  cache_rule={p.cache_rule or 'none'}"
        )
    return 0


def _import_report_line(rep) -> None:
    print(rep.summary(), file=sys.stderr)
    for skip in rep.skipped[:20]:
        where = f"{skip.path}:{skip.line}" if skip.line else skip.path
        print(f"  skipped {where}: {skip.reason} {skip.detail}".rstrip(), file=sys.stderr)
    if rep.n_skipped > 20:
        print(f"  ... {rep.n_skipped - 20} more skips", file=sys.stderr)


def _cmd_import(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    from compaction_lab.engine import EngineError, is_address, open_engine, scheduler_setting
    from compaction_lab.ingest import ImportReport, IngestError, load_sessions
    from compaction_lab.store.archive import Archive, ArchiveError

    rep = ImportReport()
    try:
        with ExitStack() as opened:
            # A cluster is reached before the archive is opened: one that cannot be leaves no empty
            # archive behind. ``auto`` is sized to the input, so load_sessions opens it.
            setting = scheduler_setting(args.scheduler)
            engine = opened.enter_context(open_engine(setting)) if is_address(setting) else setting
            arch = opened.enter_context(Archive(args.archive))
            # One writer (this process) keeps the archive one SQLite file with one FTS index;
            # the engine's workers read and parse the sources (see README, "Running on a cluster").
            sessions = load_sessions(args.paths, rep, formats=args.format, engine=engine)
            result = arch.add_sessions(sessions, progress=not args.quiet)
            total = arch.count()
            where = arch.path
    except (IngestError, FileNotFoundError, ArchiveError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _import_report_line(rep)
    print(
        f"archive {where}: {result.records_added} new records "
        f"({result.records_seen - result.records_added} already there), {total} in all"
    )
    return _nothing_imported(rep)


def _nothing_imported(rep) -> int:
    """0 when a session was imported; else 2, with one line saying so (the skips were printed above).

    Skipped files are counted, never fatal, while anything imports: one bad file
    among many must not hide the rest; but a command that imported nothing did
    not do what was asked.
    """
    if rep.sessions:
        return 0
    print(f"error: no session imported ({rep.n_skipped} sources skipped; reasons above)", file=sys.stderr)
    return 2


def _positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (``--limit 0`` would silently find nothing)."""
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
    import pandas as pd

    from compaction_lab import composition
    from compaction_lab.core.tokens import EncodingUnavailable
    from compaction_lab.engine import EngineError
    from compaction_lab.ingest import IngestError

    try:
        result = composition.tally(
            args.paths,
            formats=args.format,
            encoding=args.encoding,
            tokenizer=args.tokenizer,
            scheduler=args.scheduler,
            progress=not args.json and sys.stderr.isatty(),
        )
    except (IngestError, FileNotFoundError, EngineError, EncodingUnavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rep, comp = result.report, result.table
    _import_report_line(rep)
    if args.json:
        print(comp.to_json(orient="records", indent=2))
        return _nothing_imported(rep)
    if comp.empty:
        return _nothing_imported(rep)
    with pd.option_context("display.max_rows", None, "display.width", 200):
        print(composition.with_shares(comp).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        print()
        print(
            composition.coarse_view(comp)
            .query("session_id == 'ALL'")
            .to_string(index=False, float_format=lambda x: f"{x:.3f}")
        )
    return 0


def _history_tokens(session, cut: int, strat, ctx) -> int:
    """The input size the strategy's own estimator sees before the cut (shape included)."""
    from compaction_lab.strategies.base import ESTIMATORS, history

    est = ESTIMATORS[strat.estimator]
    shape = ctx.shape.for_session(session)
    texts = [shape.system_prompt, shape.tools_text()] + [r.text for r in history(session, cut)]
    return sum(est(t) for t in texts)


def _cmd_project(args: argparse.Namespace) -> int:
    from compaction_lab import strategies, summarize
    from compaction_lab.ingest import ImportReport, IngestError, load_sessions
    from compaction_lab.run import params
    from compaction_lab.strategies import CompactionContext

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
    rep = ImportReport()
    try:
        sessions: Sequence[Session] = [
            s for s in load_sessions(args.path, rep) if not args.session or s.id == args.session
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
            if not strat.fires(used, ctx):
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
            f"receipt: provider {r.provider}{' (stand-in)' if r.stand_in else ''}"
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


def _cmd_exam(args: argparse.Namespace) -> int:
    from compaction_lab import summarize
    from compaction_lab.exam import cases as exam_cases
    from compaction_lab.exam import closed, readers, stats
    from compaction_lab.ingest import sources, synthetic
    from compaction_lab.run import params
    from compaction_lab.run import runner as report
    from compaction_lab.strategies import CompactionContext

    try:
        # The profile's parameters are checked as for a run (keys only notebooks read do no harm here).
        from compaction_lab.endpoints import presets

        prof = report.load_profile(args.profile)
        if args.provider:
            prof = prof.with_parameters(presets.preset_overrides(args.provider))
        prof = params.checked(presets.resolve_profile(prof), allow_unknown=True)
    except report.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    p = {**prof.parameters}
    bad = params.window_problems(p.get("window", 128_000), p.get("output_ceiling", 32_000), args.strategy or [])
    if bad:
        print("\n".join(f"error: {b}" for b in bad), file=sys.stderr)
        return 2
    try:
        src = sources.gather(p.get("session_paths"), synthetic.SyntheticSpec.from_mapping(p), progress=not args.json)
        rc = exam_cases.build(src.sessions, src.chains or None, {**p, "seed": p.get("bank_seed", 7)})
        model = p.get("model") or None  # a model profile's endpoint, for its summarizer and reader
        ctx = CompactionContext(
            window=int(p.get("window", 128_000)),
            output_ceiling=int(p.get("output_ceiling", 32_000)),
            summarizer=summarize.get_summarizer(p.get("summarizer", "extractive"), model),
        )
        names = args.strategy or p.get("strategy_names") or None
        reader = readers.get_reader(p.get("reader", "verbatim"), model=model)
        result = closed.run_closed(rc.cases, rc.sessions, names, ctx, reader, progress=not args.json)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    recall = stats.recall_table(
        result.answers, n_boot=int(p.get("n_boot", 2000)), seed=int(p.get("stats_seed", 7)), unit=rc.unit
    )
    if args.json:
        print(recall.to_json(orient="records", indent=2))
        return 0
    n_q = sum(len(c.questions) for c in rc.cases)
    print(rc.describe())
    if recall.empty:
        return 0
    first = recall.iloc[0]
    print(
        f"{len(rc.cases)} cases, {n_q} questions ({int(first['n_records'])} records of {int(first['n_sessions'])} "
        f"sessions); reader: {result.answers['reader_label'].iloc[0]}; 95% intervals: {first['ci_method']}"
    )
    blind = not readers.measures_decoys(str(result.answers["reader"].iloc[0]))
    for _, r in recall.iterrows():
        decoys = (
            readers.DECOYS_NOT_MEASURED
            if blind
            else f"decoys fallen for {int(r['decoys_fallen'])}/{int(r['decoys_n'])}"
        )
        print(
            f"{r['strategy_label']:<48} {int(r['retained']):>4}/{int(r['n']):<4} {r['recall']:6.1%} "
            f"[{r['ci_low']:.1%}, {r['ci_high']:.1%}]  {decoys}  {r['projection_tokens']:>10,.0f} tokens"
            + ("  NOT SENDABLE (> W - O)" if bool(r["over_window"]) else "")
        )
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from compaction_lab import verify

    try:
        if args.update:
            lock = verify.update_lock(args.lock, args.shapes)
            print(f"verify: lock written to {lock}")
        result = verify.verify(args.lock, args.shapes)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(verify.report_text(result))
    return 0 if result.ok else 1


def _cmd_capture_shape(args: argparse.Namespace) -> int:
    from compaction_lab import capture

    try:
        if args.from_request:
            shape = capture.shape_from_request_file(args.from_request, args.name)
            source = f"an OpenAI-style request body ({Path(args.from_request).name})"
        else:
            _text, field = capture.codex_instructions(args.from_codex)
            shape = capture.shape_from_codex_session(args.from_codex, args.name)
            source = (
                f"a Codex rollout's session_meta.{field} ({Path(args.from_codex).name}); "
                "Codex records no tool definitions"
            )
        path = capture.write_shape(
            shape,
            args.output,
            overwrite=args.force,
            description=f"Captured by compaction-lab capture-shape from {source}.",
        )
    except capture.CaptureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{path}")
    from compaction_lab.core.fingerprints import shape_fingerprint

    print(f"fingerprint {shape_fingerprint(shape.system_prompt, shape.tools)} ({len(shape.tools)} tools)")
    print("run `compaction-lab verify --update` to pin it in the verify lock", file=sys.stderr)
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from compaction_lab.run import doctor
    from compaction_lab.run import runner as report

    overrides: dict[str, Any] = {}
    if args.profile and (args.set or args.provider):
        try:
            overrides = _profile_overrides(report.load_profile(args.profile), args.set, args.provider)
        except report.ProfileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    elif args.set or args.provider:
        print("error: --set and --provider apply to a profile: give --profile", file=sys.stderr)
        return 2
    return doctor.run_doctor(
        args.profile,
        args.spend,
        sys.stdout,
        as_json=args.json,
        overrides=overrides,
        plan=not args.no_plan,
        progress=not args.json,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compaction-lab",
        description="Measure what LLM-agent context compaction keeps, costs and loses.",
    )
    parser.add_argument("--version", action="version", version=f"compaction-lab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a profile's notebook chain into a new run folder")
    run.add_argument("--profile", help="profile name or YAML path (default: default)")
    run.add_argument("--results", help="folder that receives the run folder (default: data/results)")
    run.add_argument("--name", help="run folder name (default: <profile>-<UTC timestamp>)")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a chain-wide parameter (value read as YAML; repeatable)",
    )
    run.add_argument(
        "--provider",
        metavar="NAME",
        help="endpoint preset (data/providers/NAME.yaml): --set model=NAME plus its cache rule and price table",
    )
    run.add_argument(
        "--sweep",
        action="append",
        metavar="KEY=V1,V2",
        help="one run folder per value (V1,V2,... or range(A,B), B excluded; repeatable: every combination) "
        "plus a comparison (sweep.html); adds to / replaces the profile's sweeps: block",
    )
    run.add_argument("--no-sweep", action="store_true", help="run the profile once, ignoring its sweeps: block")
    run.add_argument(
        "--resume",
        metavar="SWEEP_DIR",
        help="finish a sweep as planned: runs that completed are kept, failed / interrupted / killed ones run again",
    )
    run.add_argument(
        "--allow-unknown",
        action="store_true",
        help="run even with parameters no notebook declares (recorded in run.json as unused_parameters)",
    )
    red = run.add_mutually_exclusive_group()
    red.add_argument(
        "--redact",
        dest="redact",
        action="store_true",
        default=None,
        help="mask secrets, emails and home paths in everything the run writes (default for my_sessions)",
    )
    red.add_argument(
        "--no-redact", dest="redact", action="store_false", help="do not redact (environment secrets are still masked)"
    )
    _engine_arguments(run)
    run.set_defaults(func=_cmd_run)

    runs = sub.add_parser(
        "runs", help="list run folders: status (ok/failed/interrupted/dead/running), profile, wall time"
    )
    runs.add_argument("--results", help="folder holding the run folders (default: data/results)")
    runs.add_argument("--json", action="store_true", help="the listing as JSON (for scripts)")
    runs.set_defaults(func=_cmd_runs)

    prof = sub.add_parser("profiles", help="list the run profiles")
    prof.set_defaults(func=_cmd_profiles)

    pv = sub.add_parser("providers", help="list the endpoint presets (--provider NAME, --set model=NAME)")
    pv.set_defaults(func=_cmd_providers)

    from compaction_lab.ingest import FORMATS

    imp = sub.add_parser("import", help="import sessions into the archive of originals")
    imp.add_argument("paths", nargs="+", help="session files or directories (any supported format)")
    imp.add_argument("--archive", help="archive file (default: data/archive/originals.sqlite)")
    imp.add_argument("--format", action="append", choices=FORMATS, help="only these formats (repeatable)")
    imp.add_argument("--quiet", action="store_true", help="no progress bar")
    _engine_arguments(imp, tokenizer=False)
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
    tally.add_argument("--format", action="append", choices=FORMATS, help="only these formats (repeatable)")
    tally.add_argument("--encoding", default="cl100k_base", help="report tokenizer")
    tally.add_argument("--json", action="store_true", help="the composition table as JSON records")
    _engine_arguments(tally)
    tally.set_defaults(func=_cmd_tally)

    proj = sub.add_parser("project", help="force a compaction and print the projection")
    proj.add_argument("path", help="a session file or directory (any supported format)")
    proj.add_argument("--strategy", required=True, help="strategy name (see the README)")
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

    ex = sub.add_parser("exam", help="run the closed-book exam of a profile without notebooks")
    ex.add_argument("--profile", default="default", help="profile name or YAML path (default: default)")
    ex.add_argument("--strategy", action="append", help="only these strategies (repeatable)")
    ex.add_argument("--json", action="store_true", help="the recall table as JSON records")
    ex.add_argument("--provider", metavar="NAME", help="endpoint preset (data/providers/NAME.yaml) for the model")
    ex.set_defaults(func=_cmd_exam)

    ve = sub.add_parser("verify", help="check every request the exam and the strategies would send (no model)")
    ve.add_argument("--update", action="store_true", help="rewrite the lock after an intended change")
    ve.add_argument("--lock", help="lock file (default: data/shapes/verify.lock.json)")
    ve.add_argument("--shapes", help="folder of shape files (default: data/shapes)")
    ve.set_defaults(func=_cmd_verify)

    cs = sub.add_parser("capture-shape", help="record a call shape from a request body or a Codex rollout")
    src = cs.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-request", metavar="FILE", help="an OpenAI-style request body (JSON)")
    src.add_argument("--from-codex", metavar="FILE", help="a Codex rollout (its recorded instructions)")
    cs.add_argument("--name", required=True, help="shape name (file data/shapes/NAME.json)")
    cs.add_argument("--output", help="write here instead of data/shapes/NAME.json")
    cs.add_argument("--force", action="store_true", help="replace an existing shape file")
    cs.set_defaults(func=_cmd_capture_shape)

    dr = sub.add_parser("doctor", help="check the environment and a profile's endpoint before anything is spent")
    dr.add_argument("--profile", help="profile name or YAML path whose model endpoint is checked")
    dr.add_argument("--spend", action="store_true", help="also send one chat request with max_tokens=1")
    dr.add_argument("--json", action="store_true", help="the checks as JSON")
    dr.add_argument("--set", action="append", metavar="KEY=VALUE", help="a parameter the run would be given")
    dr.add_argument("--provider", metavar="NAME", help="the endpoint preset the run would be given")
    dr.add_argument(
        "--no-plan",
        action="store_true",
        help="skip the dry run that counts the model calls a run would make (and their cost)",
    )
    dr.set_defaults(func=_cmd_doctor)
    return parser


def _engine_arguments(parser: argparse.ArgumentParser, tokenizer: bool = True) -> None:
    """``--scheduler`` (and ``--tokenizer``) for the commands whose work runs on the engine."""
    from compaction_lab.core.tokens import TOKENIZERS
    from compaction_lab.engine import SCHEDULER_ENV

    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="where the work runs: auto (default: this process for small inputs, else a local Dask cluster), "
        f"sync, local, or a Dask scheduler such as tcp://HOST:8786 (also ${SCHEDULER_ENV})",
    )
    if tokenizer:
        parser.add_argument(
            "--tokenizer",
            choices=TOKENIZERS,
            help="token counter: auto (default: bpe-openai when it passes its check against tiktoken), "
            "tiktoken, bpe-openai; same ids either way",
        )


def __getattr__(name: str) -> Any:
    """``cli.report``: the runner, imported when first asked for (PEP 562).

    The commands import what they use when they run, so that starting the
    CLI -- and every Dask worker process it spawns, which imports the main
    module again -- does not pay for papermill, nbconvert and pandas.
    """
    if name == "report":
        from compaction_lab.run import runner as run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        # Ctrl-C in any command (an import, a tally) is the user's choice, not a crash: one line, no
        # traceback. `run` handles its own signals and records the run as interrupted.
        print(f"\ninterrupted: compaction-lab {args.command} stopped by Ctrl-C", file=sys.stderr)
        return 130
    except Exception as exc:
        # A scheduler that cannot be used is a setting to fix, not a crash, in whichever command reaches
        # the engine (`engine.open_engine` says what was found where): one line, as the commands say it.
        from compaction_lab.engine import EngineError

        if not isinstance(exc, EngineError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
