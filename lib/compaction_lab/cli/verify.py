"""Call shapes, the requests an arm sends: ``verify``, ``capture-shape``.

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
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from compaction_lab.cli._common import COMMANDS

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers


def _cmd_verify(args: argparse.Namespace) -> int:
    from compaction_lab.verify import requests as verify

    try:
        if args.update:
            lock = verify.update_lock(args.lock, args.shapes_dir)
            print(f"verify: lock written to {lock}")
        result = verify.verify(args.lock, args.shapes_dir)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(verify.report_text(result))
    return 0 if result.ok else 1


def _cmd_capture_shape(args: argparse.Namespace) -> int:
    from compaction_lab.verify import capture

    try:
        if args.from_request:
            call_shape = capture.shape_from_request_file(args.from_request, args.name)
            source = f"an OpenAI-style request body ({Path(args.from_request).name})"
        else:
            _text, field = capture.codex_instructions(args.from_codex)
            call_shape = capture.shape_from_codex_session(args.from_codex, args.name)
            source = (
                f"a Codex rollout's session_meta.{field} ({Path(args.from_codex).name}); "
                "Codex records no tool definitions"
            )
        path = capture.write_shape(
            call_shape,
            args.output,
            overwrite=args.force,
            description=f"Captured by compaction-lab capture-shape from {source}.",
        )
    except capture.CaptureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{path}")
    from compaction_lab.core.fingerprints import shape_fingerprint

    print(
        f"fingerprint {shape_fingerprint(call_shape.system_prompt, call_shape.tools)} ({len(call_shape.tools)} tools)"
    )
    print("run `compaction-lab verify --update` to pin it in the verify lock", file=sys.stderr)
    return 0


@COMMANDS.register("verify", rank=60)
def add_commands(sub: Subparsers) -> None:
    """Add ``verify`` and ``capture-shape`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
    ve = sub.add_parser("verify", help="check every request the exam and the strategies would send (no model)")
    ve.add_argument("--update", action="store_true", help="rewrite the lock after an intended change")
    ve.add_argument("--lock", help="lock file (default: data/shapes/verify.lock.json)")
    ve.add_argument("--shapes", dest="shapes_dir", help="folder of call-shape files (default: data/shapes)")
    ve.set_defaults(func=_cmd_verify)

    cs = sub.add_parser("capture-shape", help="record a call shape from a request body or a Codex rollout")
    src = cs.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-request", metavar="FILE", help="an OpenAI-style request body (JSON)")
    src.add_argument("--from-codex", metavar="FILE", help="a Codex rollout (its recorded instructions)")
    cs.add_argument("--name", required=True, help="call-shape name (file data/shapes/NAME.json)")
    cs.add_argument("--output", help="write here instead of data/shapes/NAME.json")
    cs.add_argument("--force", action="store_true", help="replace an existing call-shape file")
    cs.set_defaults(func=_cmd_capture_shape)
