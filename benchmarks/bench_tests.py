"""The test suite's own waits (run by `make bench`): the inner loop, the whole suite, the whole suite under load.

Targets (issue 50), on the machine the bench runs on (2 cores for the targets), from a set-up clone:

1. ``make test-fast`` (every test not marked ``slow``) in <= 3 min;
2. ``make test`` (lint, types, every test) in <= 10 min;
3. ``make test`` again with two busy-loop processes beside it (each a pure-Python ``while True``, one
   per core on 2 cores): it passes; its time is printed, with no target (a loaded machine is slower
   by however much the load takes; what must hold is that no test's outcome depends on it).

Each is a fresh ``make`` process, as a person types it; the clock includes set-up's checks (instant on a
set-up clone), lint and types. ``BENCH_TESTS_FULL=0`` measures only the first (the others take the
suite's time each). The machine's load average at the start is printed: other work lowers every rate.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from _common import Results, timed

#: The repository (its Makefile).
ROOT = Path(__file__).resolve().parents[1]
FAST_TARGET_S = 180
FULL_TARGET_S = 600
#: Busy loops beside the loaded suite.
BUSY_LOOPS = 2


def make(target: str) -> tuple[float, int, str]:
    """Seconds, exit status and output tail of ``make TARGET`` in the repository."""
    with timed() as t:
        r = subprocess.run(
            ["make", "--no-print-directory", target], cwd=ROOT, capture_output=True, text=True, timeout=4 * 3600
        )
    return t["seconds"], r.returncode, (r.stdout + r.stderr)[-3000:]


def main() -> int:
    res = Results("tests")
    print(f"  load average at the start: {os.getloadavg()[0]:.2f}", flush=True)
    seconds, code, tail = make("test-fast")
    if code:
        print(tail, file=sys.stderr)
    res.add("make test-fast", seconds, "s", f"<= {FAST_TARGET_S} s, passing", code == 0 and seconds <= FAST_TARGET_S)
    if os.environ.get("BENCH_TESTS_FULL", "1") == "0":
        return res.finish()
    seconds, code, tail = make("test")
    if code:
        print(tail, file=sys.stderr)
    res.add(
        "make test", seconds, "s", f"<= {FULL_TARGET_S / 60:g} min, passing", code == 0 and seconds <= FULL_TARGET_S
    )
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BUSY_LOOPS)]
    try:
        time.sleep(1)  # the loops are running before the suite starts
        seconds, code, tail = make("test")
    finally:
        for p in loops:
            p.kill()
            p.wait()
    if code:
        print(tail, file=sys.stderr)
    res.add(f"make test beside {BUSY_LOOPS} busy loops", seconds, "s", "passing (no time target)", code == 0)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
