"""``doctor --profile my_sessions`` on the public fixtures, planned from counts (run by `make bench`; issue 48).

Runs the command a user runs before a real-model run of their own sessions, in a fresh process (start-up
included), on the suite's public agent sessions (``tests/fixtures/public/*``: Claude Code, pi, SWE-agent)
with the DeepSeek preset and both the summarizer and the reader on the model, as JSON:

    compaction-lab doctor --profile my_sessions --provider deepseek --set summarizer=model
        --set reader=model --set session_paths=[...] --json

The endpoint checks may fail (no key, no network): the benchmark judges the time and that a plan came
back from the count (``plan.method == "counts"``, at least one planned call), not the checks.

Target: the whole command returns in <= 20 s (issue 48, acceptance 5). Before the count (the plan was a
dry run of the notebooks) it took ~140-250 s on this project's 2-core hosts. The host reference
(`_common.host_reference`) is reported beside it, judged on nothing.

Usage: ``python benchmarks/bench_doctor.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from _common import Results, host_reference, repo_root, timed

TARGET_S = 20.0

#: The public fixture folders (tests/helpers.py ``PUBLIC_FIXTURES``).
FIXTURE_FOLDERS = ("claude-code", "pi", "swe-agent")


def main() -> int:
    root = repo_root()
    folders = [str(root / "tests" / "fixtures" / "public" / f) for f in FIXTURE_FOLDERS]
    cli = [sys.executable, "-c", "import sys; from compaction_lab.cli import main; sys.exit(main())"]
    args = [
        "doctor",
        "--profile",
        "my_sessions",
        "--provider",
        "deepseek",
        "--set",
        "summarizer=model",
        "--set",
        "reader=model",
        "--set",
        f"session_paths={json.dumps(folders)}",
        "--json",
    ]
    env = {**os.environ, "PYTHONPATH": str(root / "lib")}
    with timed() as t:
        proc = subprocess.run([*cli, *args], cwd=root, env=env, capture_output=True, text=True, check=False)
    res = Results("doctor")
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
        doc = {}
    planned = doc.get("plan") or {}
    counted = planned.get("method") == "counts" and int(planned.get("total_calls") or 0) > 0
    res.add("doctor my_sessions (public fixtures)", t["seconds"], "s", f"<= {TARGET_S:g} s", t["seconds"] <= TARGET_S)
    res.add("planned calls (from counts)", float(planned.get("total_calls") or 0), "calls", "> 0, counted", counted)
    if planned.get("cost_estimate") is not None:
        res.add(f"cost estimate ({planned.get('currency')})", float(planned["cost_estimate"]), "money")
    res.add("host reference (3M-step loop)", host_reference(), "s")
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
