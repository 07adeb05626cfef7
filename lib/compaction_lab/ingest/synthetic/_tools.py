"""Tool output other than test runs: linters, builds, HTTP/JSON, logs, tracebacks, scripts.

Each function renders what a real tool prints for the project in a `_World`
(paths, names, language) and draws sizes from heavy-tailed distributions, so
most outputs are short and a few are very long, as in real sessions. They read
the world and draw from its stream; they may generate a file on first use, as a
read does, but never edit one or touch the git history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from compaction_lab.ingest.synthetic._project import (
    _ATTRS,
    _BIRDS,
    _CURRENCIES,
    _FIRST,
    _LAST,
    _STATUSES,
    _Area,
    _area_ctx,
    _module_of,
)
from compaction_lab.ingest.synthetic._random import _BASE_TIME, _UPPER, _b62, _camel, _fill, _heavy, _hex, _pick, _tok
from compaction_lab.ingest.synthetic._world import _World

# Linters, type checkers, builds.


def _code_paths(world: _World) -> list[str]:
    """Source files a linter or type checker would look at."""
    return [p for p in world.paths if p.endswith((".py", ".ts", ".tsx", ".rs"))]


def lint(world: _World, tool: str, n_err: int) -> str:
    """Output of a linter / type checker with `n_err` findings."""
    rng = world.rng
    paths = _code_paths(world)
    finds = []
    for _ in range(n_err):
        p = _pick(rng, paths)
        nlines = len(world.file(p).lines())
        finds.append((p, rng.randint(1, max(1, nlines)), rng.randint(1, 60)))
    finds.sort()
    if tool == "ruff":
        if not finds:
            return "All checks passed!"
        msgs: tuple[str, ...] = (
            "F401 [*] `«attr»` imported but unused",
            "E501 Line too long («k» > 100)",
            "F841 Local variable `«noun»` is assigned to but never used",
            "I001 [*] Import block is un-sorted or un-formatted",
            "B904 Within an `except` clause, raise exceptions with `raise ... from err`",
            "UP007 [*] Use `X | Y` for type annotations",
            "SIM108 Use ternary operator instead of `if`-`else`-block",
        )
        out = [
            f"{p}:{ln}:{c}: {_fill(_pick(rng, msgs), {'attr': _pick(rng, ('itertools', 'time', 'field', 'Any')), 'k': rng.randint(101, 140), 'noun': _pick(rng, ('resp', 'total', 'cached', 'key'))})}"
            for p, ln, c in finds
        ]
        fix = sum(1 for x in out if "[*]" in x)
        out += [f"Found {len(finds)} error{'s' if len(finds) != 1 else ''}."]
        if fix:
            out.append(f"[*] {fix} fixable with the `--fix` option.")
        return "\n".join(out)
    if tool == "mypy":
        nfiles = len([p for p in paths if p.endswith(".py")])
        if not finds:
            return f"Success: no issues found in {nfiles} source files"
        msgs = (
            'error: Incompatible return value type (got "«Noun» | None", expected "«Noun»")  [return-value]',
            'error: Argument 1 to "«fn»" has incompatible type "str | None"; expected "str"  [arg-type]',
            'error: Item "None" of "«Noun» | None" has no attribute "«attr»"  [union-attr]',
            "error: Missing return statement  [return]",
            'error: Name "utcnow" is not defined  [name-defined]',
        )
        out = []
        for p, ln, _ in finds:
            a = world.area_of(p) or _pick(rng, world.theme.areas)
            out.append(f"{p}:{ln}: " + _fill(_pick(rng, msgs), _area_ctx(rng, world.project, a)))
        out.append(
            f"Found {len(finds)} error{'s' if len(finds) != 1 else ''} in {len({p for p, _, _ in finds})} "
            f"file{'s' if len({p for p, _, _ in finds}) != 1 else ''} (checked {nfiles} source files)"
        )
        return "\n".join(out)
    if tool == "tsc":
        if not finds:
            return "(no output)"
        msgs = (
            "error TS2339: Property '«attr»' does not exist on type '«Noun»'.",
            "error TS2345: Argument of type 'string | undefined' is not assignable to parameter of type 'string'.",
            "error TS7006: Parameter 'item' implicitly has an 'any' type.",
            "error TS2322: Type 'number' is not assignable to type 'string'.",
            "error TS18048: '«noun»' is possibly 'undefined'.",
        )
        out = []
        for p, ln, c in finds:
            a = world.area_of(p) or _pick(rng, world.theme.areas)
            out.append(
                f"{p}({ln},{c}): "
                + _fill(_pick(rng, msgs), dict(_area_ctx(rng, world.project, a), attr=_camel(_pick(rng, _ATTRS))))
            )
        return "\n".join(out)
    if tool == "eslint":
        if not finds:
            return "(no output)"
        out = []
        errs = warns = 0
        by_file: dict[str, list[tuple[int, int]]] = {}
        for p, ln, c in finds:
            by_file.setdefault(p, []).append((ln, c))
        for p, items in by_file.items():
            out += ["", f"{world.project.root}/{p}"]
            for ln, c in items:
                sev = _pick(rng, ("error", "warning"))
                errs += sev == "error"
                warns += sev == "warning"
                rule, msg = _pick(
                    rng,
                    (
                        ("@typescript-eslint/no-unused-vars", "'controller' is assigned a value but never used"),
                        (
                            "react-hooks/exhaustive-deps",
                            "React Hook useEffect has a missing dependency: 'onChange'. Either include it or remove the dependency array",
                        ),
                        ("@typescript-eslint/no-explicit-any", "Unexpected any. Specify a different type"),
                        ("prefer-const", "'total' is never reassigned. Use 'const' instead"),
                    ),
                )
                out.append(f"  {ln}:{c}  {sev:<7}  {msg}  {rule}")
        out += [
            "",
            f"✖ {errs + warns} problems ({errs} error{'s' if errs != 1 else ''}, {warns} warning{'s' if warns != 1 else ''})",
        ]
        return "\n".join(out)
    # clippy
    out = [f"    Checking {world.project.name} v{world.project.version} ({world.project.root})"]
    lints = (
        ("needless_borrow", "this expression creates a reference which is immediately dereferenced by the compiler"),
        ("redundant_clone", "redundant clone"),
        ("if_same_then_else", "this `if` has identical blocks"),
        ("manual_let_else", "this could be rewritten as `let...else`"),
    )
    for p, ln, c in finds:
        name, msg = _pick(rng, lints)
        src = world.file(p).lines()
        code = src[ln - 1] if ln - 1 < len(src) else ""
        out += [
            f"error: {msg}",
            f"  --> {p}:{ln}:{c}",
            "   |",
            f"{ln:<3}| {code}",
            f"   | {' ' * min(c, len(code))}^^^^",
            "   |",
            f"   = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html#{name}",
            f"   = note: `-D clippy::{name.replace('_', '-')}` implied by `-D warnings`",
            "",
        ]
    if finds:
        out.append(
            f"error: could not compile `{world.project.name}` (lib) due to {len(finds)} previous error{'s' if len(finds) != 1 else ''}"
        )
    else:
        out.append(f"    Finished `dev` profile [unoptimized + debuginfo] target(s) in {rng.uniform(0.5, 20):.2f}s")
    return "\n".join(out)


def deps(world: _World) -> str:
    """Installed dependencies (``pip list`` / ``npm ls --all`` / ``cargo tree``), long-tailed."""
    rng = world.rng
    names = (
        "anyio",
        "attrs",
        "certifi",
        "charset",
        "click",
        "colorama",
        "idna",
        "jinja",
        "markup",
        "packaging",
        "platformdirs",
        "pluggy",
        "pygments",
        "pyyaml",
        "requests",
        "rich",
        "six",
        "tomli",
        "typing",
        "urllib",
        "wheel",
        "zipp",
        "serde",
        "tokio",
        "bytes",
        "hyper",
        "mio",
        "regex",
        "memchr",
        "lodash",
        "react",
        "scheduler",
        "loose-envify",
        "js-tokens",
        "esbuild",
        "rollup",
        "postcss",
        "nanoid",
        "picocolors",
    )
    n = _heavy(rng, 40, 1.0, 8, 1500)
    ver = lambda: f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}"
    lang = world.project.lang
    if lang == "python":
        rows = ["Package            Version", "------------------ ---------"]
        rows += [
            f"{_pick(rng, names)}-{_tok(rng, 3) if k % 5 == 4 else ''}".rstrip("-").ljust(19) + ver() for k in range(n)
        ]
        return "\n".join(rows)
    prefix = (
        f"{world.project.name}@0.{rng.randint(1, 20)}.0 {world.project.root}"
        if lang == "typescript"
        else f"{world.project.name} v{world.project.version} ({world.project.root})"
    )
    rows = [prefix]
    depth = 0
    for _ in range(n):
        depth = max(0, min(6, depth + rng.choice((-1, 0, 0, 1))))
        sep = "@" if lang == "typescript" else " v"
        rows.append(
            ("│   " * depth)
            + _pick(rng, ("├── ", "└── "))
            + f"{_pick(rng, names)}{sep}{ver()}"
            + (" deduped" if lang == "typescript" and rng.random() < 0.2 else " (*)" if rng.random() < 0.1 else "")
        )
    return "\n".join(rows)


def build(world: _World) -> str:
    """Output of the project's build / install command (long for cold builds)."""
    rng = world.rng
    lang = world.project.lang
    if lang == "typescript":
        out = [
            f"> {world.project.name}@0.{rng.randint(1, 20)}.{rng.randint(0, 9)} build",
            "> tsc -b && vite build",
            "",
            "vite v5.2.8 building for production...",
            "transforming...",
            f"✓ {rng.randint(120, 1400)} modules transformed.",
            "rendering chunks...",
            "computing gzip size...",
        ]
        for _ in range(_heavy(rng, 6, 0.8, 2, 120)):
            name = _pick(rng, ("index", "vendor", "CheckoutPage", "ProductGrid", "Cart", "client", "schemas"))
            size = rng.uniform(0.3, 400)
            ext = _pick(rng, ("js", "js", "css"))
            out.append(
                f"dist/assets/{name}-{_b62(rng, 8)}.{ext}".ljust(46) + f"{size:>8.2f} kB │ gzip: {size / 3.2:>7.2f} kB"
            )
        out.append(f"✓ built in {rng.uniform(1.5, 30):.2f}s")
        return "\n".join(out)
    if lang == "rust":
        crates = (
            "proc-macro2",
            "unicode-ident",
            "quote",
            "syn",
            "serde",
            "serde_derive",
            "serde_json",
            "libc",
            "cfg-if",
            "memchr",
            "log",
            "itoa",
            "ryu",
            "bytes",
            "tokio",
            "hyper",
            "http",
            "reqwest",
            "clap",
            "clap_derive",
            "anyhow",
            "thiserror",
            "tracing",
            "tracing-core",
            "once_cell",
            "regex",
            "regex-syntax",
            "tempfile",
            "rustls",
            "ring",
            "url",
            "idna",
            "percent-encoding",
            "futures-util",
            "mio",
            "socket2",
            "h2",
        )
        out = [
            f"   Compiling {c} v{rng.randint(0, 2)}.{rng.randint(0, 40)}.{rng.randint(0, 30)}"
            for c in rng.sample(crates, rng.randint(8, len(crates)))
        ]
        out.append(f"   Compiling {world.project.name} v{world.project.version} ({world.project.root})")
        out.append(f"    Finished `release` profile [optimized] target(s) in {rng.uniform(20, 140):.2f}s")
        return "\n".join(out)
    pkgs = (
        "httpx",
        "httpcore",
        "anyio",
        "sniffio",
        "idna",
        "certifi",
        "h11",
        "sqlalchemy",
        "greenlet",
        "pydantic",
        "pydantic-core",
        "typing-extensions",
        "annotated-types",
        "psycopg",
        "psycopg-binary",
        "alembic",
        "mako",
        "markupsafe",
        "pytest",
        "pluggy",
        "iniconfig",
        "packaging",
        "ruff",
        "mypy",
        "mypy-extensions",
        "structlog",
    )
    chosen = rng.sample(pkgs, rng.randint(6, len(pkgs)))
    out = [
        f"Obtaining file://{world.project.root}",
        "  Installing build dependencies ... done",
        "  Checking if build backend supports build_editable ... done",
        "  Getting requirements to build editable ... done",
        "  Preparing editable metadata (pyproject.toml) ... done",
    ]
    vers = {}
    for p in chosen:
        vers[p] = f"{rng.randint(0, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 12)}"
        out.append(f"Collecting {p}>={vers[p].rsplit('.', 1)[0]}")
        out.append(
            f"  Using cached {p.replace('-', '_')}-{vers[p]}-py3-none-any.whl.metadata ({rng.uniform(1, 40):.1f} kB)"
        )
    out.append(f"Building wheels for collected packages: {world.project.name}")
    out.append(f"  Building editable for {world.project.name} (pyproject.toml) ... done")
    out.append(f"Successfully built {world.project.name}")
    out.append("Installing collected packages: " + ", ".join(chosen))
    out.append("Successfully installed " + " ".join(f"{p}-{vers[p]}" for p in chosen))
    return "\n".join(out)


# Runtime outputs: HTTP, logs, scripts, tracebacks.


def obj_id(world: _World, area: _Area) -> str:
    """Draw an API object id in the project's id shape, e.g. ``ORD-58213-QX``."""
    rng = world.rng
    return f"{area.id_prefix}-{rng.randint(10000, 99999)}-{rng.choice(_UPPER)}{rng.choice(_UPPER)}"


def api_object(world: _World, area: _Area, obj_id: str, label: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Generate a JSON API object with nested ids, shaped by the theme."""
    rng = world.rng
    key = world.theme.key
    created = (_BASE_TIME + timedelta(minutes=rng.randint(0, 60 * 24 * 20))).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    if key in ("payments_service", "storefront_web"):
        first, last = _pick(rng, _FIRST), _pick(rng, _LAST)
        obj: dict[str, Any] = {
            "id": obj_id,
            "object": area.noun,
            "status": _pick(rng, _STATUSES),
            "amount": {"value_minor": rng.randint(100, 250000), "currency": _pick(rng, _CURRENCIES)},
            "customer": dict(
                label or {"name": f"{first} {last}", "email": f"{first.lower()}.{last.lower()}@example.com"},
                id=f"cus_{_b62(rng, 14)}",
            ),
            "lines": [
                {
                    "id": f"li_{_b62(rng, 14)}",
                    "sku": f"sku_{_tok(rng, 6)}",
                    "quantity": rng.randint(1, 5),
                    "unit_price_minor": rng.randint(99, 25000),
                }
                for _ in range(rng.randint(1, 4))
            ],
            "metadata": {"source": _pick(rng, ("api", "checkout", "backoffice", "import")), "trace_id": _hex(rng, 32)},
            "created_at": created,
        }
    elif key == "ledger_pipeline":
        obj = {
            "id": obj_id,
            "object": area.noun,
            "state": _pick(rng, ("queued", "running", "success", "failed")),
            "conf": dict(
                label or {"date": f"2024-02-{rng.randint(1, 29):02d}"}, source=_pick(rng, world.theme.external)
            ),
            "tasks": [
                {
                    "task_id": f"{t}_{area.name}",
                    "try_number": rng.randint(1, 3),
                    "state": _pick(rng, ("success", "queued", "running")),
                }
                for t in rng.sample(("extract", "transform", "load", "reconcile", "notify"), rng.randint(2, 5))
            ],
            "external_trigger": True,
            "created_at": created,
        }
    else:
        obj = {
            "id": obj_id,
            "object": area.noun,
            "name": (label or {}).get("package", f"{_pick(rng, _BIRDS)}-{area.noun}"),
            "version": (label or {}).get("version", f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"),
            "digest": f"sha256:{_hex(rng, 64)}",
            "size": rng.randint(1000, 90_000_000),
            "parts": [{"part": i + 1, "etag": _hex(rng, 32)} for i in range(rng.randint(1, 4))],
            "created_at": created,
        }
    return obj


def http_response(world: _World, status: int, body: Any) -> str:
    """Format an HTTP response as curl ``-i`` shows it: status line, headers, pretty JSON body."""
    rng = world.rng
    reason = {
        200: "OK",
        201: "Created",
        202: "Accepted",
        409: "Conflict",
        422: "Unprocessable Entity",
        500: "Internal Server Error",
        502: "Bad Gateway",
        503: "Service Unavailable",
    }[status]
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"x-request-id: req_{_b62(rng, 20)}",
        f"date: Mon, 11 Mar 2024 {rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} GMT",
    ]
    return "\n".join(head) + "\n\n" + json.dumps(body, indent=2, ensure_ascii=False)


def http_list(world: _World, area: _Area) -> tuple[str, str]:
    """Generate a GET list call on the area's collection: (url, output), heavy-tailed length."""
    rng = world.rng
    n = _heavy(rng, 4, 1.1, 1, 120)
    url = f"{world.theme.api_base}{area.path.split('?')[0]}?limit={n}"
    body = {
        "object": "list",
        "data": [api_object(world, area, obj_id(world, area)) for _ in range(n)],
        "has_more": rng.random() < 0.6,
        "next_cursor": _b62(rng, 24),
    }
    return url, http_response(world, 200, body)


def logs(world: _World, n: int) -> str:
    """Application log lines (with the odd embedded traceback)."""
    rng = world.rng
    t = _BASE_TIME + timedelta(days=rng.randint(0, 10), seconds=rng.randint(0, 80000))
    out = []
    for _ in range(n):
        t += timedelta(milliseconds=rng.randint(3, 4000))
        area = _pick(rng, world.theme.areas)
        lvl = rng.choices(("INFO ", "DEBUG", "WARN ", "ERROR"), (60, 25, 10, 5))[0]
        msg = _pick(
            rng,
            (
                "«noun» created",
                "«noun» updated status=«status»",
                "calling «ext» attempt=«n»",
                "«fn» finished",
                "cache miss key=«noun»:«ref»",
                "slow query on «table»",
                "retrying after timeout",
                "webhook delivered",
                "batch committed",
            ),
        )
        ctx = dict(_area_ctx(rng, world.project, area), ref=_b62(rng, 10))
        kv = f"{area.noun}_id={obj_id(world, area)} duration_ms={rng.randint(1, 3000)}"
        out.append(
            f"{t.strftime('%Y-%m-%dT%H:%M:%S')}.{rng.randint(0, 999):03d}Z {lvl} [{world.theme.package}.{area.name}] "
            f"{_fill(msg, ctx)} {kv}"
        )
        if lvl == "ERROR" and rng.random() < 0.3 and world.project.lang == "python":
            out += traceback(
                world, area, f"httpx.ReadTimeout: timed out after {rng.randint(2, 30)}s", script=None
            ).split("\n")
    return "\n".join(out)


def traceback(world: _World, area: _Area, final: str, script: str | None) -> str:
    """Generate a stack trace in the project's language ending in `final`."""
    rng = world.rng
    root = world.project.root
    fn = _pick(rng, area.funcs)
    mod = _module_of(area, fn)
    if world.project.lang == "python":
        out = ["Traceback (most recent call last):"]
        if script:
            out += [f'  File "{root}/{script}", line {rng.randint(20, 120)}, in <module>', "    main()"]
        out += [
            f'  File "{root}/{mod}", line {rng.randint(30, 400)}, in {fn}',
            f"    {world.theme.package}_result = self._{fn}_impl({area.noun}_id)",
            f'  File "{root}/.venv/lib/python3.11/site-packages/sqlalchemy/orm/session.py", line {rng.randint(2000, 4500)}, in flush',
            "    self._flush(objects)",
            f'  File "{root}/.venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py", line {rng.randint(1400, 2200)}, in _execute_context',
            "    return self._exec_single_context(",
            "           ^^^^^^^^^^^^^^^^^^^^^^^^^^",
            final,
        ]
        return "\n".join(out)
    if world.project.lang == "typescript":
        return "\n".join(
            [
                f"{final}",
                f"    at {_camel(fn)} ({root}/{mod}:{rng.randint(10, 300)}:{rng.randint(3, 40)})",
                f"    at async main (file://{root}/{script or 'scripts/dev.mjs'}:{rng.randint(10, 80)}:3)",
                "",
                "Node.js v20.12.2",
            ]
        )
    return "\n".join(
        [
            f"Error: {final}",
            "",
            "Caused by:",
            f"    0: {fn.replace('_', ' ')} failed for {area.noun}",
            f"    1: {final.split(':', 1)[-1].strip()}",
            "",
            "Stack backtrace:",
            f"   0: {world.project.name.replace('-', '_')}::{area.name}::{area.cls}::{fn}",
            f"             at ./{mod}:{rng.randint(10, 300)}:{rng.randint(5, 30)}",
            f"   1: {world.project.name.replace('-', '_')}::main",
            f"             at ./src/main.rs:{rng.randint(10, 90)}:5",
        ]
    )


def script(world: _World, name: str, args: str) -> str:
    """Return the shell command that runs a project script in the project's language."""
    lang = world.project.lang
    if lang == "python":
        return f"python scripts/{name}.py {args}".strip()
    if lang == "typescript":
        return f"node scripts/{name.replace('_', '-')}.mjs {args}".strip()
    return f"./target/debug/{world.project.name} {name.replace('_', '-')} {args}".strip()


def job(world: _World, name: str, args: str) -> str:
    """Return the shell command that runs a background job once, in the project's language."""
    if world.project.lang == "python":
        return f"python -m {world.theme.package}.jobs.{name} {args}".strip()
    return script(world, name, args)


def job_log(world: _World, area: _Area, n: int) -> list[str]:
    """`n` progress lines of a batch job working on `area`."""
    rng = world.rng
    t = _BASE_TIME + timedelta(days=rng.randint(0, 10), seconds=rng.randint(0, 80000))
    out = []
    for k in range(n):
        t += timedelta(milliseconds=rng.randint(20, 9000))
        out.append(
            f"{t.strftime('%H:%M:%S')}.{rng.randint(0, 999):03d} INFO  {area.name}: batch {k + 1} "
            f"rows={rng.randint(100, 5000)} lag_ms={rng.randint(1, 900)}"
        )
    return out


def bench(world: _World, endpoint: str, runs: int) -> str:
    """Generate a benchmark script's latency table: one row per run, never a summary (the assistant aggregates)."""
    rng = world.rng
    out = [
        f"benchmarking {endpoint} ({runs} runs, {rng.choice((200, 500, 1000))} requests each, concurrency {rng.randint(4, 64)})",
        "",
        "run   p50_ms   p90_ms   p99_ms   max_ms   rps     errors",
    ]
    for r in range(runs):
        p50 = rng.randint(5, 400)
        out.append(
            f"{r + 1:<5} {p50:>6}   {p50 + rng.randint(5, 200):>6}   {p50 + rng.randint(100, 900):>6}   "
            f"{p50 + rng.randint(900, 4000):>6}   {rng.randint(200, 9000):<7} {rng.randint(0, 3):>6}"
        )
    return "\n".join(out)


def migrate(world: _World, path: str) -> tuple[str, str]:
    """(command, output) that applies a migration / checks a schema file."""
    rng = world.rng
    kind = world.theme.schema_kind
    if kind == "alembic":
        _, rev, down = world.schema[path]
        return "alembic upgrade head", "\n".join(
            [
                "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.",
                "INFO  [alembic.runtime.migration] Will assume transactional DDL.",
                f"INFO  [alembic.runtime.migration] Running upgrade {down} -> {rev}, {path.rsplit('/', 1)[-1][13:-3].replace('_', ' ')}",
            ]
        )
    if kind == "sql":
        return (
            f'psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f {path}',
            "BEGIN\nCREATE TABLE\nCREATE INDEX\nALTER TABLE\nCOMMIT",
        )
    if kind == "zod":
        return "npx tsc --noEmit", "(no output)"
    return (
        f"./target/debug/{world.project.name} schema check {path}",
        f"checked {path}: ok ({rng.randint(3, 40)} fixtures validated)",
    )
