"""``compaction-lab`` command line: one module per command group, each calling what the notebooks call.

======================  ==========================================================================
module                  commands
======================  ==========================================================================
``cli/run.py``          ``run`` (a profile's notebook chain, sweeps, ``--resume``), ``runs``,
                        ``profiles``
``cli/providers.py``    ``providers`` (the providers)
``cli/sessions.py``     ``import`` (into the archive of originals), ``history search`` /
                        ``history get``, ``tally``
``cli/compaction.py``   ``project`` (force a compaction), ``checkpoints list`` / ``release``
``cli/exam.py``         ``exam`` (the closed-book exam without notebooks)
``cli/shapes.py``       ``verify`` (every request checked against the lock), ``capture-shape``
``cli/doctor.py``       ``doctor`` (the environment, the endpoint and the dry run before a run spends)
======================  ==========================================================================

Each module documents its commands and registers the function that adds them (``@COMMANDS.register``,
the one registry pattern, `compaction_lab.core.registry`); its ``rank`` is where they appear in
``compaction-lab --help``. A new command group is a new module here and nothing else.

The commands import what they use when they run, so that starting the CLI -- and every Dask worker
process it spawns, which imports the main module again -- does not pay for papermill, nbconvert and pandas.
"""

from __future__ import annotations

import argparse
import sys

from compaction_lab import __version__
from compaction_lab.cli._common import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    """Build the ``compaction-lab`` parser: every registered command group's commands, by rank.

    Returns
    -------
    argparse.ArgumentParser
        Each command's parser has ``func`` as a default: the handler, given the parsed arguments, returns
        the exit code.
    """
    parser = argparse.ArgumentParser(
        prog="compaction-lab",
        description="Measure what LLM-agent context compaction keeps, costs and loses.",
    )
    parser.add_argument("--version", action="version", version=f"compaction-lab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for entry in COMMANDS.entries():
        entry.obj(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``compaction-lab`` with `argv` (default: the process's arguments) and return its exit code.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name.

    Returns
    -------
    int
        The command's exit code; 130 after a Ctrl-C, 2 when the engine's scheduler cannot be used.
    """
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
        from compaction_lab.engine.scheduler import EngineError

        if not isinstance(exc, EngineError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


__all__ = ["COMMANDS", "build_parser", "main"]
