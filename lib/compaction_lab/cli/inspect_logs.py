"""``compaction-lab import-inspect``: Inspect AI eval logs of the suite's tasks read back into their run folders."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from compaction_lab.cli._common import COMMANDS

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers


def _cmd_import_inspect(args: argparse.Namespace) -> int:
    from compaction_lab.inspect import logs  # here: Inspect AI is imported only by this command

    try:
        written = logs.import_logs(args.logs, args.run)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from compaction_lab.run import runner

    for folder, n in written.items():
        print(f"{folder / (logs.TABLE + '.parquet')}: {n} rows", file=sys.stderr)
        for line in logs.summary_lines(folder):
            print(f"  {line}", file=sys.stderr)
        # Figure 12 and the report's Inspect block, with the imported model beside the suite's readers.
        report = runner.refresh_report(folder)
        if report is not None:
            print(f"report: {report} (figure 12 and the Inspect block)", file=sys.stderr)
        print(folder)
    return 0


@COMMANDS.register("import-inspect", rank=55)
def add_commands(sub: Subparsers) -> None:
    """Add ``import-inspect`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
    p = sub.add_parser(
        "import-inspect",
        help="read Inspect eval logs of compaction_lab's tasks into their run folders (exam_inspect.parquet)",
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="Inspect log files (.eval or .json)")
    p.add_argument("--run", help="the run folder to write into (default: the one each log's task was built from)")
    p.set_defaults(func=_cmd_import_inspect)
