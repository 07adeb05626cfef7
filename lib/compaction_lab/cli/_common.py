"""What the command groups share: their registry, the engine's arguments, a profile's overrides.

A private module (its name starts with ``_``): the registry's discovery does not take it for a command
group, and only the modules of this package import it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from compaction_lab.core.registry import Registry

if TYPE_CHECKING:
    #: The object ``ArgumentParser.add_subparsers`` returns: a group adds its commands to it.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

#: The command groups, one module of this package each: a group registers the function that adds its
#: commands (``@COMMANDS.register("run", rank=10)``). ``rank`` is where its commands appear in
#: ``compaction-lab --help``.
COMMANDS: Registry[Callable[[Subparsers], None]] = Registry("command group", packages=("compaction_lab.cli",))


def engine_arguments(parser: argparse.ArgumentParser, tokenizer: bool = True) -> None:
    """Add ``--scheduler`` (and ``--tokenizer``) to a command whose work runs on the engine.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    tokenizer : bool
        Also add ``--tokenizer`` (the commands that count tokens).
    """
    from compaction_lab.core.tokens import TOKENIZERS
    from compaction_lab.engine.scheduler import SCHEDULER_ENV

    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="where the work runs: auto (default: this process for small inputs, else worker processes "
        "forked from this one for a tally, a local Dask cluster for an import), "
        f"sync, pool, local, or a Dask scheduler such as tcp://HOST:8786 (also ${SCHEDULER_ENV})",
    )
    if tokenizer:
        parser.add_argument(
            "--tokenizer",
            choices=TOKENIZERS,
            help="token counter: auto (default: bpe-openai when it passes its check against tiktoken), "
            "tiktoken, bpe-openai; same ids either way",
        )


def profile_overrides(prof: Any, assignments: list[str] | None, provider: str | None) -> dict[str, Any]:
    """Return ``--set K=V`` and ``--provider NAME`` as chain-wide overrides.

    The provider gives the model, its cache rule and price table; ``--set`` wins over it.

    Parameters
    ----------
    prof : Profile
        The profile the overrides apply to (its notebooks say which provider keys it declares).
    assignments : list of str or None
        The ``--set`` values.
    provider : str or None
        The ``--provider`` name.

    Returns
    -------
    dict
        Parameter name -> value.

    Raises
    ------
    ProfileError
        For a malformed assignment or an unknown provider.
    """
    from compaction_lab.run import runner

    overrides = dict(runner.parse_assignment(a) for a in assignments or [])
    if provider:
        from compaction_lab.endpoints import providers
        from compaction_lab.run import params

        declared = {k for nb in prof.notebooks for k in params.declared_parameters(nb)}
        overrides = {**providers.provider_overrides(provider, declared), **overrides}
    return overrides
