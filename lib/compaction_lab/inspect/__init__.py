"""The suite's exams as Inspect AI tasks (https://inspect.aisi.org.uk): any model provider, epochs, a log viewer.

Registered through the ``inspect_ai`` entry point (pyproject.toml), so from any folder::

    inspect eval compaction_lab/closed_book -T run=RUN_FOLDER --model PROVIDER/MODEL --epochs 3
    inspect eval compaction_lab/open_book -T run=RUN_FOLDER -T round=3 --model PROVIDER/MODEL
    inspect eval compaction_lab/continuation -T run=RUN_FOLDER --model PROVIDER/MODEL
    inspect view

`tasks` builds each task from a run folder: its saved bank and sessions, the parameters notebook 03
ran with, and every arm's projection, made again (the same projections: they are pure functions of
those). Nothing of the suite's own readers is involved; the model answering is Inspect's.
"""
