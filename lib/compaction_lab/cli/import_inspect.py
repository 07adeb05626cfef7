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
    from compaction_lab.run import runner

    try:  # every log and folder checked before a table is written: a refused import writes nothing
        written = logs.import_logs(args.logs, args.run, check_run=runner.report_inputs)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for folder, done in written.items():
        for note in done.notes:
            print(note, file=sys.stderr)
        print(f"{folder / (logs.TABLE + '.parquet')}: {done.rows} rows", file=sys.stderr)
        for line in logs.summary_lines(folder):
            print(f"  {line}", file=sys.stderr)
        # Figure 12 and the report's Inspect block, with the imported model beside the suite's readers.
        try:
            report = runner.refresh_report(folder)
        except (ValueError, OSError) as exc:
            print(
                f"error: {folder}: the answers were imported, but the report was not refreshed: {exc}", file=sys.stderr
            )
            return 2
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
