"""compaction-lab: measure what LLM-agent context compaction keeps, costs and loses.

The package's top level is the data flow, one room per stage:

``core/``        records and sessions, projections, the report tokenizer, paths
``ingest/``      agent logs and synthetic chains -> sessions (``sources``: a run's sessions)
``composition``  what fills the window, where follow-ups point
``strategies/``  what each compaction keeps (one module per arm; labels, anatomy tables)
``summarize/``   who writes summaries (none, the extractive stand-in, a model)
``exam/``        questions, readers, grading, the closed- and open-book exams, statistics
``cost/``        prices, prefix-cache simulators, the cost model
``report/``      run folders, figures, the shared report, profile runs and their parameters

Beside the flow: ``endpoints/`` (model endpoints, usage, the call ledger), ``store/`` (SQLite
checkpoints and the archive of originals), ``privacy/`` (redaction), and the command-line tools
(``cli``, ``capture``, ``verify``).

Modules that lived at the top level before this layout stay importable under their old names
(``from compaction_lab import charts`` is ``compaction_lab.report.charts``), so notebooks written
against earlier versions keep working; new code imports them from their room.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Earlier top-level module names -> their home now.
MOVED: dict[str, str] = {
    "session": "compaction_lab.core.session",
    "projection": "compaction_lab.core.projection",
    "tokens": "compaction_lab.core.tokens",
    "excerpt": "compaction_lab.core.excerpt",
    "paths": "compaction_lab.core.paths",
    "sources": "compaction_lab.ingest.sources",
    "anatomy": "compaction_lab.strategies.anatomy",
    "runfolder": "compaction_lab.core.runfolder",
    "charts": "compaction_lab.report.charts",
    "share": "compaction_lab.report.share",
    "lifecycle": "compaction_lab.run.lifecycle",
    "params": "compaction_lab.run.params",
    "explorer": "compaction_lab.report.explorer",
    "ledger": "compaction_lab.endpoints.ledger",
    "providers": "compaction_lab.endpoints",
    "plan": "compaction_lab.run.plan",
    "doctor": "compaction_lab.run.doctor",
    "checkpoints": "compaction_lab.store.checkpoints",
    "archive": "compaction_lab.store.archive",
    "redact": "compaction_lab.privacy.redactor",
}


def __getattr__(name: str) -> Any:
    """``from compaction_lab import <earlier module name>``: the module from its home now (PEP 562)."""
    target = MOVED.get(name)
    if target is None:
        raise AttributeError(f"module 'compaction_lab' has no attribute {name!r}")
    return importlib.import_module(target)
