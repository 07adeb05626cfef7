"""The importers: one module per agent log format, each registering itself in `IMPORTERS`.

Only importers live here (discovery imports every module of this package); what they share (the
session builder, file reading, the import audit) is beside it in `compaction_lab.ingest`.
See docs/session-formats.md for the formats.
"""
