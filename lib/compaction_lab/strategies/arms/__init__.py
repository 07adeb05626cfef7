"""The strategies: one module per agent's compaction rule or baseline, each registering itself in `STRATEGIES`.

Only strategies live here (discovery imports every module of this package); the shared machinery they
use is beside it in `compaction_lab.strategies`. Each strategy's rules, with their upstream citations,
are in docs/strategies.md.
"""
