"""One 50 MB single-line record through the whole my_sessions chain (run by `make bench`).

Builds a Claude Code transcript from the real fixture
``coverage-test-fix.jsonl`` whose first file-read tool result is replaced by
``BENCH_LARGE_MB`` MB (default 50) of base64 on one line, with no whitespace
(the realistic worst case: ``base64 -w0 image.png`` in a tool output), then
runs ``compaction-lab run --profile my_sessions`` on it into a temp results
folder, polling the process tree (the CLI and every notebook kernel) while it
runs.

Targets (issue #12, acceptance 4):
- the chain completes (exit 0) in < 120 s of wall time;
- peak RSS of the process tree < 1.5 GB.

Peak RSS of the tree is measured conservatively: every ``POLL_S`` seconds the
``VmHWM`` (each process's own high-water mark, so a spike between two polls
is not missed) of every live process in the tree is summed, and the largest
sum is reported. The chain's kernels (two on 2 cores) live together, so this
is the runner's peak so far plus each kernel's own peak, even when the kernels
peaked at different moments: an upper bound of the tree's resident memory.

Usage: ``python benchmarks/bench_large_record.py [--keep] [--mb N]``; env
``BENCH_LARGE_MB``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from _common import Results, repo_root

MB = 1_000_000
DEFAULT_MB = 50
TARGET_S = 120.0
TARGET_RSS_MB = 1500.0  # 1.5 GB, in MB (10^6 bytes) as the issue states it
POLL_S = 0.05
SEED = 20250914
FIXTURE = "coverage-test-fix.jsonl"


def fixture_path() -> Path:
    return repo_root() / "tests" / "fixtures" / "public" / "claude-code" / FIXTURE


def build_session(dest: Path, mb: int = DEFAULT_MB, seed: int = SEED) -> int:
    """Write the fixture with its first tool result replaced by `mb` MB of one-line base64.

    Returns the blob's length in characters.
    """
    rng = random.Random(seed)
    blob = base64.b64encode(rng.randbytes(mb * MB * 3 // 4)).decode("ascii")
    done = False
    with open(fixture_path(), encoding="utf-8") as src, open(dest, "w", encoding="utf-8") as out:
        for line in src:
            obj = json.loads(line)
            content = (obj.get("message") or {}).get("content")
            if not done and isinstance(content, list):
                for block in content:
                    if (
                        isinstance(block, dict)
                        and block.get("type") == "tool_result"
                        and isinstance(block.get("content"), str)
                    ):
                        block["content"] = blob
                        done = True
                        break
                if done:
                    line = json.dumps(obj, ensure_ascii=False) + "\n"
            out.write(line)
    if not done:
        raise RuntimeError(f"no string tool_result in {fixture_path()}")
    return len(blob)


def _hwm_mb(proc: psutil.Process) -> float:
    # psutil has no peak RSS on Linux; VmHWM is the process's own high-water mark.
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MB
    except OSError:
        pass
    try:
        return proc.memory_info().rss / MB
    except psutil.Error:
        return 0.0


def tree_peak(root: psutil.Process, stop: threading.Event, out: dict) -> None:
    """Poll until `stop`: the largest sum of VmHWM over the live processes of the tree."""
    peak = 0.0
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        peak = max(peak, sum(_hwm_mb(p) for p in procs))
        out["peak_mb"] = peak
        stop.wait(POLL_S)


def run_chain(session: Path, results: Path) -> tuple[int, float, float, str]:
    """Run the my_sessions chain on `session`; returns (exit code, seconds, peak tree RSS MB, stderr tail)."""
    exe = Path(sys.executable).with_name("compaction-lab")
    cmd = [
        str(exe),
        "run",
        "--profile",
        "my_sessions",
        "--set",
        f"session_paths=[{session}]",
        "--results",
        str(results),
        "--quiet",
    ]
    stats: dict = {"peak_mb": 0.0}
    stop = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poller = threading.Thread(target=tree_peak, args=(psutil.Process(proc.pid), stop, stats), daemon=True)
    poller.start()
    try:
        _, err = proc.communicate(timeout=1800)
    finally:
        seconds = time.perf_counter() - t0
        stop.set()
        poller.join()
    return proc.returncode, seconds, stats["peak_mb"], err[-3000:]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=int(os.environ.get("BENCH_LARGE_MB", DEFAULT_MB)))
    ap.add_argument("--keep", action="store_true", help="keep the temp folder and print its path")
    args = ap.parse_args(argv)
    res = Results("large_record")
    tmp = Path(tempfile.mkdtemp(prefix="bench-large-"))
    try:
        session = tmp / "big.jsonl"
        chars = build_session(session, args.mb)
        res.add("blob (one line, no whitespace)", chars / MB, "MB")
        code, seconds, peak, err = run_chain(session, tmp / "results")
        if code != 0:
            print(err, file=sys.stderr)
        res.add("my_sessions chain exit code", code, "", "== 0", code == 0)
        res.add("my_sessions chain wall time", seconds, "s", f"< {TARGET_S:g} s", code == 0 and seconds < TARGET_S)
        res.add("  peak RSS, process tree", peak, "MB", f"< {TARGET_RSS_MB:g} MB", peak < TARGET_RSS_MB)
        return res.finish()
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
