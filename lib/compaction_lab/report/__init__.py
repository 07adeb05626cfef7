"""What people see: run folders, figures, the shared report, profile runs (papermill), their parameters and
lifecycle, and the notebook explorer."""

from typing import Any


def __getattr__(name: str) -> Any:
    """``compaction_lab.report.run_profile`` and the rest of `report.run`'s names, as before the move."""
    import importlib

    run = importlib.import_module("compaction_lab.report.run")
    if name.startswith("_") or not hasattr(run, name):
        raise AttributeError(f"module 'compaction_lab.report' has no attribute {name!r}")
    return getattr(run, name)
