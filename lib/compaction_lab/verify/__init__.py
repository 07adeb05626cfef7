"""Faithfulness: rebuild every request the suite would send and check it against the documented shapes.

`requests` is ``compaction-lab verify``; `capture` records a call shape from what an agent really sent.
See docs/strategies.md.
"""
