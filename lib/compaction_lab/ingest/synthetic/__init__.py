"""Seeded generator of realistic coding-agent sessions with planted facts.

A synthetic chain is one coding-agent session on a small made-up project
(a Python payments service, a TypeScript storefront, a data pipeline with SQL
migrations, a Rust CLI). It follows task arcs — explore, change, test, fix,
test, lint, report — so the same files and commands recur, failures are
fixed later, and config, schema and test targets appear among the others.
Tool outputs come from templates of real tool behaviour (pytest, vitest and
cargo runs, ruff/mypy/tsc/eslint/clippy, git, grep, ls, file reads of real
syntax, JSON API responses, logs) with a heavy-tailed size distribution.

While generating, the chain **plants facts** with known provenance (a user
constraint, an assistant decision or reported value, a line of script output,
an ID returned by an API, an error string). Each planted value is a random
token that occurs exactly once in its chain; decoys are values of the same
shapes that occur in no chain at all. A chain grows until the report-token
total of its records reaches the spec's window.

Everything is a pure function of the `SyntheticSpec`: each chain draws from its own
`random.Random` seeded from ``sha256(f"{seed}:{index}")``; there is no clock,
no uuid4, no global random state and no iteration over hash-ordered sets, so
the same spec gives byte-identical output (checked against the committed
manifest `DEFAULT_MANIFEST_PATH`).

This module is the public API only. The internals, one concept per module:

``_types``
    Public dataclasses and category constants.
``_random``
    Seeded value helpers and the fixed epoch.
``_project``
    Themes, areas, vocabulary and a chain's project.
``_files``
    Generated source, test, config and schema files.
``_world``
    The project's state: files, edits, git.
``_testruns``
    pytest / vitest / cargo test output.
``_tools``
    Linters, builds, HTTP/JSON, logs, tracebacks, scripts.
``_prose``
    User and assistant phrase tables.
``_planting``
    Fact templates, the planting schedule and ledger, decoys.
``_builder``
    The chain builder (task arcs, records, timestamps).
``_generate``
    `generate_chain` / `generate_chains` and the guarantee checks.
``_manifest``
    Digests, manifests, files on disk, the summary table.
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
