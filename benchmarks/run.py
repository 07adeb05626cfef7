"""Run every ``bench_*.py`` script in this folder, each in its own process (`make bench`).

Each script prints its table and exits non-zero when a target is missed;
this runner reports which did and exits non-zero if any did.
Pass names to run only those, with or without the ``bench_`` prefix:
``python benchmarks/run.py pipeline`` or ``make bench BENCH=large_record``
(``bench_large_record.py``: a 50 MB single-line record through the
my_sessions chain, issue #12).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        known = {s.stem.removeprefix("bench_"): s for s in scripts}
        wanted = [a.removeprefix("bench_").removesuffix(".py") for a in argv]
        unknown = [a for a in wanted if a not in known]
        if unknown:  # a typo must not pass as "all 0 benchmarks met their targets"
            print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}", file=sys.stderr)
            return 2
        scripts = [known[a] for a in dict.fromkeys(wanted)]
    failed = []
    for script in scripts:
        print(f"\n>>> {script.stem}", flush=True)
        if subprocess.run([sys.executable, str(script)], cwd=HERE).returncode != 0:
            failed.append(script.stem)
    if failed:
        print(f"\ntargets missed in: {', '.join(failed)}")
        return 1
    print(f"\nall {len(scripts)} benchmarks met their targets")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
