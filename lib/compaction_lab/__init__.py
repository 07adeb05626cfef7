"""compaction-lab: measure what LLM-agent context compaction keeps, costs and loses."""

__version__ = "0.1.0"
