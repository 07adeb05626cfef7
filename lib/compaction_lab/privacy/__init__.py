"""Redaction: the secret and personal-data patterns, masking, and the run-folder sweep."""
