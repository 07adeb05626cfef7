"""The core types and facts every stage shares.

Records and sessions, projections and summary requests, the report tokenizer, the per-record excerpt cap,
the suite's paths, the run folder's layout (`runfolder`), the error of a profile that cannot run
(`errors.ProfileError`) and the one registry pattern every extension uses (`registry`).
"""
