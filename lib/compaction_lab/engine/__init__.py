"""Where the heavy, independent work runs: this process or a Dask cluster (`scheduler`).

See docs/cluster.md.
"""
