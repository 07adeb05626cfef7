"""The core types and facts every stage shares.

Records and sessions, projections and summary requests, the report tokenizer, the per-record excerpt cap,
and the suite's paths.
"""
