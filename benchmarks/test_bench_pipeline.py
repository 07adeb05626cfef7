"""Speed and memory targets of the walking skeleton.

Targets (checked here, not in unit tests):
- the default synthetic profile (6 chains x 128k tokens) generates in < 30 s;
- composition + follow-ups of those chains take < 15 s and < 1 GiB peak traced memory;
- token counting sustains > 1 MB of text per second;
- `compaction-lab run --profile smoke` finishes in < 60 s after set-up.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from compaction_lab import composition
from compaction_lab.ingest import synthetic
from compaction_lab.tokens import TokenCounter


@pytest.fixture(scope="module")
def default_chains():
    return synthetic.generate_chains(synthetic.SyntheticProfile())


def test_generate_default_profile(benchmark):
    chains = benchmark.pedantic(lambda: synthetic.generate_chains(synthetic.SyntheticProfile()), rounds=1, iterations=1)
    assert len(chains) == 6
    assert benchmark.stats.stats.max < 30


def test_composition_and_followups_on_default_chains(benchmark, default_chains):
    sessions = [c.session for c in default_chains]

    def study():
        return composition.composition_table(sessions), composition.followups_table(sessions)

    tracemalloc.start()
    benchmark.pedantic(study, rounds=1, iterations=1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert benchmark.stats.stats.max < 15
    assert peak < 1 << 30


def test_token_counting_throughput(benchmark, default_chains):
    texts = [r.text for c in default_chains for r in c.session.records]
    nbytes = sum(len(t.encode()) for t in texts)

    def count_cold():
        return TokenCounter().count_many(texts)  # a fresh counter: no cache hits

    benchmark.pedantic(count_cold, rounds=3, iterations=1)
    assert nbytes / benchmark.stats.stats.mean > 1_000_000


def test_smoke_profile_under_a_minute(benchmark, tmp_path):
    exe = Path(sys.executable).with_name("compaction-lab")

    def run():
        return subprocess.run([str(exe), "run", "--profile", "smoke", "--results", str(tmp_path), "--quiet"],
                              capture_output=True, text=True, timeout=300)

    r = benchmark.pedantic(run, rounds=1, iterations=1)
    assert r.returncode == 0, r.stderr[-2000:]
    assert benchmark.stats.stats.max < 60
