"""What people see: run folders, figures, the shared report, profile runs (papermill), their parameters and
lifecycle, and the notebook explorer."""

from typing import Any


def __getattr__(name: str) -> Any:
    """``compaction_lab.report.run_profile`` and the rest of `report.run`'s names, as before the move.

    ``from compaction_lab.report import charts`` asks this first: a submodule is imported as itself,
    without `report.run` (papermill, nbconvert: a second per notebook kernel that only draws).
    """
    import importlib
    import importlib.util

    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    run = importlib.import_module("compaction_lab.report.run")
    if name.startswith("_") or not hasattr(run, name):
        raise AttributeError(f"module 'compaction_lab.report' has no attribute {name!r}")
    return getattr(run, name)
