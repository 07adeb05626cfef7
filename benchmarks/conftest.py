"""Benchmarks run with `make bench` (pytest-benchmark); they are not part of `make test`."""
