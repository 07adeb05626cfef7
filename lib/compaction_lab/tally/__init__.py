"""Counting what fills the window: the workers' tasks (`tasks`) and the composition tables (`composition`).

`tasks` imports no pandas, so a Dask worker starts light. See docs/architecture.md.
"""
