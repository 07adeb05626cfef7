"""Import throughput and memory on a large multi-session Codex rollout (run by `make bench`).

Generates a seeded, deterministic Codex rollout JSONL of ``BENCH_IMPORT_MB``
MB (default 1024) in a temp dir, streamed to disk: many sessions back to back,
each opened by a ``session_meta`` line with a new id and a few MB long, with
realistic response items (messages, reasoning summaries with encrypted
content, shell / apply_patch calls and their outputs of heavy-tailed sizes:
source files, grep hits, test runs, logs, JSON) and ``event_msg`` lines
(user/agent message echoes, reasoning echoes, token counts).

Each measurement runs in a fresh subprocess, so its peak RSS is its own:

a. import only: ``for s in load_sessions(path, audit): pass``;
b. import + composition tally: ``composition.tally(path, scheduler="sync")``,
   i.e. ``compaction-lab tally --scheduler sync`` (in this process; the tally
   on the Dask engine is measured by ``bench_engine.py``);
c. raw tiktoken over the very same record texts, one
   ``encode_ordinary_batch`` per session (the import that collects them is
   not timed).

Targets:
- every generated session is imported and no line is skipped;
- the import alone reads >= 150 MB/s of file (wall time) at <= 64 MiB peak RSS
  (issue 30): memory is bounded by one session, not by the file;
- import+tally peak RSS < 25% of the file size (at least 256 MiB, so a small
  file is not judged on the interpreter's own footprint);
- import+tally sustains >= 0.8x the raw tokenizer's throughput over the same
  text bytes (text-MB/s vs text-MB/s, same run, same thread count).

Usage: ``python benchmarks/bench_import.py [--keep] [--dir DIR]``;
env ``BENCH_IMPORT_MB`` (file size), ``BENCH_IMPORT_SEED``,
``BENCH_IMPORT_THREADS`` (raw tokenizer threads; default: the library
counter's), ``BENCH_IMPORT_REPEAT`` (import, tally and raw alternate this many
times, the fastest of each kept, the import's highest peak RSS; default 2: the
first measurement after generating the file runs slow for reasons not yet
pinned down, see the closing note). ``--child MODE PATH`` is the internal
per-measurement entry point (also handy under ``python -m cProfile``).

Peak RSS is the child's ``VmHWM`` (`_common.own_peak_rss_mb`): on Linux
``ru_maxrss`` is carried across fork/exec, so a child's ``ru_maxrss`` is at
least the parent's RSS at spawn time and would not be per measurement (both
are in the child's JSON).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Results, own_peak_rss_mb, peak_rss_mb

MB = 1_000_000
DEFAULT_MB = 1024
DEFAULT_SEED = 20250914
RSS_SHARE = 0.25  # of the file size
RSS_FLOOR_MIB = 256.0
RATIO_TARGET = 0.8
IMPORT_MB_S_TARGET = 150.0  # file MB/s of the import alone (issue 30)
IMPORT_RSS_TARGET_MIB = 64.0  # its peak RSS: the interpreter (~25 MiB) and about one session


# =========================================================================== text pools
#
# Built once from a seeded rng: a few thousand lines of code, shell output,
# log lines, JSON and prose. Record texts are samples of many pool lines, so
# every text is different (the token counter's cache gets no free hits) while
# generation stays a handful of C-level calls per record.

_WORDS = """
the a to of and in is it that for on with as this be are by not or from at have an was can will
if we but all so one when which what there their they do more about out up time into than them
only some could would other then now these two may first any new like our also how should
file test function value error return config module request response cache index queue token
session worker client server schema column table query batch retry timeout handler parser
update fix add remove check run build install import export load save read write parse format
because however instead already still probably actually likely since while before after until
missing broken failing passing slow fast large small empty invalid valid stale default explicit
refund ledger invoice payment account customer order shipment inventory price currency amount
user admin tenant role permission token secret key hash digest signature certificate
""".split()

_ACCENTED = [
    "café",
    "naïve",
    "façade",
    "Zürich",
    "résumé",
    "Ærø",
    "São Paulo",
    "Kraków",
    "“quoted”",
    "—",
    "…",
    "東京",
    "数据",
    "überprüfen",
    "señal",
    "→",
    "✓",
    "🚀",
    "ℹ️",
    "±0.5",
]

_STEMS = """
user order invoice item cart price tax total amount ledger account payment refund export import
row col cell sheet report chart series frame index key value cache store db conn pool session
token auth login perm role group team org tenant config settings env flag option param arg
request response handler route view model schema field record entry event queue job task worker
retry backoff timeout deadline limit rate window buffer stream reader writer parser lexer node
tree graph edge path file dir mount volume image layer build deploy release version tag commit
""".split()

_EXTS = ["py", "py", "py", "ts", "tsx", "js", "rs", "go", "json", "yaml", "toml", "md", "sql", "sh", "txt"]
_TOP_DIRS = ["src", "lib", "app", "tests", "pkg", "internal", "cmd", "scripts", "docs", "web", "api", "core"]
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


class Pools:
    """Seeded pools of text lines by genre, and helpers to sample texts of a target size."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        r = rng
        self.idents = sorted({self._ident(r) for _ in range(3000)})
        self.pascal = sorted({"".join(p.capitalize() for p in r.sample(_STEMS, r.randint(1, 3))) for _ in range(800)})
        self.paths = sorted({self._path(r) for _ in range(1500)})
        self.words = _WORDS * 6 + self.idents[:300] + _ACCENTED  # mostly plain English words
        self.sentences = [self._sentence(r) for _ in range(5000)]
        self.code = [self._code_line(r) for _ in range(6000)]
        self.shell = {
            "ls": [self._ls_line(r) for _ in range(1500)],
            "grep": [f"{r.choice(self.paths)}:{r.randint(1, 2400)}:{r.choice(self.code).strip()}" for _ in range(2500)],
            "pytest": [self._pytest_line(r) for _ in range(2000)],
            "log": [self._log_line(r) for _ in range(3000)],
            "git": [self._git_line(r) for _ in range(2000)],
            "build": [self._build_line(r) for _ in range(2000)],
        }
        self.json_docs = [json.dumps(self._json_obj(r, 0), indent=2, ensure_ascii=False) for _ in range(1200)]
        self.b64 = [base64.b64encode(r.randbytes(r.randint(600, 4800))).decode() for _ in range(300)]
        self.system_prompt = "\n".join(r.choices(self.sentences, k=110))

    # ------------------------------------------------------------------ building blocks

    @staticmethod
    def _ident(r: random.Random) -> str:
        parts = r.sample(_STEMS, r.randint(1, 3))
        style = r.random()
        if style < 0.6:
            return "_".join(parts)
        if style < 0.85:
            return parts[0] + "".join(p.capitalize() for p in parts[1:])
        return "_".join(parts) + str(r.randint(0, 99))

    def _path(self, r: random.Random) -> str:
        depth = r.randint(1, 4)
        dirs = [r.choice(_TOP_DIRS)] + [r.choice(_STEMS) for _ in range(depth - 1)]
        return "/".join(dirs) + f"/{r.choice(self.idents) if hasattr(self, 'idents') else 'mod'}.{r.choice(_EXTS)}"

    def _sentence(self, r: random.Random) -> str:
        n = r.randint(6, 28)
        words = r.choices(self.words, k=n)
        roll = r.random()
        if roll < 0.25:
            words.insert(r.randrange(n), f"`{r.choice(self.idents)}`")
        elif roll < 0.4:
            words.insert(r.randrange(n), r.choice(self.paths))
        elif roll < 0.55:
            words.insert(
                r.randrange(n), str(r.choice([r.randint(0, 999), r.randint(1000, 10**7), round(r.random() * 100, 2)]))
            )
        s = " ".join(words)
        return s[0].upper() + s[1:] + r.choice([".", ".", ".", "?", ":", "!"])

    def _code_line(self, r: random.Random) -> str:
        ind = " " * (4 * r.choice([0, 1, 1, 2, 2, 2, 3, 4]))
        a, b, c = r.choice(self.idents), r.choice(self.idents), r.choice(self.idents)
        P = r.choice(self.pascal)
        n = r.choice([0, 1, 2, 10, 100, 255, 1024, 3600, r.randint(0, 99999)])
        w = r.choice(_WORDS)
        templates = (
            f"{ind}def {a}(self, {b}: {P} | None = None, *, {c}: int = {n}) -> list[{P}]:",
            f"{ind}return {a}.{b}({c}, timeout={n}) or []",
            f"{ind}if {a} is None or len({b}) > {n}:",
            f'{ind}{a} = {{"{b}": {n}, "{c}": "{w}", "enabled": {r.choice(["True", "False"])}}}',
            f'{ind}raise ValueError(f"{w} {c} is invalid: {{{a}!r}}")',
            f"{ind}# {r.choice(self.sentences) if hasattr(self, 'sentences') else w}",
            f"from {a.replace('_', '.')} import {P}, {b}",
            f"{ind}const {a} = await {b}.{c}({n}, {{ retries: {r.randint(0, 9)}, label: '{w}' }});",
            f"{ind}for (let i = 0; i < {a}.length; i += {r.randint(1, 8)}) {{",
            f"{ind}let {a}: Vec<{P}> = {b}.iter().filter(|x| x.{c} > {n}).cloned().collect();",
            f'{ind}if err := {a}.{P}(ctx, {b}); err != nil {{ return fmt.Errorf("{w}: %w", err) }}',
            f"{ind}self.{a}[{b}] = self.{c}.get({b}, {n}) + {r.randint(1, 50)}",
            f'{ind}assert {a}({b}) == {n}, "{w} {c}"',
            f'{ind}logger.{r.choice(["debug", "info", "warning"])}("%s {w} %d", {a}, {n})',
            f"{ind}}}",
            "",
            f"class {P}({r.choice(self.pascal)}):",
            f"{ind}@{r.choice(['property', 'staticmethod', 'pytest.fixture', 'lru_cache(maxsize=' + str(n) + ')'])}",
            f"{ind}SELECT {a}, {b}, SUM({c}) FROM {r.choice(_STEMS)}s WHERE {a} > {n} GROUP BY {a};",
        )
        return r.choice(templates)

    def _ls_line(self, r: random.Random) -> str:
        perm = r.choice(["-rw-r--r--", "-rwxr-xr-x", "drwxr-xr-x", "-rw-------", "lrwxrwxrwx"])
        return (
            f"{perm} {r.randint(1, 12):>2} dev  dev  {r.randint(0, 9_999_999):>8} {r.choice(_MONTHS)} "
            f"{r.randint(1, 28):>2} {r.randint(0, 23):02d}:{r.randint(0, 59):02d} {r.choice(self.paths).rsplit('/', 1)[-1]}"
        )

    def _pytest_line(self, r: random.Random) -> str:
        p, t = r.choice(self.paths), r.choice(self.idents)
        roll = r.random()
        if roll < 0.55:
            return f"{p}::test_{t} {r.choice(['PASSED', 'PASSED', 'PASSED', 'FAILED', 'SKIPPED'])} [{r.randint(0, 100):>3}%]"
        if roll < 0.7:
            return f"E       AssertionError: assert {r.randint(0, 999)} == {r.randint(0, 999)}"
        if roll < 0.8:
            return f"E        +  where {r.randint(0, 99)} = {t}({r.choice(self.idents)}=[{r.randint(0, 9)}, {r.randint(0, 9)}])"
        if roll < 0.92:
            return f'  File "/home/dev/{p}", line {r.randint(1, 900)}, in {t}'
        return f"{'=' * r.randint(10, 30)} {r.randint(1, 40)} failed, {r.randint(1, 900)} passed in {r.random() * 90:.2f}s {'=' * r.randint(10, 30)}"

    def _log_line(self, r: random.Random) -> str:
        lvl = r.choice(["INFO ", "INFO ", "DEBUG", "WARN ", "ERROR"])
        return (
            f"2025-09-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}."
            f"{r.randint(0, 999):03d}Z {lvl} [{r.choice(self.idents)}] {r.choice(self.sentences)} "
            f"id={r.getrandbits(64):016x} took={r.randint(0, 5000)}ms"
        )

    def _git_line(self, r: random.Random) -> str:
        roll = r.random()
        if roll < 0.3:
            return f"{r.getrandbits(28):07x} {r.choice(self.sentences)}"
        if roll < 0.45:
            return f"@@ -{r.randint(1, 900)},{r.randint(1, 40)} +{r.randint(1, 900)},{r.randint(1, 40)} @@ def {r.choice(self.idents)}("
        if roll < 0.55:
            return f"diff --git a/{(p := r.choice(self.paths))} b/{p}"
        return r.choice("+- ") + r.choice(self.code)

    def _build_line(self, r: random.Random) -> str:
        roll = r.random()
        if roll < 0.3:
            return f"   Compiling {r.choice(self.idents).replace('_', '-')} v{r.randint(0, 3)}.{r.randint(0, 40)}.{r.randint(0, 20)}"
        if roll < 0.6:
            return (
                f"{r.choice(self.paths)}:{r.randint(1, 900)}:{r.randint(1, 80)}: {r.choice(['warning', 'error', 'note'])}: "
                f"{r.choice(['unused variable', 'cannot find name', 'mismatched types for', 'missing field'])} `{r.choice(self.idents)}`"
            )
        if roll < 0.8:
            return f"{r.randint(0, 99999)}\t{r.choice(self.paths)}"
        return f"npm WARN deprecated {r.choice(self.idents)}@{r.randint(0, 9)}.{r.randint(0, 20)}.{r.randint(0, 9)}: {r.choice(self.sentences)}"

    def _json_obj(self, r: random.Random, depth: int):
        obj = {}
        for _ in range(r.randint(2, 9 if depth == 0 else 5)):
            k = r.choice(self.idents)
            roll = r.random()
            if roll < 0.25 and depth < 3:
                obj[k] = self._json_obj(r, depth + 1)
            elif roll < 0.35 and depth < 3:
                obj[k] = [
                    self._json_obj(r, depth + 1) if r.random() < 0.5 else r.randint(0, 10**6)
                    for _ in range(r.randint(1, 4))
                ]
            elif roll < 0.55:
                obj[k] = r.choice([r.randint(-100, 10**9), round(r.uniform(-1e4, 1e4), 4), None, True, False])
            elif roll < 0.7:
                obj[k] = r.choice(self.paths)
            elif roll < 0.8:
                obj[k] = f"{r.getrandbits(128):032x}"
            else:
                obj[k] = r.choice(self.sentences)
        return obj

    # ------------------------------------------------------------------ sampled texts

    def lines(self, pool: list[str], nbytes: int, avg: float) -> str:
        return "\n".join(self.rng.choices(pool, k=max(1, int(nbytes / avg))))

    def prose(self, nbytes: int) -> str:
        r = self.rng
        out, size = [], 0
        while size < nbytes:
            para = " ".join(r.choices(self.sentences, k=r.randint(1, 5)))
            if r.random() < 0.25:
                para = "\n".join("- " + s for s in r.choices(self.sentences, k=r.randint(2, 6)))
            elif r.random() < 0.1:
                para = "```\n" + "\n".join(r.choices(self.code, k=r.randint(2, 12))) + "\n```"
            out.append(para)
            size += len(para) + 2
        return "\n\n".join(out)

    def json_text(self, nbytes: int) -> str:
        k = max(1, int(nbytes / self._json_avg))
        docs = self.rng.choices(self.json_docs, k=k)
        return docs[0] if k == 1 else "[\n" + ",\n".join(docs) + "\n]"

    def finish(self) -> Pools:
        avg = lambda pool: sum(map(len, pool)) / len(pool) + 1
        self._avg = {name: avg(pool) for name, pool in self.shell.items()}
        self._avg["code"] = avg(self.code)
        self._json_avg = avg(self.json_docs) + 1
        return self


def heavy_tail(r: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    """A log-normal size (median, sigma), clipped to [lo, hi]."""
    return int(min(hi, max(lo, r.lognormvariate(0.0, sigma) * median)))


# =========================================================================== rollout writer


class RolloutWriter:
    """Writes Codex rollout lines (compact JSON, serde field order) and counts what it wrote.

    ``pools`` may be None for a writer that only calls `emit`/`item` (bench_engine's); `session` needs them.
    """

    def __init__(self, f, pools: Pools | None, rng: random.Random):
        self.f, self._pools, self.r = f, pools, rng
        self.bytes = 0
        self.lines = 0
        self.t = 1757840000.0  # 2025-09-14, advanced per line
        self.dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    @property
    def p(self) -> Pools:
        """Return the text pools (the session pieces draw from them)."""
        assert self._pools is not None, "this writer was built without pools: only emit/item work"
        return self._pools

    def _ts(self) -> str:
        self.t += self.r.random() * 3
        s = time.gmtime(self.t)
        return f"{s.tm_year}-{s.tm_mon:02d}-{s.tm_mday:02d}T{s.tm_hour:02d}:{s.tm_min:02d}:{s.tm_sec:02d}.{int(self.t * 1000) % 1000:03d}Z"

    def emit(self, type_: str, payload: dict) -> None:
        line = self.dumps({"timestamp": self._ts(), "type": type_, "payload": payload}) + "\n"
        data = line.encode("utf-8")
        self.f.write(data)
        self.bytes += len(data)
        self.lines += 1

    def item(self, payload: dict) -> None:
        self.emit("response_item", payload)

    # ------------------------------------------------------------------ session pieces

    def session(self, sid: str, target_bytes: int) -> None:
        p, r = self.p, self.r
        start = self.bytes
        cwd = f"/home/dev/{r.choice(p.idents).replace('_', '-')}"
        self.emit(
            "session_meta",
            {
                "id": sid,
                "timestamp": self._ts(),
                "cwd": cwd,
                "originator": "codex_cli_rs",
                "cli_version": f"0.{r.randint(38, 50)}.0",
                "instructions": r.choice(p.sentences),
                "source": "cli",
                "model_provider": "openai",
                "base_instructions": {"text": p.system_prompt},
                "git": {
                    "commit_hash": f"{r.getrandbits(28):07x}",
                    "branch": "main",
                    "repository_url": f"git@example.com:dev/{cwd.rsplit('/', 1)[-1]}.git",
                },
            },
        )
        self.item(
            {
                "type": "message",
                "role": "developer",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<permissions instructions>Filesystem: workspace-write. Network: disabled. "
                        "Ask before running commands outside the workspace.</permissions instructions>",
                    }
                ],
            }
        )
        agents = "\n".join(r.choices(p.sentences, k=r.randint(5, 40)))
        self.item(
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": f"# AGENTS.md instructions for {cwd}\n\n<INSTRUCTIONS>\n{agents}\n</INSTRUCTIONS>",
                    }
                ],
            }
        )
        self.item(
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
                        "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
                        "  <shell>bash</shell>\n</environment_context>",
                    }
                ],
            }
        )
        model = r.choice(["gpt-5-codex", "gpt-5", "gpt-5.1-codex"])
        total = {
            "input_tokens": 0,
            "cached_input_tokens": 0,
            "output_tokens": 0,
            "reasoning_output_tokens": 0,
            "total_tokens": 0,
        }
        n_call = 0
        turn = 0
        while self.bytes - start < target_bytes:
            turn += 1
            self.emit(
                "turn_context",
                {
                    "cwd": cwd,
                    "approval_policy": "on-request",
                    "sandbox_policy": {"mode": "workspace-write", "network_access": False},
                    "model": model,
                    "effort": r.choice(["medium", "high"]),
                    "summary": "auto",
                },
            )
            ask = p.prose(heavy_tail(r, 300, 1.0, 20, 20_000))
            self.item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": ask}]})
            self.emit("event_msg", {"type": "user_message", "message": ask, "kind": "plain"})
            self.emit("event_msg", {"type": "token_count", "info": None, "rate_limits": self._limits()})
            for _ in range(r.randint(2, 14)):
                self._reasoning()
                n_call += 1
                self._tool_step(f"call_{sid[-8:]}_{n_call:04d}", cwd)
                self._token_count(total)
                if self.bytes - start >= target_bytes:
                    break
            if r.random() < 0.03:
                self.emit(
                    "compacted",
                    {
                        "message": p.prose(heavy_tail(r, 2500, 0.6, 400, 20_000)),
                        "replacement_history": [
                            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ask[:300]}]}
                        ],
                    },
                )
                self.emit("event_msg", {"type": "context_compacted"})
            answer = p.prose(heavy_tail(r, 600, 1.0, 40, 30_000))
            self.item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]})
            self.emit("event_msg", {"type": "agent_message", "message": answer})
            self._token_count(total)

    def _limits(self) -> dict:
        r = self.r
        return {
            "primary": {"used_percent": round(r.random() * 90, 1), "window_minutes": 300},
            "secondary": {"used_percent": round(r.random() * 50, 1), "window_minutes": 10080},
        }

    def _token_count(self, total: dict) -> None:
        r = self.r
        last = {"input_tokens": r.randint(2000, 200_000), "output_tokens": r.randint(10, 4000)}
        last["cached_input_tokens"] = int(last["input_tokens"] * r.random())
        last["reasoning_output_tokens"] = int(last["output_tokens"] * r.random())
        last["total_tokens"] = last["input_tokens"] + last["output_tokens"]
        for k in total:
            total[k] += last[k]
        info = {"total_token_usage": dict(total), "last_token_usage": last, "model_context_window": 272000}
        self.emit("event_msg", {"type": "token_count", "info": info, "rate_limits": self._limits()})

    def _reasoning(self) -> None:
        p, r = self.p, self.r
        summary = []
        if r.random() < 0.8:
            title = " ".join(r.choices(_WORDS, k=r.randint(2, 5))).capitalize()
            body = p.prose(heavy_tail(r, 350, 0.8, 40, 8000))
            summary = [{"type": "summary_text", "text": f"**{title}**\n\n{body}"}]
            self.emit("event_msg", {"type": "agent_reasoning", "text": summary[0]["text"]})
        self.item(
            {"type": "reasoning", "summary": summary, "content": None, "encrypted_content": "gAAAAA" + r.choice(p.b64)}
        )

    def _tool_step(self, call_id: str, cwd: str) -> None:
        p, r = self.p, self.r
        roll = r.random()
        size = heavy_tail(r, 1500, 1.5, 30, 256_000)
        path = r.choice(p.paths)
        if roll < 0.12:  # apply_patch edit
            body = "\n".join(
                r.choice("+- ") + line for line in r.choices(p.code, k=max(2, heavy_tail(r, 25, 1.0, 2, 1500)))
            )
            patch = f"*** Begin Patch\n*** Update File: {path}\n@@ def {r.choice(p.idents)}(\n{body}\n*** End Patch\n"
            self.item(
                {
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": call_id,
                    "name": "apply_patch",
                    "input": patch,
                }
            )
            self._output("custom_tool_call_output", call_id, f"Success. Updated the following files:\nM {path}\n", 0)
            return
        if roll < 0.40:
            cmd, text = f"sed -n '1,{r.randint(80, 900)}p' {path}", p.lines(p.code, size, p._avg["code"])
        elif roll < 0.55:
            cmd, text = (
                f"rg -n '{r.choice(p.idents)}' {r.choice(_TOP_DIRS)}",
                p.lines(p.shell["grep"], size, p._avg["grep"]),
            )
        elif roll < 0.67:
            cmd, text = f"pytest -q {path} -x", p.lines(p.shell["pytest"], size, p._avg["pytest"])
        elif roll < 0.75:
            cmd, text = f"ls -la {path.rsplit('/', 1)[0]}", p.lines(p.shell["ls"], size, p._avg["ls"])
        elif roll < 0.83:
            cmd, text = f"git log -p -n {r.randint(1, 20)} -- {path}", p.lines(p.shell["git"], size, p._avg["git"])
        elif roll < 0.90:
            cmd, text = (
                f"tail -n {r.randint(50, 2000)} logs/{r.choice(p.idents)}.log",
                p.lines(p.shell["log"], size, p._avg["log"]),
            )
        elif roll < 0.95:
            cmd, text = f"curl -s localhost:{r.randint(3000, 9000)}/api/{r.choice(p.idents)} | jq .", p.json_text(size)
        else:
            cmd, text = (
                f"cargo build 2>&1 | tail -n {r.randint(20, 400)}",
                p.lines(p.shell["build"], size, p._avg["build"]),
            )
        if r.random() < 0.85:
            args = {"command": ["bash", "-lc", cmd], "workdir": cwd, "timeout_ms": r.choice([10000, 60000, 120000])}
            self.item({"type": "function_call", "name": "shell", "arguments": self.dumps(args), "call_id": call_id})
        else:
            args = {"command": cmd, "workdir": cwd}
            self.item(
                {"type": "function_call", "name": "shell_command", "arguments": self.dumps(args), "call_id": call_id}
            )
        self._output("function_call_output", call_id, text, 0 if r.random() < 0.85 else r.choice([1, 2, 101, 127]))

    def _output(self, ptype: str, call_id: str, text: str, code: int) -> None:
        r = self.r
        if r.random() < 0.5:  # older Codex: a JSON string {"output", "metadata"}
            out = self.dumps(
                {"output": text, "metadata": {"exit_code": code, "duration_seconds": round(r.random() * 9, 1)}}
            )
        else:  # newer Codex: plain text with an "Exit code" header
            out = f"Exit code: {code}\nWall time: {r.random() * 9:.1f} seconds\nOutput:\n{text}"
        self.item({"type": ptype, "call_id": call_id, "output": out})


def generate(path: Path, target_mb: float, seed: int) -> dict:
    """Write the rollout file; returns what was generated (sessions, bytes, largest session)."""
    from tqdm import tqdm

    rng = random.Random(seed)
    t0 = time.perf_counter()
    pools = Pools(rng).finish()
    print(f"  text pools built in {time.perf_counter() - t0:.1f} s", flush=True)
    target = int(target_mb * MB)
    ids, largest = [], 0
    with (
        open(path, "wb", buffering=8 << 20) as f,
        tqdm(total=target, unit="B", unit_scale=True, desc="generate", mininterval=1.0) as bar,
    ):
        w = RolloutWriter(f, pools, rng)
        while w.bytes < target:
            before = w.bytes
            sid = f"0199{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-7{rng.getrandbits(12):03x}-8{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
            ids.append(sid)
            session_mb = min(8.0, max(1.0, rng.lognormvariate(0.0, 0.5) * 3.0))
            w.session(sid, min(int(session_mb * MB), max(target - w.bytes, 200_000)))
            largest = max(largest, w.bytes - before)
            bar.update(w.bytes - before)
    assert len(set(ids)) == len(ids)
    return {
        "path": str(path),
        "seed": seed,
        "target_mb": target_mb,
        "bytes": w.bytes,
        "lines": w.lines,
        "sessions": len(ids),
        "largest_session_bytes": largest,
        "seconds": time.perf_counter() - t0,
    }


# =========================================================================== children


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children (the tally's tokenizer worker)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child(mode: str, path: str) -> dict:
    """One measurement in this (fresh) process; returns a JSON-able dict."""
    from compaction_lab.core.session import CONTEXT_KINDS
    from compaction_lab.ingest import ImportAudit, load_sessions

    out: dict = {"mode": mode}
    if mode == "import":
        audit = ImportAudit()
        base = own_peak_rss_mb()
        c0, t0 = cpu_seconds(), time.perf_counter()
        for _ in load_sessions(path, audit):
            pass
        out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, cpu_seconds() - c0
    elif mode == "tally":
        from compaction_lab.core.tokens import counter
        from compaction_lab.tally import composition

        counter().count("warm up")  # load the encoding before timing
        base = own_peak_rss_mb()
        c0, t0 = cpu_seconds(), time.perf_counter()
        # `compaction-lab tally --scheduler sync`: the tally's own code path, in this process
        # (bench_engine.py measures it on the Dask engine).
        result = composition.tally(path, scheduler="sync")
        out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, cpu_seconds() - c0
        audit = result.audit
        out["tokens"] = int(result.table["tokens"].sum())
        # Any child process the tally spawned (none in-process): its ru_maxrss is its own.
        out["worker_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    elif mode == "raw":
        from compaction_lab.core.tokens import TokenCounter, get_encoding

        enc = get_encoding()
        threads = int(os.environ.get("BENCH_IMPORT_THREADS") or TokenCounter().threads)
        enc.encode_ordinary("warm up")
        audit = ImportAudit()
        base = own_peak_rss_mb()
        seconds, cpu, text_bytes, tokens, texts_n = 0.0, 0.0, 0, 0, 0
        for s in load_sessions(path, audit):  # untimed: only the tokenizer is measured
            texts = [r.text for r in s.records if r.kind in CONTEXT_KINDS]
            text_bytes += sum(len(t.encode("utf-8")) for t in texts)
            texts_n += len(texts)
            c0, t0 = cpu_seconds(), time.perf_counter()
            encoded = enc.encode_ordinary_batch(texts, num_threads=threads)
            seconds += time.perf_counter() - t0
            cpu += cpu_seconds() - c0
            tokens += sum(map(len, encoded))
            del encoded
        out.update(
            seconds=seconds, cpu_seconds=cpu, text_bytes=text_bytes, tokens=tokens, texts=texts_n, threads=threads
        )
    else:
        raise SystemExit(f"unknown child mode {mode!r}")
    out.update(
        sessions=audit.sessions,
        records=audit.records,
        skipped=audit.n_skipped,
        reasons=dict(audit.reasons),
        baseline_rss_mib=base,
        peak_rss_mib=own_peak_rss_mb(),
        ru_maxrss_mib=peak_rss_mb(),
    )
    return out


def run_child(mode: str, path: Path) -> dict:
    print(f"  [{mode}] fresh subprocess ...", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {mode} failed with exit code {proc.returncode}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"  [{mode}] {res['seconds']:.1f} s timed ({time.perf_counter() - t0:.1f} s wall), "
        f"peak RSS {res['peak_rss_mib']:.0f} MiB",
        flush=True,
    )
    return res


# =========================================================================== main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the generated file (and print its path)")
    ap.add_argument("--dir", help="folder for the generated file (default: a new temp dir)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0

    wall0 = time.perf_counter()
    size_mb = float(os.environ.get("BENCH_IMPORT_MB") or DEFAULT_MB)
    seed = int(os.environ.get("BENCH_IMPORT_SEED") or DEFAULT_SEED)
    repeat = max(1, int(os.environ.get("BENCH_IMPORT_REPEAT") or 2))
    load1 = os.getloadavg()[0]
    if load1 > 0.5:
        print(
            f"note: load average {load1:.2f} before starting; other work on this machine skews throughput", flush=True
        )
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="bench_import_"))
    workdir.mkdir(parents=True, exist_ok=True)
    free_mb = shutil.disk_usage(workdir).free / MB
    if free_mb < size_mb * 1.2:
        print(f"not enough disk in {workdir}: {free_mb:.0f} MB free, {size_mb:.0f} MB needed", file=sys.stderr)
        return 2
    path = workdir / f"rollout-bench-{int(size_mb)}MB-seed{seed}.jsonl"
    res = Results("import")
    try:
        print(f"generating a {size_mb:.0f} MB Codex rollout (seed {seed}) at {path}", flush=True)
        gen = generate(path, size_mb, seed)
        file_mb = gen["bytes"] / MB
        print(
            f"  {file_mb:.1f} MB, {gen['lines']:,} lines, {gen['sessions']} sessions "
            f"(largest {gen['largest_session_bytes'] / MB:.1f} MB) in {gen['seconds']:.1f} s "
            f"({file_mb / gen['seconds']:.0f} MB/s)",
            flush=True,
        )

        # Flush the new file's dirty pages first: otherwise the kernel writes them back
        # during the first measurement and steals its CPU (seen: tally 13.6 s, then 8.1 s).
        t_sync = time.perf_counter()
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
        print(f"  flushed to disk in {time.perf_counter() - t_sync:.1f} s", flush=True)
        print("measuring, each in a fresh subprocess:", flush=True)
        # import, tally and raw alternate, the fastest of each kept: all see the same machine noise
        imp = tal = raw = None
        imp_peak = 0.0
        for _i in range(repeat):
            i, t, r = run_child("import", path), run_child("tally", path), run_child("raw", path)
            imp = i if imp is None or i["seconds"] < imp["seconds"] else imp
            imp_peak = max(imp_peak, i["peak_rss_mib"])  # memory is judged on every run, not the fastest
            tal = t if tal is None or t["seconds"] < tal["seconds"] else tal
            raw = r if raw is None or r["seconds"] < raw["seconds"] else raw
        assert imp is not None and tal is not None and raw is not None  # repeat >= 1, so the loop ran

        rss_target = max(RSS_SHARE * gen["bytes"] / 2**20, RSS_FLOOR_MIB)
        rss_label = f"< {rss_target:.0f} MiB (25% of file, min {RSS_FLOOR_MIB:.0f})"
        text_mb = raw["text_bytes"] / MB

        res.add(
            "generated file",
            file_mb,
            "MB",
            f"{gen['sessions']} sessions, largest {gen['largest_session_bytes'] / MB:.1f} MB",
        )
        res.add("generation speed", file_mb / gen["seconds"], "MB/s")
        res.add(
            "text bytes per file byte", raw["text_bytes"] / gen["bytes"], "ratio", f"{text_mb:.0f} MB of record text"
        )
        for name, r in (("import", imp), ("import+tally", tal), ("raw tokenizer (import untimed)", raw)):
            ok = r["sessions"] == gen["sessions"] and r["skipped"] == 0
            res.add(
                f"{name}: sessions imported",
                r["sessions"],
                "",
                f"== {gen['sessions']}, 0 skipped" + ("" if r["skipped"] == 0 else f" (skipped {r['reasons']})"),
                ok,
            )

        imp_rate = file_mb / imp["seconds"]
        res.add(
            "import throughput",
            imp_rate,
            "MB/s",
            f">= {IMPORT_MB_S_TARGET:.0f} file MB/s ({imp['seconds']:.1f} s, {imp['cpu_seconds']:.1f} CPU-s)",
            imp_rate >= IMPORT_MB_S_TARGET,
        )
        res.add(
            "import peak RSS",
            imp_peak,
            "MiB",
            f"<= {IMPORT_RSS_TARGET_MIB:.0f} MiB (highest of {repeat})",
            imp_peak <= IMPORT_RSS_TARGET_MIB,
        )
        res.add("  (baseline before reading)", imp["baseline_rss_mib"], "MiB")

        tal_rate, raw_rate = text_mb / tal["seconds"], text_mb / raw["seconds"]
        res.add(
            "import+tally throughput",
            tal_rate,
            "text-MB/s",
            f"{file_mb / tal['seconds']:.1f} file-MB/s ({tal['seconds']:.1f} s)",
        )
        res.add(
            "raw tiktoken throughput",
            raw_rate,
            "text-MB/s",
            f"encode_ordinary_batch, {raw['threads']} threads ({raw['seconds']:.1f} s)",
        )
        ratio = tal_rate / raw_rate
        res.add("import+tally / raw tokenizer", ratio, "x", f">= {RATIO_TARGET}x (wall time)", ratio >= RATIO_TARGET)
        res.add(
            "  same, by CPU time",
            raw["cpu_seconds"] / tal["cpu_seconds"],
            "x",
            f"tally {tal['cpu_seconds']:.1f} CPU-s (import alone {imp['cpu_seconds']:.1f}), raw {raw['cpu_seconds']:.1f} CPU-s",
        )
        res.add("tally peak RSS", tal["peak_rss_mib"], "MiB", rss_label, tal["peak_rss_mib"] < rss_target)
        res.add("  (baseline before reading)", tal["baseline_rss_mib"], "MiB")
        res.add(
            "tokens counted (tally == raw)",
            tal["tokens"],
            "tokens",
            f"raw: {raw['tokens']}",
            tal["tokens"] == raw["tokens"],
        )
        res.add(
            "tally tokenizer-worker peak RSS",
            tal.get("worker_peak_rss_mib", 0),
            "MiB",
            rss_label,
            tal.get("worker_peak_rss_mib", 0) < rss_target,
        )
        res.add("raw tokenizer peak RSS", raw["peak_rss_mib"], "MiB")
        res.add("load average at start", load1, "", f"{os.cpu_count()} CPUs; import/tally/raw best of {repeat}")
    finally:
        if args.keep:
            print(f"kept {path}")
        else:
            path.unlink(missing_ok=True)
            if not args.dir:
                shutil.rmtree(workdir, ignore_errors=True)
    res.add("whole script wall time", time.perf_counter() - wall0, "s")
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
