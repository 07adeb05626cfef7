"""The tally on the engine and as a command: throughput, scaling, caches, memory, cut-overs (run by `make bench`).

Acceptance 3 and 4 of issue 16, in one run. Two seeded, deterministic inputs
are generated (streamed to disk, in a temp dir or ``--dir``):

A. a multi-session Codex rollout of ``BENCH_ENGINE_MB`` MB (default 1024),
   written by `bench_import.generate` (the same generator, imported, not
   copied): sessions of 1-8 MB back to back, so the tally splits the file
   into spans of whole sessions (`compaction_lab.ingest.units.SPAN_BYTES`)
   read by parallel tasks;
B. ONE Codex session (one ``session_meta``) of ``BENCH_ENGINE_SINGLE_MB`` MB
   (default 40) of real-derived text: the context records of the public
   sessions in ``tests/fixtures`` (the real ones in ``tests/fixtures/public``)
   (loaded with `compaction_lab.ingest.load_sessions`), replayed in order as
   often as needed, each copy made unique by a seeded perturbation (its
   lines shuffled, about one word in eight replaced by a word of the
   fixtures' vocabulary, every line prefixed with a seeded line number;
   a text met before is perturbed again), so the count caches get no free
   hits. One session is one unit; on the engine it is read and counted in
   pieces by every worker at once (`compaction_lab.tally.tasks.plan_pieces`, about
   `composition.PIECES_PER_WORKER` per worker), and the pieces' tallies are
   stitched back together in order.

For each input, measured (items 1-3 and 9 on B in ``BENCH_ENGINE_SINGLE_REPEAT`` interleaved rounds, default
3, the best time of each kept and every round printed: this shared host's speed drifts by tens of
percent within minutes, which one round of each, minutes apart, would measure instead of the tally):

1. **raw tiktoken**: ``get_encoding().encode_ordinary`` over the very same
   context texts, one text at a time, one thread, in a fresh subprocess;
   only the encode calls are timed (the import is not, as in
   ``bench_import.py``'s "raw" child). Text-MB/s are UTF-8 bytes of the
   context texts per second. The child also reports how many texts repeat an
   earlier text of the file (by count and by bytes): the most a count cache
   could ever hit.
2. **tally on the engine, 2 workers**: ``composition.tally(path,
   tokenizer="auto", engine=...)`` on an embedded LocalCluster of two
   single-threaded worker processes (`compaction_lab.engine.scheduler.open_engine`).
   The cluster is started, and the tokenizer loaded on every worker, before
   the clock starts; both are reported on their own lines. Throughput is
   text-MB/s over the same text bytes as (1). Target: >= 2.0x the raw
   single-process rate (on 2 cores: the backend, bpe-openai when ``auto``
   picks it, and two processes).
3. **scaling**: the same tally on a fresh 1-worker LocalCluster; target:
   time(1 worker) / time(2 workers) >= 1.7.
4. **count-cache hit rate** (`TallyStats.hit_rate_chars` of the 2-worker
   tally: the share of characters whose count came from a cache or from an
   identical text earlier in the same part): target < 5% on these inputs, so
   a corpus of repeated texts cannot be what flatters the ratio. The share of
   *texts* is printed too (A's generator repeats short harness texts --
   permission notes, "Success. Updated ..." -- which are many texts but few
   characters). Every tally runs on a fresh cluster: a worker's cache
   survives between tallies on the same cluster. The share of texts
   repeating an earlier text of the file (from 1) is printed next to it.
5. **peak RSS per worker**: after the tally, ``client.run`` reads every
   worker's ``VmHWM`` (`_common.own_peak_rss_mb`, the process's own peak,
   start-up included); the maximum over workers is reported. Target: <= 25%
   of the file size, with a floor of 256 MiB: the interpreter with pandas
   alone is ~150 MiB, which a small file must not be judged on (a worker
   with dask and the tokenizer loaded is read once more before the tally
   and reported on its own line). The same rule is applied to both inputs.
6. **same table**: for B, the 2-worker table equals a ``scheduler="sync"``
   tally of the same file (in this process; its time is reported too). On
   A (1 GB, too slow to tally twice more) the token totals of the 1- and
   2-worker tallies must be equal, and equal to the raw tokenizer's.
9. **the command as a person types it** (issue 50): wall time of a fresh
   ``compaction-lab tally FILE`` process, every default (``auto``: a pool of
   forked workers at these sizes; ``COMPACTION_LAB_SCHEDULER`` unset; the
   table printed), start-up, imports and tokenizer load included, in the
   same rounds as 1-3. Target: >= 2.0x the raw tiktoken time of (1), on A and B.
   Beside it, the CPU time of the command (all its processes) over raw's: what
   other work on a shared host does not change, where wall times do.

Then, on smaller Codex files generated the same way as A: the whole CLI's wall
time in a subprocess, ``compaction-lab tally --scheduler sync FILE`` vs
``--scheduler pool|local FILE`` (best of ``BENCH_ENGINE_CUTOVER_REPEAT``,
default 1 -- at least 3 for the pool's small files -- the two alternating),
so a LocalCluster's start and every worker's imports are in the times. The
measured cut-over is where the other starts to win, interpolated linearly
between the two sizes around the sign change of (other - sync); the range
printed is [largest size sync won, smallest size the other won]. Target: the
engine's constant is within a factor 2 of the measured cut-over (when the
other wins at every size, or at none, only a bound is known and the target
is judged against that bound):

7. **cut-over sync | local** (``BENCH_ENGINE_CUTOVER_MB``, default
   ``8,64,128,256,384``): `compaction_lab.engine.scheduler.SYNC_BELOW_BYTES`,
   where ``auto`` starts a LocalCluster for jobs that take no pool (imports,
   in-memory compositions);
7b. **cut-over sync | pool** (``BENCH_ENGINE_POOL_CUTOVER_MB``, default
   ``0.5,1,2,4,8,16``): `compaction_lab.engine.scheduler.POOL_FROM_BYTES`, where
   ``auto`` starts forking workers for a tally.
8. **acceptance 4**: wall time of ``compaction-lab tally`` on a small real
   fixture (``tests/fixtures/public/pi/large-session.jsonl``, ~1 MB)
   with the default scheduler (auto) vs ``--scheduler sync``, median of 5
   runs each, alternating, ``COMPACTION_LAB_SCHEDULER`` unset. Target: the
   default adds <= 1 s.

Usage: ``python benchmarks/bench_engine.py [--keep] [--dir DIR]`` (from
``benchmarks/``, or ``make bench BENCH=engine``); env ``BENCH_ENGINE_MB``,
``BENCH_ENGINE_SINGLE_MB``, ``BENCH_ENGINE_SINGLE_REPEAT`` (B's interleaved rounds, default 3: the best
of each measurement is kept), ``BENCH_ENGINE_SEED``,
``BENCH_ENGINE_CUTOVER_MB``, ``BENCH_ENGINE_POOL_CUTOVER_MB``, ``BENCH_ENGINE_CUTOVER_REPEAT``. The machine's
load average at the start is reported: other work on a 2-core machine
lowers every rate and the scaling. Memory of this script stays bounded:
the files are streamed to disk and the tallies keep one row per session x
kind.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Results, own_peak_rss_mb, repo_root
from bench_import import MB, RolloutWriter, generate

DEFAULT_MB = 1024
DEFAULT_SINGLE_MB = 40
DEFAULT_SINGLE_REPEAT = 3  # B's rounds (A's 1 GB is measured once: each round takes minutes)
DEFAULT_SEED = 20251201
DEFAULT_CUTOVER_MB = (8.0, 64.0, 128.0, 256.0, 384.0)
DEFAULT_POOL_CUTOVER_MB = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
WORKERS = 2
RATIO_TARGET = 2.0
SCALING_TARGET = 1.7
HIT_RATE_TARGET = 0.05
RSS_SHARE = 0.25  # of the file size
RSS_FLOOR_MIB = 256.0
CUTOVER_FACTOR = 2.0
OVERHEAD_TARGET_S = 1.0
OVERHEAD_RUNS = 5
SMALL_FIXTURE = Path("pi") / "large-session.jsonl"


def public_sessions() -> Path:
    """The real public sessions copied into the repository (``tests/fixtures/public``, see its SOURCES.md)."""
    return repo_root() / "tests" / "fixtures" / "public"


# =========================================================================== input B: one session of real-derived text

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def real_records() -> list[tuple[str, str | None, str]]:
    """(kind, tool, text) of every non-empty context record of the real fixtures, in reading order."""
    from compaction_lab.core.session import CONTEXT_KINDS
    from compaction_lab.ingest import ImportAudit, load_sessions

    out = []
    for s in load_sessions(repo_root() / "tests" / "fixtures", ImportAudit()):
        out += [(r.kind, r.tool, r.text) for r in s.records if r.kind in CONTEXT_KINDS and r.text.strip()]
    return out


def perturb(text: str, rng: random.Random, vocab: list[str]) -> str:
    """A seeded variant of `text`: lines shuffled, ~1 word in 8 replaced, seeded line numbers."""
    lines = text.split("\n")
    if len(lines) > 1:
        rng.shuffle(lines)
    sub = lambda m: rng.choice(vocab) if rng.random() < 0.125 else m.group(0)
    start = rng.randrange(1, 1_000_000)
    return "\n".join(f"{start + i:>7}\t{_WORD.sub(sub, line)}" for i, line in enumerate(lines))


def generate_single(path: Path, target_mb: float, seed: int) -> dict:
    """Write input B: one Codex session of unique real-derived texts; returns what was generated."""
    from tqdm import tqdm

    rng = random.Random(seed)
    t0 = time.perf_counter()
    base = real_records()
    vocab = sorted({w for _, _, t in base for w in _WORD.findall(t)})
    target = int(target_mb * MB)
    seen: set[bytes] = set()
    texts = rounds = retries = n_call = 0
    sid = f"0199{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-7{rng.getrandbits(12):03x}-8{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
    cwd = "/home/dev/bench-engine"
    with (
        open(path, "wb", buffering=8 << 20) as f,
        tqdm(total=target, unit="B", unit_scale=True, desc="generate B", mininterval=1.0) as bar,
    ):
        w = RolloutWriter(f, None, rng)  # only emit/item are used: no pools needed
        w.emit(
            "session_meta",
            {
                "id": sid,
                "timestamp": w._ts(),
                "cwd": cwd,
                "originator": "codex_cli_rs",
                "cli_version": "0.46.0",
                "source": "cli",
                "model_provider": "openai",
            },
        )
        w.emit("turn_context", {"cwd": cwd, "approval_policy": "on-request", "model": "gpt-5-codex"})
        call_id = None
        while w.bytes < target:
            rounds += 1
            for kind, tool, text in base:
                before = w.bytes
                t = perturb(text, rng, vocab)
                key = hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest()
                while key in seen:  # never the same text twice in the file
                    retries += 1
                    t = perturb(text, rng, vocab)
                    key = hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest()
                seen.add(key)
                texts += 1
                if kind in ("user", "assistant", "system"):
                    role = {"user": "user", "assistant": "assistant", "system": "developer"}[kind]
                    part = "output_text" if kind == "assistant" else "input_text"
                    w.item({"type": "message", "role": role, "content": [{"type": part, "text": t}]})
                elif kind == "reasoning":
                    w.item({"type": "reasoning", "summary": [{"type": "summary_text", "text": t}], "content": None})
                elif kind == "tool_call":
                    n_call += 1
                    call_id = f"call_{n_call:07d}"
                    w.item(
                        {
                            "type": "custom_tool_call",
                            "status": "completed",
                            "call_id": call_id,
                            "name": tool or "shell",
                            "input": t,
                        }
                    )
                elif kind == "tool_output":
                    if call_id is None:  # an output whose call is not in the fixtures: an id of its own
                        n_call += 1
                        call_id = f"call_{n_call:07d}"
                    w.item({"type": "custom_tool_call_output", "call_id": call_id, "output": t})
                    call_id = None
                elif kind == "summary":
                    w.emit("compacted", {"message": t, "replacement_history": []})
                else:
                    raise AssertionError(f"unexpected context kind {kind!r}")
                bar.update(w.bytes - before)
                if w.bytes >= target:
                    break
    return {
        "path": str(path),
        "seed": seed,
        "bytes": w.bytes,
        "lines": w.lines,
        "sessions": 1,
        "texts": texts,
        "base_texts": len(base),
        "rounds": rounds,
        "retries": retries,
        "seconds": time.perf_counter() - t0,
    }


# =========================================================================== the raw tokenizer, in a fresh process


def child_raw(path: str) -> dict:
    """Raw tiktoken over the file's context texts: one ``encode_ordinary`` per text, one thread."""
    from compaction_lab.core.session import CONTEXT_KINDS
    from compaction_lab.core.tokens import get_encoding
    from compaction_lab.ingest import ImportAudit, load_sessions

    enc = get_encoding()
    enc.encode_ordinary("warm up")
    audit = ImportAudit()
    seconds, cpu, text_bytes, tokens, texts_n, dup_n, dup_bytes = 0.0, 0.0, 0, 0, 0, 0, 0
    seen: set[bytes] = set()
    for s in load_sessions(path, audit):  # untimed: only the tokenizer is measured
        texts = [r.text for r in s.records if r.kind in CONTEXT_KINDS]
        for t in texts:
            b = t.encode("utf-8", "surrogatepass")
            key = hashlib.blake2b(b, digest_size=16).digest()
            text_bytes += len(b)
            if key in seen:
                dup_n, dup_bytes = dup_n + 1, dup_bytes + len(b)
            seen.add(key)
        texts_n += len(texts)
        t0, c0 = time.perf_counter(), time.process_time()
        for t in texts:
            tokens += len(enc.encode_ordinary(t))
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "text_bytes": text_bytes,
        "tokens": tokens,
        "texts": texts_n,
        "repeated_texts": dup_n,
        "repeated_bytes": dup_bytes,
        "sessions": audit.sessions,
        "skipped": audit.n_skipped,
        "peak_rss_mib": own_peak_rss_mb(),
    }


def run_raw(path: Path) -> dict:
    print("  [raw tiktoken] fresh subprocess ...", flush=True)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "raw", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent,
    )
    if proc.returncode != 0:
        raise SystemExit(f"raw child failed with exit code {proc.returncode}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"  [raw tiktoken] {res['text_bytes'] / MB:.1f} text-MB in {res['seconds']:.1f} s "
        f"({res['text_bytes'] / MB / res['seconds']:.2f} text-MB/s), {res['tokens']:,} tokens",
        flush=True,
    )
    return res


def run_cli(path: Path) -> dict:
    """Item 9: ``compaction-lab tally FILE`` as a person types it: a fresh process, every default, the table printed."""
    import resource

    print("  [compaction-lab tally FILE] fresh process, defaults ...", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, err = cli_run(["tally", str(path)])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and its workers, all waited for
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    engine = next((line.removeprefix("engine: ") for line in err.splitlines() if line.startswith("engine: ")), "?")
    print(f"  [compaction-lab tally FILE] {seconds:.2f} s, CPU {cpu:.2f} s ({engine})", flush=True)
    return {"seconds": seconds, "cpu_seconds": cpu, "engine": engine}


# =========================================================================== the tally on the engine


def _warm(encoding: str, backend: str) -> str:
    """Worker task: load the tokenizer (and run its self-check) before the clock starts."""
    from compaction_lab.core.tokens import counter

    tok = counter(encoding, backend)
    tok.count("warm up")
    return tok.tokenizer


def engine_tally(path: Path, workers: int) -> dict:
    """One tally on a fresh LocalCluster of `workers` processes; start-up and warm-up timed apart."""
    from compaction_lab.core.tokens import DEFAULT_ENCODING, resolve_tokenizer
    from compaction_lab.engine.scheduler import open_engine
    from compaction_lab.tally import composition

    backend = resolve_tokenizer("auto", DEFAULT_ENCODING)
    t0 = time.perf_counter()
    eng = open_engine("local", workers=workers, announce=False)
    try:
        startup = time.perf_counter() - t0
        t1 = time.perf_counter()
        loaded = eng.client.run(_warm, DEFAULT_ENCODING, backend)
        warm = time.perf_counter() - t1
        base_rss = max(eng.client.run(own_peak_rss_mb).values())  # a worker before any tally task
        print(
            f"  [{workers} worker(s)] cluster up in {startup:.1f} s, tokenizer ({', '.join(sorted(set(loaded.values())))}) "
            f"loaded on the workers in {warm:.1f} s; dashboard {eng.dashboard}",
            flush=True,
        )
        t2 = time.perf_counter()
        result = composition.tally(path, tokenizer="auto", engine=eng, progress=True)
        seconds = time.perf_counter() - t2
        rss = eng.client.run(own_peak_rss_mb)
    finally:
        eng.close()
    st = result.stats
    print(
        f"  [{workers} worker(s)] tally {seconds:.1f} s, {st.units} units, {st.parts} tasks, "
        f"hit rate {st.hit_rate:.2%}, worker peak RSS {', '.join(f'{v:.0f}' for v in rss.values())} MiB",
        flush=True,
    )
    return {
        "workers": workers,
        "startup": startup,
        "warm": warm,
        "seconds": seconds,
        "table": result.table,
        "tokens": int(result.table["tokens"].sum()),
        "sessions": result.audit.sessions,
        "skipped": result.audit.n_skipped,
        "stats": st,
        "worker_rss": max(rss.values()),
        "worker_base_rss": base_rss,
    }


def measure_input(res: Results, label: str, path: Path, gen: dict, compare_sync: bool, repeat: int = 1) -> None:
    """Items 1-6 for one input, rows added to `res` under `label` (1-3 timed `repeat` times, best kept)."""
    from compaction_lab.tally import composition

    print(f"\n--- input {label}: {gen['bytes'] / MB:.1f} MB, {gen['sessions']} session(s) ---", flush=True)
    # Rounds of the three measurements in turn, the best (least disturbed) of each kept: a shared host's
    # speed drifts by tens of percent within minutes, and a ratio of two timings taken minutes apart
    # would measure the drift. Every round's times are printed.
    rounds: list[tuple[dict, dict, dict, dict]] = []
    for r in range(repeat):
        if repeat > 1:
            print(f"  round {r + 1} of {repeat}", flush=True)
        rounds.append((run_raw(path), engine_tally(path, WORKERS), engine_tally(path, 1), run_cli(path)))
    raw, two, one, cli = (min((rd[i] for rd in rounds), key=lambda m: m["seconds"]) for i in range(4))
    spread = (
        f"; best of {repeat} interleaved rounds (raw / {WORKERS} workers / 1 worker / command: "
        + ", ".join(
            f"{a['seconds']:.2f}/{b['seconds']:.2f}/{c['seconds']:.2f}/{d['seconds']:.2f} s" for a, b, c, d in rounds
        )
        + ")"
        if repeat > 1
        else ""
    )

    file_mb, text_mb = gen["bytes"] / MB, raw["text_bytes"] / MB
    raw_rate, two_rate = text_mb / raw["seconds"], text_mb / two["seconds"]
    res.add(f"{label}: file", file_mb, "MB", f"{gen['sessions']} session(s), {text_mb:.0f} MB of context text")
    res.add(
        f"{label}: sessions tallied (2 workers)",
        two["sessions"],
        "",
        f"== {gen['sessions']}, 0 skipped",
        two["sessions"] == gen["sessions"] and two["skipped"] == 0,
    )
    res.add(f"{label}: raw tiktoken, 1 thread", raw_rate, "text-MB/s", f"encode_ordinary ({raw['seconds']:.1f} s)")
    res.add(f"{label}: cluster start-up, {WORKERS} workers", two["startup"], "s", "not in the tally time")
    res.add(f"{label}:   tokenizer load on workers", two["warm"], "s", "not in the tally time")
    res.add(
        f"{label}: tally, {WORKERS} workers",
        two_rate,
        "text-MB/s",
        f"{two['seconds']:.1f} s, {file_mb / two['seconds']:.1f} file-MB/s, {two['stats'].units} units, {two['stats'].parts} tasks",
    )
    ratio = two_rate / raw_rate
    res.add(f"{label}: tally {WORKERS} workers / raw", ratio, "x", f">= {RATIO_TARGET}x{spread}", ratio >= RATIO_TARGET)
    cli_ratio = raw["seconds"] / cli["seconds"]
    res.add(
        f"{label}: compaction-lab tally FILE (fresh process, defaults)",
        text_mb / cli["seconds"],
        "text-MB/s",
        f"{cli['seconds']:.2f} s end to end: start-up, imports, engine ({cli['engine']}), tokenizer, reading, table",
    )
    res.add(
        f"{label}: compaction-lab tally FILE / raw",
        cli_ratio,
        "x",
        f">= {RATIO_TARGET}x (raw tiktoken {raw['seconds']:.2f} s){spread}",
        cli_ratio >= RATIO_TARGET,
    )
    res.add(
        f"{label}:   CPU of the command / of raw tiktoken",
        cli["cpu_seconds"] / max(raw["cpu_seconds"], 1e-9),
        "x",
        f"{cli['cpu_seconds']:.2f} s (every process) / {raw['cpu_seconds']:.2f} s: what other work on the host "
        "does not change; wall time on 2 idle cores ~ serial part + the rest / 2",
    )
    scaling = one["seconds"] / two["seconds"]
    res.add(
        f"{label}: scaling 1 -> {WORKERS} workers",
        scaling,
        "x",
        f">= {SCALING_TARGET}x (1 worker: {one['seconds']:.1f} s, start-up {one['startup']:.1f} s)",
        scaling >= SCALING_TARGET,
    )
    hit = two["stats"].hit_rate_chars
    res.add(
        f"{label}: count-cache hit rate (characters)",
        100 * hit,
        "%",
        f"< {100 * HIT_RATE_TARGET:.0f}% (1 worker {100 * one['stats'].hit_rate_chars:.2f}%)",
        hit < HIT_RATE_TARGET,
    )
    res.add(
        f"{label}:   hit rate (texts)",
        100 * two["stats"].hit_rate,
        "%",
        f"{two['stats'].cache_hits:,} hits / {two['stats'].cache_misses:,} misses (short repeated texts weigh little)",
    )
    res.add(
        f"{label}:   texts repeating an earlier text",
        100 * raw["repeated_texts"] / max(raw["texts"], 1),
        "%",
        f"of {raw['texts']:,} texts; {100 * raw['repeated_bytes'] / max(raw['text_bytes'], 1):.2f}% of text bytes",
    )
    rss_target = max(RSS_SHARE * gen["bytes"] / 2**20, RSS_FLOOR_MIB)
    res.add(
        f"{label}: worker peak RSS (max, {WORKERS} workers)",
        two["worker_rss"],
        "MiB",
        f"<= {rss_target:.0f} MiB (25% of file, min {RSS_FLOOR_MIB:.0f}); 1 worker: {one['worker_rss']:.0f}",
        two["worker_rss"] <= rss_target,
    )
    res.add(
        f"{label}:   worker peak RSS before the tally",
        two["worker_base_rss"],
        "MiB",
        "start-up + tokenizer loaded (max over workers)",
    )
    res.add(
        f"{label}: tokens, 1 worker == {WORKERS} workers",
        two["tokens"],
        "tokens",
        f"1 worker: {one['tokens']}",
        two["tokens"] == one["tokens"],
    )
    res.add(
        f"{label}: tokens, tally == raw tiktoken",
        two["tokens"] - raw["tokens"],
        "tokens",
        f"difference (raw: {raw['tokens']})",
        two["tokens"] == raw["tokens"],
    )
    if compare_sync:
        print("  [sync] the reference tally in this process ...", flush=True)
        t0 = time.perf_counter()
        ref = composition.tally(path, tokenizer="auto", scheduler="sync", progress=True)
        sync_s = time.perf_counter() - t0
        same = ref.table.equals(two["table"])
        res.add(
            f"{label}: table, {WORKERS} workers == sync",
            float(same),
            "bool",
            f"{len(ref.table)} rows; sync tally {sync_s:.1f} s ({text_mb / sync_s:.2f} text-MB/s)",
            same,
        )


# =========================================================================== the CLI: cut-over, acceptance 4


def cli_run(args: list[str]) -> tuple[float, str]:
    """Wall time and stderr of ``compaction-lab ARGS`` in a subprocess (``COMPACTION_LAB_SCHEDULER`` unset)."""
    exe = Path(sys.executable).with_name("compaction-lab")
    cmd = (
        [str(exe)]
        if exe.exists()
        else [sys.executable, "-c", "import sys; from compaction_lab.cli import main; sys.exit(main())"]
    )
    env = {k: v for k, v in os.environ.items() if k != "COMPACTION_LAB_SCHEDULER"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"compaction-lab {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return seconds, proc.stderr


def cli_seconds(args: list[str]) -> float:
    """Wall time of ``compaction-lab ARGS`` in a subprocess (``COMPACTION_LAB_SCHEDULER`` unset)."""
    return cli_run(args)[0]


def cutover(res: Results, workdir: Path, sizes: list[float], seed: int, repeat: int, other: str, constant: str) -> None:
    """Items 7 and 7b: ``--scheduler sync`` vs ``--scheduler OTHER`` CLI wall time on files of `sizes` MB.

    Where `other` starts to win is the measured cut-over; the engine's `constant` (its name in
    `compaction_lab.engine.scheduler`) must be within `CUTOVER_FACTOR` of it.
    """
    from tqdm import tqdm

    from compaction_lab.engine import scheduler

    label = f"cut-over sync | {other}"
    print(f"\n--- {label}: compaction-lab tally --scheduler sync | {other}, files of {sizes} MB ---", flush=True)
    rows = []
    for mb in sizes:
        path = workdir / f"rollout-cutover-{mb:g}MB-seed{seed}.jsonl"
        gen = generate(path, mb, seed + int(mb))
        best = {"sync": float("inf"), other: float("inf")}
        try:
            for _ in tqdm(range(repeat), desc=f"{mb:g} MB", unit="pair", leave=False):
                for mode in ("sync", other):
                    best[mode] = min(best[mode], cli_seconds(["tally", "--scheduler", mode, str(path)]))
        finally:
            path.unlink(missing_ok=True)
        size = gen["bytes"] / MB
        print(f"  {size:6.1f} MB: sync {best['sync']:.2f} s, {other} {best[other]:.2f} s", flush=True)
        rows.append((size, best["sync"], best[other]))
        res.add(
            f"{label}: {size:.1f} MB, {other} - sync",
            best[other] - best["sync"],
            "s",
            f"sync {best['sync']:.2f} s, {other} {best[other]:.2f} s ({other if best[other] < best['sync'] else 'sync'} faster)",
        )

    const_mb = getattr(scheduler, constant) / MB
    sync_won = [s for s, ts, tl in rows if tl >= ts]
    other_won = [s for s, ts, tl in rows if tl < ts]
    lo = max((s for s in sync_won if not other_won or s < min(other_won)), default=0.0)
    hi = min((s for s in other_won if s > lo), default=float("inf"))
    if other_won and sync_won and hi != float("inf") and lo > 0:
        (s0, a0, b0), (s1, a1, b1) = next(r for r in rows if r[0] == lo), next(r for r in rows if r[0] == hi)
        d0, d1 = b0 - a0, b1 - a1  # other - sync: >= 0 at lo, < 0 at hi
        measured = s0 + (s1 - s0) * d0 / (d0 - d1)
        note = f"interpolated in [{lo:.1f}, {hi:.1f}] MB"
    elif not other_won:  # only a lower bound: the target cannot be established
        measured, note = float("inf"), f"{other} never faster up to {rows[-1][0]:.0f} MB: cut-over > {lo:.1f} MB"
    else:
        measured, note = hi, f"{other} faster already at {hi:.1f} MB: cut-over <= {hi:.1f} MB"
    inside = lo <= const_mb <= hi
    print(
        f"  {constant} = {getattr(scheduler, constant):,} B ({const_mb:.1f} MB) "
        f"{'sits inside' if inside else 'is outside'} the measured cut-over range [{lo:.1f}, {hi:.1f}] MB ({note})",
        flush=True,
    )
    if measured == float("inf"):
        ok = False
    elif not sync_won:  # only an upper bound: the constant must not exceed twice it
        ok = const_mb <= CUTOVER_FACTOR * measured
    else:
        ok = measured / CUTOVER_FACTOR <= const_mb <= CUTOVER_FACTOR * measured
    res.add(
        f"{label}: measured",
        measured if measured != float("inf") else -1.0,
        "MB",
        f"{note}; range [{lo:.1f}, {hi:.1f}] MB",
    )
    res.add(
        f"{label}: {constant}",
        const_mb,
        "MB",
        f"within {CUTOVER_FACTOR:g}x of the measured cut-over ({'inside' if inside else 'outside'} the range)",
        ok,
    )


def overhead(res: Results) -> None:
    """Item 8 (acceptance 4): the default scheduler on a small fixture adds <= 1 s over sync."""
    from tqdm import tqdm

    fixture = public_sessions() / SMALL_FIXTURE
    print(f"\n--- acceptance 4: compaction-lab tally {fixture.name}, default vs --scheduler sync ---", flush=True)
    times: dict[str, list[float]] = {"default": [], "sync": []}
    for _ in tqdm(range(OVERHEAD_RUNS), desc="runs", unit="pair"):
        times["default"].append(cli_seconds(["tally", str(fixture)]))
        times["sync"].append(cli_seconds(["tally", "--scheduler", "sync", str(fixture)]))
    med = {k: statistics.median(v) for k, v in times.items()}
    extra = med["default"] - med["sync"]
    res.add(
        "small fixture: default (auto)",
        med["default"],
        "s",
        f"median of {OVERHEAD_RUNS}, {fixture.stat().st_size / MB:.2f} MB ({SMALL_FIXTURE})",
    )
    res.add("small fixture: --scheduler sync", med["sync"], "s", f"median of {OVERHEAD_RUNS}")
    res.add("small fixture: default - sync", extra, "s", f"<= {OVERHEAD_TARGET_S:g} s", extra <= OVERHEAD_TARGET_S)


# =========================================================================== main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the generated files A and B (and print their paths)")
    ap.add_argument("--dir", help="folder for the generated files (default: a new temp dir)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        if args.child[0] != "raw":
            raise SystemExit(f"unknown child mode {args.child[0]!r}")
        print(json.dumps(child_raw(args.child[1])))
        return 0

    wall0 = time.perf_counter()
    size_mb = float(os.environ.get("BENCH_ENGINE_MB") or DEFAULT_MB)
    single_mb = float(os.environ.get("BENCH_ENGINE_SINGLE_MB") or DEFAULT_SINGLE_MB)
    seed = int(os.environ.get("BENCH_ENGINE_SEED") or DEFAULT_SEED)
    cut_env = os.environ.get("BENCH_ENGINE_CUTOVER_MB")
    cut_sizes = [float(x) for x in cut_env.split(",") if x.strip()] if cut_env else list(DEFAULT_CUTOVER_MB)
    pool_env = os.environ.get("BENCH_ENGINE_POOL_CUTOVER_MB")
    pool_sizes = [float(x) for x in pool_env.split(",") if x.strip()] if pool_env else list(DEFAULT_POOL_CUTOVER_MB)
    repeat = max(1, int(os.environ.get("BENCH_ENGINE_CUTOVER_REPEAT") or 1))
    single_repeat = max(1, int(os.environ.get("BENCH_ENGINE_SINGLE_REPEAT") or DEFAULT_SINGLE_REPEAT))
    load1 = os.getloadavg()[0]
    if load1 > 0.5:
        print(f"note: load average {load1:.2f} before starting; other work on this machine skews the numbers")
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="bench_engine_"))
    workdir.mkdir(parents=True, exist_ok=True)
    need = size_mb + single_mb + max(cut_sizes, default=0)
    free_mb = shutil.disk_usage(workdir).free / MB
    if free_mb < need * 1.2:
        print(f"not enough disk in {workdir}: {free_mb:.0f} MB free, {need:.0f} MB needed", file=sys.stderr)
        return 2
    path_a = workdir / f"rollout-engine-A-{size_mb:g}MB-seed{seed}.jsonl"
    path_b = workdir / f"rollout-engine-B-single-{single_mb:g}MB-seed{seed}.jsonl"
    res = Results("engine")
    try:
        print(f"generating A: a {size_mb:g} MB multi-session Codex rollout (seed {seed}) at {path_a}", flush=True)
        gen_a = generate(path_a, size_mb, seed)
        print(f"generating B: one {single_mb:g} MB Codex session of real-derived text at {path_b}", flush=True)
        gen_b = generate_single(path_b, single_mb, seed)
        print(
            f"  B: {gen_b['texts']:,} unique texts from {gen_b['base_texts']} real ones "
            f"({gen_b['rounds']} rounds, {gen_b['retries']} re-perturbed) in {gen_b['seconds']:.1f} s",
            flush=True,
        )
        for p in (path_a, path_b):  # written back now, not during a measurement
            with open(p, "rb") as fh:
                os.fsync(fh.fileno())

        measure_input(res, "A", path_a, gen_a, compare_sync=False)
        measure_input(res, "B", path_b, gen_b, compare_sync=True, repeat=single_repeat)
    finally:
        if args.keep:
            print(f"kept {path_a} and {path_b}")
        else:
            path_a.unlink(missing_ok=True)
            path_b.unlink(missing_ok=True)
    try:
        # Small files are quick to tally: the pool's cut-over is judged on at least three runs per size.
        cutover(res, workdir, pool_sizes, seed, max(3, repeat), "pool", "POOL_FROM_BYTES")
        cutover(res, workdir, cut_sizes, seed, repeat, "local", "SYNC_BELOW_BYTES")
        overhead(res)
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    res.add("load average at start", load1, "", f"{os.cpu_count()} CPUs")
    res.add("whole script wall time", time.perf_counter() - wall0, "s")
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
