"""Test-runner output (pytest, vitest, cargo test) over the project's current tests.

Failing tests are drawn from the tests that exist in the world at that moment,
and a failure points at the real line of the test block (and, for pytest, at
the real function in the module), so that the assistant's explanation, the next
edit and a later rerun all refer to the same place. Functions take the `_World`
and draw from its stream; they may generate a file on first use, as a read does,
but never edit one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compaction_lab.ingest.synthetic._project import _STATUSES, _Area, _area_ctx, _module_of, _test_title
from compaction_lab.ingest.synthetic._random import _b62, _camel, _fill, _hex, _pick
from compaction_lab.ingest.synthetic._world import _World

_PY_FAILS = (
    ("status", "AssertionError: assert '«got»' == '«want»'"),
    ("amount", "AssertionError: assert Decimal('«a»') == Decimal('«b»')"),
    ("none", "AttributeError: 'NoneType' object has no attribute '«attr»'"),
    ("key", "KeyError: '«attr»'"),
    ("kwarg", "TypeError: «fn»() got an unexpected keyword argument '«attr»'"),
    ("notfound", "«pkg».errors.«Noun»NotFound: «noun» «ref» not found"),
    (
        "integrity",
        'sqlalchemy.exc.IntegrityError: (psycopg.errors.UniqueViolation) duplicate key value violates unique constraint "uq_«table»_external_ref"',
    ),
)
_TS_FAILS = (
    ("status", "AssertionError: expected '«got»' to be '«want»' // Object.is equality"),
    ("calls", 'AssertionError: expected "spy" to be called «want_n» times, but got «k» times'),
    ("undef", "TypeError: Cannot read properties of undefined (reading '«attr»')"),
    ("length", "AssertionError: expected [ 'a', 'b' ] to have a length of «k» but got 2"),
)
_RS_FAILS = (
    ("eq", "assertion `left == right` failed\n  left: «a»\n right: «b»"),
    ("unwrap", "called `Result::unwrap()` on an `Err` value: Http(«code»)"),
    (
        "io",
        'called `Result::unwrap()` on an `Err` value: Io(Os { code: 2, kind: NotFound, message: "No such file or directory" })',
    ),
)


#: A substring of the test line that fails for each failure kind.
_FAIL_LINE_HINT = {
    "status": "result.status",
    "amount": "result.amount",
    "none": "result = ",
    "key": "result = ",
    "kwarg": "result = ",
    "notfound": "result = ",
    "integrity": "result = ",
    "calls": "toHaveBeenCalledTimes",
    "undef": "result.status",
    "length": "result.status",
    "eq": "assert_eq",
    "unwrap": "unwrap()",
    "io": "unwrap()",
}


@dataclass(frozen=True)
class _Failure:
    """What a failing test run reported, for the assistant's explanation of it."""

    area: _Area
    title: str
    fn: str
    kind: str
    short: str
    where: str  # path:line


def _fail_ctx(world: _World, area: _Area, fn: str) -> dict[str, Any]:
    """Template slots for a failure message about `fn` of `area` (got/want values, refs, counts)."""
    rng = world.rng
    got, want = rng.sample(_STATUSES, 2)
    return dict(
        _area_ctx(rng, world.project, area, fn),
        got=got,
        want=want,
        a=f"{rng.randint(1, 400)}.{rng.randint(0, 99):02d}",
        b=f"{rng.randint(1, 400)}.{rng.randint(0, 99):02d}",
        ref=f"{area.noun[:3]}_{_b62(rng, 14)}",
        pkg=world.theme.package + "." + area.name,
        k=rng.randint(3, 6),
        want_n=rng.randint(0, 2),
        code=_pick(rng, (404, 409, 429, 500, 502, 503)),
    )


def run_tests(world: _World, areas: Sequence[_Area], n_fail: int, style: str) -> tuple[str, list[_Failure]]:
    """Output of the project's test runner over `areas` with `n_fail` failing tests."""
    rng = world.rng
    for a in areas:
        world.file(a.test)  # make sure the test blocks exist
    all_tests = [(a, p) for a in areas for p in world.project.tests[a.name]]
    failing = rng.sample(all_tests, min(n_fail, len(all_tests)))
    failures: list[_Failure] = []
    lang = world.project.lang
    table = _PY_FAILS if lang == "python" else _TS_FAILS if lang == "typescript" else _RS_FAILS
    for a, (fn, cond) in failing:
        kind, tmpl = _pick(rng, table)
        ctx = _fail_ctx(world, a, fn)
        title = _test_title(world.project, fn, cond)
        tf = world.file(a.test)
        idx = tf.names.index(title) if title in tf.names else 1
        block = tf.blocks[idx]
        # The failing line is the assertion (or call) that matches the failure kind.
        hint = _FAIL_LINE_HINT.get(kind, "")
        cands = [k for k, ln in enumerate(block) if hint and hint in ln]
        line = tf.start_of(idx) + (cands[0] if cands else len(block) - rng.randint(2, 3))
        failures.append(
            _Failure(a, title, _camel(fn) if lang == "typescript" else fn, kind, _fill(tmpl, ctx), f"{a.test}:{line}")
        )
    if lang == "python":
        return _pytest(world, areas, all_tests, failures, style), failures
    if lang == "typescript":
        return _vitest(world, areas, failures, style), failures
    return _cargo_test(world, areas, failures), failures


def _pytest(world: _World, areas, all_tests, failures: list[_Failure], style: str) -> str:
    """Write pytest output in the ``-q``, default or ``-v`` style, with a FAILURES section when tests fail."""
    rng = world.rng
    n = len(all_tests)
    fail_titles = {f.title for f in failures}
    quiet = style == "q"
    # ``-q`` drops the session header and file names and prints bare progress dots.
    out = (
        []
        if quiet
        else [
            "============================= test session starts ==============================",
            f"platform linux -- Python {world.project.python}, pytest-8.1.1, pluggy-1.4.0",
            f"rootdir: {world.project.root}",
            "configfile: pyproject.toml",
            "plugins: anyio-4.3.0, cov-5.0.0, timeout-2.3.1, xdist-3.5.0",
            f"collected {n} items",
            "",
        ]
    )
    done = 0
    dots = ""
    for a in areas:
        titles = [_test_title(world.project, *p) for p in world.project.tests[a.name]]
        if style == "verbose":
            for t in titles:
                done += 1
                res = "FAILED" if t in fail_titles else "PASSED"
                out.append(f"{a.test}::{t} {res}".ljust(70) + f" [{100 * done // n:>3}%]")
        elif quiet:
            dots += "".join("F" if t in fail_titles else "." for t in titles)
        else:
            done += len(titles)
            marks = "".join("F" if t in fail_titles else "." for t in titles)
            out.append(f"{a.test} {marks}".ljust(70) + f" [{100 * done // n:>3}%]")
    for i in range(0, len(dots), 72):
        chunk = dots[i : i + 72]
        out.append(chunk.ljust(72) + f" [{100 * (i + len(chunk)) // n:>3}%]")
    if failures:
        if not quiet:
            out.append("")
        out.append("=================================== FAILURES ===================================")
        for f in failures:
            out += _py_failure_section(world, f)
        out.append("=========================== short test summary info ============================")
        out += [f"FAILED {f.area.test}::{f.title} - {f.short.splitlines()[0]}" for f in failures]
    secs = rng.uniform(0.4, 3.0) * max(1, n // 10)
    tail = (f"{len(failures)} failed, " if failures else "") + f"{n - len(failures)} passed in {secs:.2f}s"
    out.append(tail if quiet else f" {tail} ".center(80, "="))
    return "\n".join(out)


def _py_failure_section(world: _World, f: _Failure) -> list[str]:
    """One pytest failure report: the test source up to the failing line, then the frame in the module."""
    rng = world.rng
    tf = world.file(f.area.test)
    idx = tf.names.index(f.title) if f.title in tf.names else 1
    block = [ln for ln in tf.blocks[idx] if ln.strip()]
    start = tf.start_of(idx) + len(tf.blocks[idx]) - len(block)
    out = [f" {f.title} ".center(80, "_"), ""]
    k = max(0, min(len(block) - 1, int(f.where.rsplit(":", 1)[1]) - start))
    if f.kind in ("status", "amount"):
        for j, ln in enumerate(block[: k + 1]):
            out.append((">   " if j == k else "    ") + ln)
        out.append(f"E       {f.short}")
        if f.kind == "status":
            got, want = re.findall(r"'([^']*)'", f.short)[:2]
            out += ["E         ", f"E         - {want}", f"E         + {got}"]
        out += ["", f"{f.area.test}:{start + k}: AssertionError"]
        return out
    for j, ln in enumerate(block[: k + 1]):
        out.append((">   " if j == k else "    ") + ln)
    out += ["", f"{f.area.test}:{start + k}: ", "_ " * 39 + "_", ""]
    mod = _module_of(f.area, f.fn) if f.fn in f.area.funcs else f.area.modules[0]
    mf = world.file(mod)
    if f.fn in mf.names:
        j = mf.names.index(f.fn)
        body = [ln for ln in mf.blocks[j] if ln.strip()]
        mstart = mf.start_of(j) + len(mf.blocks[j]) - len(body)
        stop = min(len(body) - 1, rng.randint(2, 5))
        out += [
            f"self = <{mod[:-3].replace('/', '.')}.{f.area.cls} object at 0x7f{_hex(rng, 10)}>",
            f"{f.area.noun}_id = '{f.area.noun[:3]}_{_b62(rng, 14)}'",
            "",
        ]
        for jj, ln in enumerate(body[: stop + 1]):
            out.append((">   " if jj == stop else "    ") + ln[4:])
        out.append(f"E   {f.short.splitlines()[0]}")
        out += ["", f"{mod}:{mstart + stop}: {f.short.split(':', 1)[0].rsplit('.', 1)[-1]}"]
    else:
        out += [f"E   {f.short}", "", f"{mod}:{rng.randint(20, 200)}: {f.short.split(':', 1)[0]}"]
    if rng.random() < 0.5:
        out += [
            "------------------------------ Captured log call -------------------------------",
            f"ERROR    {mod[:-3].replace('/', '.')}:{mod.rsplit('/', 1)[-1]}:{rng.randint(20, 300)} {f.fn} failed for {f.area.noun} "
            f"{f.area.noun[:3]}_{_b62(rng, 14)}",
        ]
    return out


def _vitest(world: _World, areas, failures: list[_Failure], style: str) -> str:
    """Write vitest output: per-file lines, failed-test details with a code frame, and the summary."""
    rng = world.rng
    fail_by_file: dict[str, list[_Failure]] = {}
    for f in failures:
        fail_by_file.setdefault(f.area.test, []).append(f)
    out = [f" RUN  v1.5.0 {world.project.root}", ""]
    total = 0
    for a in areas:
        titles = [_test_title(world.project, *p) for p in world.project.tests[a.name]]
        total += len(titles)
        fs = fail_by_file.get(a.test, [])
        ms = rng.randint(5, 400)
        if fs:
            out.append(f" ❯ {a.test}  ({len(titles)} tests | {len(fs)} failed) {ms}ms")
        else:
            out.append(f" ✓ {a.test}  ({len(titles)} tests) {ms}ms")
        if style == "verbose" or fs:
            ft = {f.title for f in fs}
            for t in titles:
                if t in ft:
                    out.append(f"   × {a.cls} > {t} {rng.randint(1, 90)}ms")
                    out.append(f"     → {next(f for f in fs if f.title == t).short.splitlines()[0]}")
                elif style == "verbose":
                    out.append(f"   ✓ {a.cls} > {t} {rng.randint(0, 40)}ms")
    if failures:
        out += ["", f"⎯⎯⎯⎯⎯⎯⎯ Failed Tests {len(failures)} ⎯⎯⎯⎯⎯⎯⎯", ""]
        for i, f in enumerate(failures):
            tf = world.file(f.area.test)
            idx = tf.names.index(f.title) if f.title in tf.names else 1
            block = tf.blocks[idx]
            line = int(f.where.rsplit(":", 1)[1])
            col = rng.randint(10, 40)
            out += [f" FAIL  {f.area.test} > {f.area.cls} > {f.title}", f.short]
            if f.kind == "status":
                got, want = re.findall(r"'([^']*)'", f.short)[:2]
                out += ["", "- Expected", "+ Received", "", f"- {want}", f"+ {got}"]
            out += ["", f" ❯ {f.area.test}:{line}:{col}"]
            base = tf.start_of(idx)
            for k, ln in enumerate(block):
                num = base + k
                if abs(num - line) <= 2 and ln.strip():
                    out.append(f"    {num:>3}| {ln}")
                    if num == line:
                        out.append(f"       | {' ' * col}^")
            out += ["", "⎯" * 40 + f"[{i + 1}/{len(failures)}]⎯", ""]
    files_failed = len(fail_by_file)
    fl = f"{files_failed} failed | " if files_failed else ""
    tl = f"{len(failures)} failed | " if failures else ""
    out += [
        "",
        f" Test Files  {fl}{len(areas) - files_failed} passed ({len(areas)})",
        f"      Tests  {tl}{total - len(failures)} passed ({total})",
        f"   Start at  {rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        f"   Duration  {rng.uniform(0.8, 9):.2f}s (transform {rng.randint(80, 900)}ms, setup 0ms, collect "
        f"{rng.uniform(0.3, 4):.2f}s, tests {rng.randint(20, 900)}ms, environment {rng.uniform(0.2, 2):.2f}s, "
        f"prepare {rng.randint(90, 700)}ms)",
    ]
    return "\n".join(out)


def _cargo_test(world: _World, areas, failures: list[_Failure]) -> str:
    """``cargo test`` output; like cargo, it stops at the first failing test binary."""
    rng = world.rng
    ft = {f.title: f for f in failures}
    out = [
        f"   Compiling {world.project.name} v{world.project.version} ({world.project.root})",
        f"    Finished `test` profile [unoptimized + debuginfo] target(s) in {rng.uniform(1, 40):.2f}s",
    ]
    for a in areas:
        stem = a.test.rsplit("/", 1)[-1][:-3]
        titles = [_test_title(world.project, *p) for p in world.project.tests[a.name]]
        out += [
            f"     Running {a.test} (target/debug/deps/{stem}-{_hex(rng, 16)})",
            "",
            f"running {len(titles)} test{'s' if len(titles) != 1 else ''}",
        ]
        mine = [ft[t] for t in titles if t in ft]
        out += [f"test {t} ... {'FAILED' if t in ft else 'ok'}" for t in titles]
        if mine:
            out += ["", "failures:", ""]
            for f in mine:
                out += [
                    f"---- {f.title} stdout ----",
                    f"thread '{f.title}' panicked at {f.where}:{rng.randint(5, 9)}:",
                    f.short,
                    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
                    "",
                ]
            out += ["", "failures:"] + [f"    {f.title}" for f in mine] + [""]
        status = "FAILED" if mine else "ok"
        out += [
            f"test result: {status}. {len(titles) - len(mine)} passed; {len(mine)} failed; 0 ignored; "
            f"0 measured; 0 filtered out; finished in {rng.uniform(0.01, 2):.2f}s",
            "",
        ]
        if mine:
            out.append(f"error: test failed, to rerun pass `--test {stem}`")
            break
    return "\n".join(out).rstrip()
