"""Own logs in seconds: the my_sessions chain on real sessions, and how it scales (run by `make bench`).

Targets (issue 50, item 3):
- ``compaction-lab run --profile my_sessions`` on ``tests/fixtures/public`` (Claude Code, pi and SWE-agent
  logs, 3.4 MB), a fresh process as a person types it, the whole chain with its HTML and report, in
  <= 30 s: best of ``BENCH_MINE_REPEAT`` (default 3), every time printed (this shared host's speed drifts);
- 200 sessions take <= 10x the time of 20: synthetic copies of the public fixture's small sessions (Claude
  Code and SWE-agent; the two pi logs, 3.2 MB, would make the 200-session folder cost minutes) with salted
  text — every copy's prose and ids unique, so no cache or memo answers for another copy — one my_sessions
  run over each folder, every session cut at its end (`SCALE_SETTINGS`). ``BENCH_MINE_SCHEDULER`` (e.g. ``local``) runs both with ``--scheduler``: the exam
  and cost stages' per-session work then runs as tasks on the engine. About 3 minutes on 2 cores;
  ``BENCH_MINE_SCALE=0`` skips it.

A fixed pure-Python loop is timed first (``host reference``, no target) so runs on different days compare.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import Results, host_reference, repo_root, timed

PUBLIC = repo_root() / "tests" / "fixtures" / "public"
FOLDERS = ("claude-code", "pi", "swe-agent")
#: The small sessions the scaling copies are made of (the pi logs are 3.2 MB of the fixture's 3.4 MB).
SMALL = ("claude-code", "swe-agent")
REPEAT = max(1, int(os.environ.get("BENCH_MINE_REPEAT") or 3))
SCHEDULER = os.environ.get("BENCH_MINE_SCHEDULER") or ""
SEED = 50

#: JSON keys whose values are ids: renamed consistently in a copy, so a tool call still finds its output.
_ID_KEY = re.compile(r"(?i)(?:id|uuid)$")


#: The scaling runs cut every session at its end with a short tail, so every copy is mined and examined (at
#: the profile's W = 200,000 these small sessions would not compact, and the exam would have no question).
SCALE_SETTINGS = ("cut=end", "tail_tokens=1000")


def run_my_sessions(paths: list[Path], scheduler: str = "", settings: tuple[str, ...] = ()) -> tuple[float, str]:
    """Time one ``compaction-lab run --profile my_sessions`` over `paths` in a fresh process; (seconds, error)."""
    exe = Path(sys.executable).with_name("compaction-lab")
    listed = ",".join(str(p) for p in paths)
    cmd = [str(exe), "run", "--profile", "my_sessions", "--quiet", "--set", f"session_paths=[{listed}]"]
    for setting in settings:
        cmd += ["--set", setting]
    if scheduler:
        cmd += ["--scheduler", scheduler]
    with tempfile.TemporaryDirectory() as tmp, timed() as t:
        r = subprocess.run([*cmd, "--results", tmp], capture_output=True, text=True, timeout=3600, cwd=repo_root())
    return t["seconds"], "" if r.returncode == 0 else (r.stderr[-3000:] or f"exit status {r.returncode}")


def _salted(value: Any, salt: str, ids: dict[str, str]) -> Any:
    """A JSON value with its prose salted and its ids renamed (see `copy_session`)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(v, str) and v and _ID_KEY.search(k):
                out[k] = ids.setdefault(v, f"{v}-{salt}")
            else:
                out[k] = _salted(v, salt, ids)
        return out
    if isinstance(value, list):
        return [_salted(v, salt, ids) for v in value]
    if isinstance(value, str) and " " in value and not value.lstrip().startswith(("{", "[")):
        return f"{value} (copy {salt})"  # prose: unique per copy; embedded JSON (a state) stays parseable
    return value


def copy_session(src: Path, dest_dir: Path, salt: str) -> Path:
    """Write a copy of one session file with salted text: prose ends with the salt, ids carry it."""
    ids: dict[str, str] = {}
    dest = dest_dir / f"{src.stem}-{salt}{src.suffix}"
    text = src.read_text(encoding="utf-8")
    if src.suffix == ".jsonl":
        lines = [json.dumps(_salted(json.loads(x), salt, ids)) for x in text.splitlines() if x.strip()]
        dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        dest.write_text(json.dumps(_salted(json.loads(text), salt, ids)), encoding="utf-8")
    return dest


def make_copies(n: int, dest: Path) -> list[Path]:
    """`n` salted copies of the small public sessions, round robin, in per-format folders under `dest`."""
    rng = random.Random(SEED)
    sources = [f for folder in SMALL for f in sorted((PUBLIC / folder).iterdir()) if f.is_file()]
    folders = []
    for i in range(n):
        src = sources[i % len(sources)]
        out = dest / src.parent.name
        out.mkdir(parents=True, exist_ok=True)
        copy_session(src, out, f"{i:04d}{rng.getrandbits(32):08x}")
        folders.append(out)
    return list(dict.fromkeys(folders))


def main() -> int:
    res = Results("my_sessions")
    res.add("host reference: pure-Python loop", host_reference(), "s", "no target: this host's speed now")
    times = []
    for _ in range(REPEAT):
        seconds, error = run_my_sessions([PUBLIC / f for f in FOLDERS])
        if error:
            print(error, file=sys.stderr)
            res.add("my_sessions on tests/fixtures/public", seconds, "s", "the run failed", False)
            return res.finish()
        times.append(seconds)
        print(f"  my_sessions on tests/fixtures/public: {seconds:.1f} s", flush=True)
    best = min(times)
    target = f"<= 30 s (best of {REPEAT}: {', '.join(f'{x:.1f}' for x in times)} s)"
    res.add("my_sessions on tests/fixtures/public, end to end", best, "s", target, best <= 30)

    if os.environ.get("BENCH_MINE_SCALE", "1") != "0":
        with tempfile.TemporaryDirectory() as tmp:
            measured = {}
            for n in (20, 200):
                folders = make_copies(n, Path(tmp) / f"s{n}")
                seconds, error = run_my_sessions(folders, SCHEDULER, SCALE_SETTINGS)
                if error:
                    print(error, file=sys.stderr)
                    res.add(f"my_sessions on {n} salted copies", seconds, "s", "the run failed", False)
                    return res.finish()
                measured[n] = seconds
                where = f", --scheduler {SCHEDULER}" if SCHEDULER else ""
                res.add(f"my_sessions on {n} salted copies{where}", seconds, "s", "")
            ratio = measured[200] / measured[20]
            res.add("time(200 sessions) / time(20 sessions)", ratio, "x", "<= 10", ratio <= 10)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
