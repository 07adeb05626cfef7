"""Running profiles: ``run``, ``runs``, ``profiles``.

``compaction-lab run --profile NAME [--set K=V ...] [--sweep K=V1,V2 ...] [--redact|--no-redact]``
    Execute the profile's notebook chain into a new run folder and print the
    folder's path as the last line (scripts read it). Exits 1 with the
    failing cell's error when a notebook fails, 2 on a bad profile or a scheduler it cannot
    reach (checked before the run folder is made). With
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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compaction_lab.cli._common import COMMANDS, engine_arguments, profile_overrides

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers


def _cmd_run(args: argparse.Namespace) -> int:
    """``run``: SIGINT / SIGTERM end it with one line naming the run folder and 130 / 143, never a traceback.

    The run's kernels start first (`kernel.launched`, before this command imports papermill, pandas or
    the profile's checks), so they boot and import while the rest gets ready; a sweep or a resumed sweep in
    this process runs every run in them in turn, one on an engine takes none, and whatever no run took is
    shut down when the command ends.
    """
    from compaction_lab.run import lifecycle

    # Guarded from the first moment, so even a Ctrl-C while the profile loads ends cleanly.
    with lifecycle.stop_on_signals():
        try:
            with _launched(args) as launch:
                return _run_command(args, launch)
        except lifecycle.RunInterrupted as exc:
            print(("" if args.quiet else "\n") + str(exc), file=sys.stderr)  # the newline ends a progress bar
            return exc.exit_code


def _launched(args: argparse.Namespace) -> Any:
    """`kernel.launched` for a run's kernels (``--kernels``, else the default): one run's, or a sweep's runs' in turn.

    No kernel for a sweep or a resume sent to an engine (``--scheduler local`` or an address): its runs
    execute in the engine's workers, so no kernel here would serve one.
    """
    from compaction_lab.core import paths
    from compaction_lab.engine.scheduler import AUTO, SYNC
    from compaction_lab.run import chain, kernel

    count = kernel.default_kernels() if args.kernels is None or args.resume or args.sweep else args.kernels
    if (args.sweep or args.resume) and args.scheduler not in (None, AUTO, SYNC):
        count = 0
    notebooks = chain.names()
    return kernel.launched(min(count, len(notebooks)), [paths.notebook_path(nb) for nb in notebooks])


def _sweep_summary(sw: Any) -> int:
    """Print a sweep's runs and where its comparison is (the sweep folder last, on stdout); 1 if a run is not ok.

    Each run's values are printed masked as the sweep shows them (URL credentials in every form).
    """
    from compaction_lab.privacy.secrets import shown_with_credentials
    from compaction_lab.run import sweep

    failed = [st for _, _, st in sw.runs if st not in ("ok", sweep.COMPLETED_EARLIER)]
    for combo, res, st in sw.runs:
        print(f"  {shown_with_credentials(combo)}: {res.run_dir if res else st}", file=sys.stderr)
    print(f"comparison: {sw.report}", file=sys.stderr)
    print(sw.folder)
    return 1 if failed else 0


def _resume_command(args: argparse.Namespace, launch: Any = None) -> int:
    """``run --resume SWEEP_DIR``: the plan in the folder says what to run; only where and how loudly are taken."""
    from compaction_lab.engine.scheduler import EngineError
    from compaction_lab.run import runner, sweep

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
            ("--no-html", args.no_html),
            ("--kernels", args.kernels),
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
        sw = sweep.resume_sweep(args.resume, progress=not args.quiet, scheduler=args.scheduler, launch=launch)
    except (runner.ProfileError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"ran {len(sw.executed)} of {len(sw.runs)} planned runs", file=sys.stderr)
    return _sweep_summary(sw)


def _run_command(args: argparse.Namespace, launch: Any = None) -> int:
    from compaction_lab.engine.scheduler import EngineError
    from compaction_lab.run import runner

    if args.resume:
        return _resume_command(args, launch)
    try:
        prof = runner.load_profile(args.profile or "default")
        overrides = profile_overrides(prof, args.set, args.provider)
        sweeps = {} if args.no_sweep else dict(prof.sweeps)
        if args.sweep:
            # Only a sweep imports the sweep's module (pandas, the report): one run's kernels start meanwhile.
            from compaction_lab.run import sweep

            sweeps.update(sweep.parse_sweep(a) for a in args.sweep)
    except runner.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    results = Path(args.results) if args.results else None
    if args.tokenizer:
        overrides["tokenizer"] = args.tokenizer
    if sweeps:
        from compaction_lab.run import sweep

        if args.name:
            print("error: --name names one run; a sweep names its runs after the swept values", file=sys.stderr)
            return 2
        if args.kernels is not None:
            print(
                "error: --kernels is for one run; a sweep's runs take the default (one kernel each on an engine)",
                file=sys.stderr,
            )
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
                notebook_html=not args.no_html,
                launch=launch,
            )
        except (runner.ProfileError, EngineError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _sweep_summary(sw)
    if args.scheduler:
        overrides["scheduler"] = args.scheduler  # one run: where its notebooks' heavy work runs
    try:
        _reach_run_scheduler(prof, overrides)
        result = runner.run_profile(
            prof,
            results=results,
            run_name=args.name,
            progress=not args.quiet,
            overrides=overrides,
            redact=args.redact,
            allow_unknown=args.allow_unknown,
            notebook_html=not args.no_html,
            kernels=args.kernels,
            launch=launch,
        )
    except (runner.ProfileError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except runner.NotebookFailed as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        print(exc.traceback, file=sys.stderr)
        print(f"partial run folder (executed notebook and run.json kept): {exc.run_dir}", file=sys.stderr)
        return 1
    for nb in result.notebooks:
        html = f" (+ {nb.html_seconds:.1f} s HTML)" if nb.html_seconds is not None else ""
        print(f"  {nb.notebook}: {nb.seconds:.1f} s{html}", file=sys.stderr)
    if result.report:
        print(f"report: {result.report}", file=sys.stderr)
    print(result.run_dir)
    return 0


def _reach_run_scheduler(prof: Any, overrides: dict[str, Any]) -> None:
    """Reach the scheduler one run's notebooks will use, before its run folder is made (`engine.reach_scheduler`).

    The kernels take the run's ``scheduler`` parameter (``--scheduler``, ``--set``, the profile), else
    ``COMPACTION_LAB_SCHEDULER`` (`runner.KERNEL_ENVIRONMENT`). An address that answers with no Dask
    scheduler, or an environment value that names none, is an `EngineError` (exit 2, nothing written);
    a parameter that is neither an address nor a scheduler name is left to the parameter checks.
    """
    from compaction_lab.engine import scheduler as engine

    value = {**prof.parameters, **overrides}.get("scheduler")
    if isinstance(value, str) and value:
        setting = value.strip()
    else:
        setting = engine.scheduler_setting()  # the environment's, as the kernels will read it
    if engine.is_address(setting) and "://" in setting:
        engine.reach_scheduler(setting)


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
    from compaction_lab.run import params, runner

    names = runner.list_profiles()
    if not names:
        print("no profiles found", file=sys.stderr)
        return 1
    for name in names:
        try:
            p = params.checked(runner.load_profile(name))  # a profile that could not run is listed as invalid
            desc = p.description.splitlines()[0] if p.description else ""
            swept = ""
            if p.sweeps:
                n = 1
                for values in p.sweeps.values():
                    n *= len(values)
                swept = f"  sweeps {', '.join(f'{k}×{len(v)}' for k, v in p.sweeps.items())} ({n} runs)"
            print(f"{name:<14} {desc}  [{', '.join(p.notebooks)}]{swept}")
        except runner.ProfileError as exc:
            print(f"{name:<14} (invalid: {exc})")
    return 0


@COMMANDS.register("run", rank=10)
def add_commands(sub: Subparsers) -> None:
    """Add ``run``, ``runs`` and ``profiles`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
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
        help="provider (data/providers/NAME.yaml): --set model=NAME plus its cache rule and price table",
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
        "--no-html",
        action="store_true",
        help="render no notebook HTML (batch reruns; report.html is still written and links the notebooks)",
    )
    run.add_argument(
        "--kernels",
        type=int,
        metavar="N",
        help="kernels one run's notebooks execute in: a notebook starts once those it reads have finished "
        "(default: one per core, at most 2; 1: one after the other)",
    )
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
    engine_arguments(run)
    run.set_defaults(func=_cmd_run)

    runs = sub.add_parser(
        "runs", help="list run folders: status (ok/failed/interrupted/dead/running), profile, wall time"
    )
    runs.add_argument("--results", help="folder holding the run folders (default: data/results)")
    runs.add_argument("--json", action="store_true", help="the listing as JSON (for scripts)")
    runs.set_defaults(func=_cmd_runs)

    prof = sub.add_parser("profiles", help="list the run profiles")
    prof.set_defaults(func=_cmd_profiles)
