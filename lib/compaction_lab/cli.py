"""``compaction-lab`` command line.

``compaction-lab run --profile NAME``
    Execute the profile's notebook chain into a new run folder and print the
    folder's path as the last line (scripts read it). Exits 1 with the
    failing cell's error when a notebook fails, 2 on a bad profile.
``compaction-lab profiles``
    List the profiles and what each is for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__, report


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        prof = report.load_profile(args.profile)
    except report.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = report.run_profile(
            prof,
            results=Path(args.results) if args.results else None,
            run_name=args.name,
            progress=not args.quiet,
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


def _cmd_profiles(args: argparse.Namespace) -> int:
    names = report.list_profiles()
    if not names:
        print("no profiles found", file=sys.stderr)
        return 1
    for name in names:
        try:
            p = report.load_profile(name)
            desc = p.description.splitlines()[0] if p.description else ""
            print(f"{name:<14} {desc}  [{', '.join(p.notebooks)}]")
        except report.ProfileError as exc:
            print(f"{name:<14} (invalid: {exc})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compaction-lab",
        description="Measure what LLM-agent context compaction keeps, costs and loses.",
    )
    parser.add_argument("--version", action="version", version=f"compaction-lab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a profile's notebook chain into a new run folder")
    run.add_argument("--profile", default="default", help="profile name or YAML path (default: default)")
    run.add_argument("--results", help="folder that receives the run folder (default: data/results)")
    run.add_argument("--name", help="run folder name (default: <profile>-<UTC timestamp>)")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(func=_cmd_run)

    prof = sub.add_parser("profiles", help="list the run profiles")
    prof.set_defaults(func=_cmd_profiles)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
