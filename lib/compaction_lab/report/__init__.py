"""What people see: figures, the shared report's pieces, pages, the sweep page and table, the explorer.

Figures (`figures`: one module per notebook, each figure registered where it is drawn, and `draw`; the
theme and `save_chart` in `theme`; `charts`, the notebooks' one import for both), the shared report's
pieces (`share`), the run folder's pages (`render`), the sweep page and table, and the notebook explorer. This package only renders: running a profile lives in
`compaction_lab.run`, the run folder's layout in `compaction_lab.core.runfolder`.

Import the modules themselves (``from compaction_lab.report import charts``): a notebook kernel that only
draws never imports the runner.
"""
