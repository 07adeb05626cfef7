"""Before a run spends: ``doctor``.

``compaction-lab doctor [--profile P] [--set K=V ...] [--provider NAME] [--spend] [--no-plan | --dry-run]``
    Check the environment and the profile's endpoint before a run spends
    (key variable named, never printed; ``--spend``: one 1-token request),
    and plan the calls a run would make and their cost: an estimate from
    counts by default (seconds), or with ``--dry-run`` the notebooks run
    against a stand-in endpoint (exact; minutes). Nothing is sent either way.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from compaction_lab.cli._common import COMMANDS, profile_overrides

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers


def _cmd_doctor(args: argparse.Namespace) -> int:
    from compaction_lab.run import doctor, runner

    if args.dry_run and args.no_plan:
        print("error: --dry-run plans the calls; --no-plan skips planning: give one of them", file=sys.stderr)
        return 2
    if args.dry_run and not args.profile:
        print("error: --dry-run plans a profile's calls: give --profile", file=sys.stderr)
        return 2
    overrides: dict[str, Any] = {}
    if args.profile and (args.set or args.provider):
        try:
            overrides = profile_overrides(runner.load_profile(args.profile), args.set, args.provider)
        except runner.ProfileError as exc:
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
        dry_run=args.dry_run,
    )


@COMMANDS.register("doctor", rank=70)
def add_commands(sub: Subparsers) -> None:
    """Add ``doctor`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
    dr = sub.add_parser("doctor", help="check the environment and a profile's endpoint before anything is spent")
    dr.add_argument("--profile", help="profile name or YAML path whose model endpoint is checked")
    dr.add_argument("--spend", action="store_true", help="also send one chat request with max_tokens=1")
    dr.add_argument("--json", action="store_true", help="the checks as JSON")
    dr.add_argument("--set", action="append", metavar="KEY=VALUE", help="a parameter the run would be given")
    dr.add_argument("--provider", metavar="NAME", help="the provider the run would be given")
    dr.add_argument(
        "--no-plan",
        action="store_true",
        help="skip planning the model calls a run would make (and their cost)",
    )
    dr.add_argument(
        "--dry-run",
        action="store_true",
        help="plan the calls exactly by running the notebooks against a stand-in endpoint (minutes; "
        "default: an estimate from counts, seconds)",
    )
    dr.set_defaults(func=_cmd_doctor)
