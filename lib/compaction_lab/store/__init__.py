"""SQLite stores beside the flow: compaction checkpoints and the archive of originals (FTS5)."""
