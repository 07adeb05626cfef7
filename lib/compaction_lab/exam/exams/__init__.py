"""The exams: one module per exam, each registering itself in `EXAMS` (`compaction_lab.exam.exam`).

Only exams live here (discovery imports every module of this package); their questions, readers,
statistics and the recorded actions they grade against are beside it in `compaction_lab.exam`.
See docs/exams.md.
"""
