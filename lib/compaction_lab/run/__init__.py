"""Running the chain: the chain itself, profiles, one run, sweeps, a run's lifecycle, dry runs, the check.

The chain, described once (`chain`: each notebook's inputs, outputs, figures and model calls, which
the modules below read), profiles and their parameters (`params`), one run (`runner`), sweeps
(`sweep`), a run's lifecycle (`lifecycle`), notebooks opened by hand (`interactive`), the dry-run plan
(`plan`) and the environment check (`doctor`).

This package sits above `compaction_lab.report`: it executes the notebooks and asks the report to render.
Import the modules themselves (``from compaction_lab.run import runner``).
"""
