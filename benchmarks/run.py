"""Run every ``bench_*.py`` script in this folder, each in its own process (`make bench`).

Each script prints its table and exits non-zero when a target is missed;
this runner reports which did and exits non-zero if any did.
Pass script names to run only those: ``python benchmarks/run.py bench_pipeline``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if s.stem in argv]
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
