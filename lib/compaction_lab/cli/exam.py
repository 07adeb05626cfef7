"""The closed-book exam without notebooks: ``exam``.

``compaction-lab exam --profile P``
    The closed-book exam without notebooks: per-strategy recall with intervals.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from compaction_lab.cli._common import COMMANDS

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers


def _cmd_exam(args: argparse.Namespace) -> int:
    import dataclasses

    from compaction_lab.exam import exam, readers
    from compaction_lab.ingest import sources, synthetic
    from compaction_lab.run import params, runner

    try:
        # The profile's parameters are checked as for a run (keys only notebooks read do no harm here).
        from compaction_lab.endpoints import providers

        prof = runner.load_profile(args.profile)
        if args.provider:
            prof = prof.with_parameters(providers.provider_overrides(args.provider))
        prof = params.checked(providers.resolve_profile(prof), allow_unknown=True)
    except runner.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    closed = exam.get("closed")
    p = {**prof.parameters}
    # Notebook 03's parameters over the exam's defaults (`exam.ExamParams`: the one place they live).
    ep = closed.params(prof.parameters_for(exam.EXAMS.entry("closed").meta["notebook"]))
    if args.strategy:
        ep = dataclasses.replace(ep, strategy_names=tuple(args.strategy))
    bad = params.window_problems(ep.window, ep.output_ceiling, args.strategy or [])
    if bad:
        print("\n".join(f"error: {b}" for b in bad), file=sys.stderr)
        return 2
    try:
        src = sources.gather(p.get("session_paths"), synthetic.SyntheticSpec.from_mapping(p), progress=not args.json)
        run = closed.run(src, ep, progress=not args.json)  # sessions gathered in memory: nothing is written
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rc, result, recall = run.cases, run.result, run.tables["exam_recall"]
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
            f"[{r['ci_low']:.1%}, {r['ci_high']:.1%}]  {_parts(r)}{decoys}  {r['projection_tokens']:>10,.0f} tokens"
            + ("  NOT SENDABLE (> W - O)" if bool(r["over_window"]) else "")
        )
    return 0


def _parts(r: Any) -> str:
    """``scope k · summary k (by …)  ``: how many right answers each part holds (docs/exams.md §6a); "" unmeasured."""
    import pandas as pd

    if pd.isna(r.get("scope_retained")):
        return ""
    by = f" ({r['summary_by']})" if r.get("summary_by") else ""
    return f"scope {int(r['scope_retained'])} · summary {int(r['summary_retained'])}{by}  "


@COMMANDS.register("exam", rank=50)
def add_commands(sub: Subparsers) -> None:
    """Add ``exam`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
    ex = sub.add_parser("exam", help="run the closed-book exam of a profile without notebooks")
    ex.add_argument("--profile", default="default", help="profile name or YAML path (default: default)")
    ex.add_argument("--strategy", action="append", help="only these strategies (repeatable)")
    ex.add_argument("--json", action="store_true", help="the recall table as JSON records")
    ex.add_argument("--provider", metavar="NAME", help="provider (data/providers/NAME.yaml) for the model")
    ex.set_defaults(func=_cmd_exam)
