"""Importers: source files (and the synthetic generator) -> `Session` objects."""
