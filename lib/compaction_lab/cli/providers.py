"""Model endpoints: ``providers``.

``compaction-lab providers``
    List the providers (``run --provider NAME`` / ``--set model=NAME``):
    base URL, model, key variable (never a key), price table, cache rule.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from compaction_lab.cli._common import COMMANDS

if TYPE_CHECKING:
    from compaction_lab.cli._common import Subparsers


def _cmd_providers(args: argparse.Namespace) -> int:
    from compaction_lab.endpoints import providers
    from compaction_lab.privacy.secrets import mask_url

    names = providers.list_providers()
    if not names:
        print("no providers found", file=sys.stderr)
        return 1
    for name in names:
        try:
            p = providers.load_provider(name)
        except ValueError as exc:
            print(f"{name:<10} (invalid: {exc})")
            continue
        key = p.model.get("api_key_env") or "none"  # the variable's NAME; its value is never read here
        print(
            f"{name:<10} {mask_url(str(p.model.get('base_url')))}  model={p.model.get('model')}  key={key}  "
            f"price_table={p.price_table or 'none'}  cache_rule={p.cache_rule or 'none'}"
        )
    return 0


@COMMANDS.register("providers", rank=20)
def add_commands(sub: Subparsers) -> None:
    """Add ``providers`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The top-level parser's subcommands.
    """
    pv = sub.add_parser("providers", help="list the providers (--provider NAME, --set model=NAME)")
    pv.set_defaults(func=_cmd_providers)
