"""The exam's statistics: recall with its intervals, paired tests, draws and power.

See docs/exams.md.
"""
