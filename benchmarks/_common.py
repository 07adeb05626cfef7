"""Shared helpers of the benchmark scripts: timing, peak memory, a results table."""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from compaction_lab.core import paths


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024 if sys.platform != "darwin" else kib / (1024 * 1024)


def own_peak_rss_mb() -> float:
    """Peak RSS of this process's own address space, in MiB (``VmHWM`` on Linux).

    Unlike `peak_rss_mb`, not inflated by the parent: Linux carries ``ru_maxrss``
    across fork/exec, so a child spawned by a 300 MiB parent reports >= 300 MiB
    there even if it never uses that much. Falls back to `peak_rss_mb` elsewhere.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mb()


@contextmanager
def timed() -> Iterator[dict]:
    """Context manager filling ``{"seconds": ...}`` when the block ends."""
    out: dict = {}
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        out["seconds"] = time.perf_counter() - t0


@dataclass
class Results:
    """Measured values with their targets; prints a table and writes JSON."""

    name: str
    rows: list[dict] = field(default_factory=list)

    def add(self, metric: str, value: float, unit: str, target: str = "", ok: bool | None = None) -> None:
        self.rows.append({"metric": metric, "value": round(value, 3), "unit": unit, "target": target, "ok": ok})

    def finish(self) -> int:
        width = max(len(r["metric"]) for r in self.rows)
        print(f"\n== {self.name} ==")
        for r in self.rows:
            mark = "" if r["ok"] is None else ("  ok" if r["ok"] else "  MISSED")
            print(f"{r['metric']:<{width}}  {r['value']:>12,.3f} {r['unit']:<8} {r['target']}{mark}")
        out = paths.results_dir() / "bench"
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.name}.json").write_text(json.dumps(self.rows, indent=2) + "\n")
        print(f"(written to {out / (self.name + '.json')})")
        return 0 if all(r["ok"] is not False for r in self.rows) else 1


def host_reference() -> float:
    """Seconds of a fixed pure-Python workload (best of 3): how fast this host runs right now.

    Reported beside the timings so runs on a shared machine whose speed drifts (the same code took 14 s
    and 30 s on this project's 2-core hosts on different days) can be compared; no target is judged on it.
    """
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        total = 0
        for i in range(3_000_000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return best


def repo_root() -> Path:
    return paths.REPO_ROOT
