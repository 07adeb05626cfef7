"""Seeded generator of realistic coding-agent sessions with planted facts.

`generate_chains` (and `generate_chain`) turn a `SyntheticSpec` into sessions on
a small made-up project, each grown by task arcs until its report tokens reach
the spec's window, with planted facts (values that occur exactly once, with
known provenance) and decoys. Output is a pure function of the spec
(byte-identical, checked against `DEFAULT_MANIFEST_PATH`).

This module is the public API only; the internals are one concept per
``_``-prefixed module.

Design (what a chain holds, determinism, the internal modules):
docs/session-formats.md#synthetic-chains
"""

from __future__ import annotations

# `_verify_chain` is private but re-exported: the tests call it to prove the guarantee checks fire.
from compaction_lab.ingest.synthetic._generate import _verify_chain as _verify_chain
from compaction_lab.ingest.synthetic._generate import generate_chain, generate_chains
from compaction_lab.ingest.synthetic._manifest import (
    DEFAULT_MANIFEST_PATH,
    build_manifest,
    chain_digest,
    chains_summary,
    read_chains,
    read_manifest,
    regenerate_default_manifest,
    write_chains,
    write_manifest,
)
from compaction_lab.ingest.synthetic._types import (
    CATEGORIES,
    CATEGORY_WEIGHTS,
    GENERATOR_VERSION,
    PlantedFact,
    SyntheticChain,
    SyntheticSpec,
)

__all__ = [
    "CATEGORIES",
    "CATEGORY_WEIGHTS",
    "DEFAULT_MANIFEST_PATH",
    "GENERATOR_VERSION",
    "PlantedFact",
    "SyntheticChain",
    "SyntheticSpec",
    "build_manifest",
    "chain_digest",
    "chains_summary",
    "generate_chain",
    "generate_chains",
    "read_manifest",
    "regenerate_default_manifest",
    "read_chains",
    "write_chains",
    "write_manifest",
]
