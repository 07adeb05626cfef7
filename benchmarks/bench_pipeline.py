"""Speed and memory targets of the walking skeleton (run by `make bench`, not by pytest).

Targets:
- the default synthetic profile (6 chains x 128k tokens) generates in < 30 s;
- composition + follow-ups of those chains take < 15 s and < 1 GiB traced peak;
- cold token counting sustains > 1 MB of text per second;
- `compaction-lab run --profile smoke` finishes in < 60 s after set-up;
- `make run` (the default profile, 01 -> 06 with the report) wall time after
  set-up is measured and reported (target < 5 min on 2 cores).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

from _common import Results, timed

from compaction_lab import composition
from compaction_lab.core.tokens import TokenCounter
from compaction_lab.ingest import synthetic


def main() -> int:
    res = Results("pipeline")
    with timed() as t:
        chains = synthetic.generate_chains(synthetic.SyntheticSpec())
    res.add("generate default profile", t["seconds"], "s", "< 30 s", t["seconds"] < 30)

    sessions = [c.session for c in chains]
    tracemalloc.start()
    with timed() as t:
        composition.composition_table(sessions)
        composition.followups_table(sessions)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    res.add("composition + follow-ups", t["seconds"], "s", "< 15 s", t["seconds"] < 15)
    res.add("  traced peak memory", peak / 2**20, "MiB", "< 1024 MiB", peak < 2**30)

    texts = [r.text for s in sessions for r in s.records]
    nbytes = sum(len(x.encode()) for x in texts)
    with timed() as t:
        TokenCounter().count_many(texts)  # fresh counter: no cache hits
    rate = nbytes / t["seconds"] / 1e6
    res.add("cold token counting", rate, "MB/s", "> 1 MB/s", rate > 1)

    exe = Path(sys.executable).with_name("compaction-lab")
    with tempfile.TemporaryDirectory() as tmp, timed() as t:
        r = subprocess.run(
            [str(exe), "run", "--profile", "smoke", "--results", tmp, "--quiet"],
            capture_output=True,
            text=True,
            timeout=600,
        )
    if r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
    res.add("smoke profile end to end", t["seconds"], "s", "< 60 s", r.returncode == 0 and t["seconds"] < 60)

    # What `make run` costs once set-up is done: the same command the Makefile runs.
    with tempfile.TemporaryDirectory() as tmp, timed() as t:
        r = subprocess.run(
            [str(exe), "run", "--profile", "default", "--results", tmp, "--quiet"],
            capture_output=True,
            text=True,
            timeout=1800,
        )
    if r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
    res.add(
        "make run (default profile, the whole chain + report)",
        t["seconds"],
        "s",
        "< 300 s",
        r.returncode == 0 and t["seconds"] < 300,
    )
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
