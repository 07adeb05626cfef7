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
    if not name.startswith("_"):
        # Sweeps lived in `report.run` before they had a module of their own.
        for module in ("compaction_lab.report.run", "compaction_lab.report.sweep"):
            found = importlib.import_module(module)
            if hasattr(found, name):
                return getattr(found, name)
    raise AttributeError(f"module 'compaction_lab.report' has no attribute {name!r}")
