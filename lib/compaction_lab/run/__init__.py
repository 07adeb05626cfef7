"""Running the chain: profiles, one run, sweeps, a run's lifecycle, notebooks by hand, dry runs, the check.

Profiles and their parameters (`params`), one run (`runner`), sweeps (`sweep`), a run's lifecycle
(`lifecycle`), notebooks opened by hand (`interactive`), the dry-run plan (`plan`) and the environment
check (`doctor`).

This package sits above `compaction_lab.report`: it executes the notebooks and asks the report to render.
Import the modules themselves (``from compaction_lab.run import runner``).
"""
