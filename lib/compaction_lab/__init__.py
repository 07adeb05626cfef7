"""compaction-lab: measure what LLM-agent context compaction keeps, costs and loses.

The package's top level is the data flow, one room per stage, in `STAGES` order; a module imports only
from its own stage or an earlier one (``tests/test_imports.py`` checks it, lazy imports included):

``core/``         records and sessions, projections, the report tokenizer, paths, the run folder's layout,
                  the one registry pattern
``privacy/``      redaction and secret masking
``store/``        the ledger of model calls, checkpoints, the memo and the archive of originals
``engine/``       where heavy work runs (this process or a Dask cluster)
``endpoints/``    OpenAI-compatible model endpoints, providers, price tables, the dry run's stand-in
``ingest/``       agent logs and synthetic chains -> sessions (``sources``: a run's sessions)
``tally/``        token tallies and what fills the window (the workers' tasks, the composition tables)
``summarize/``    summarizers: who writes summaries (none, the extractive stand-in, a model)
``strategies/``   what each compaction keeps (``arms/``: one module per strategy; labels, anatomy tables)
``exam/``         the exams (``exams/``), their questions, readers, statistics and the agents' recorded actions
``cost/``         prefix-cache simulators, the cost model
``verify/``       the faithfulness check of the strategies' requests, and call shapes captured from agents
``inspect/``      the exams as Inspect AI tasks, and Inspect's logs read back into a run folder
``report/``       figures, the shared report, the run folder's pages (rendering only)
``run/``          profiles and parameters, running the chain and sweeps, the dry-run plan, doctor
``cli/``          the command line
"""

from __future__ import annotations

__version__ = "0.1.0"

#: The stages, earliest first: each package or top-level module of the library belongs to one, and imports
#: only from its own stage or an earlier one (the package root, which holds only this, is below them all).
STAGES: tuple[str, ...] = (
    "core",
    "privacy",
    "store",
    "engine",
    "endpoints",
    "ingest",
    "tally",
    "summarize",
    "strategies",
    "exam",
    "cost",
    "verify",
    "inspect",
    "report",
    "run",
    "cli",
)
