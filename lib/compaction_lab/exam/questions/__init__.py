"""The exam's questions: the synthetic bank, questions mined from own sessions (`probes`), cases and cuts.

See docs/exams.md.
"""
