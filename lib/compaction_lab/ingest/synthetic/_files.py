"""Generated file contents: source modules, tests, config, schema and other files.

A file is a list of blocks, and named blocks (functions, tests, config sections)
are what an edit replaces; that keeps later reads, diffs and the line numbers in
test failures consistent with earlier edits. Contents use the real syntax of the
project's language, because reads, greps and tracebacks quote them verbatim.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compaction_lab.ingest.synthetic._project import (
    _ATTRS,
    _CURRENCIES,
    _STATUSES,
    _Area,
    _area_ctx,
    _module_of,
    _Project,
    _test_title,
)
from compaction_lab.ingest.synthetic._random import _camel, _fill, _heavy, _pascal, _pick, _tok


@dataclass
class _SourceFile:
    """A file as blocks of lines; a block carries its own leading blank lines.

    Named blocks (functions, methods, tests, config sections) can be replaced by
    an edit, which keeps diffs and line numbers of later reads consistent.
    """

    path: str
    blocks: list[list[str]]
    names: list[str | None]

    def lines(self) -> list[str]:
        """All lines of the file, blocks concatenated."""
        return [ln for b in self.blocks for ln in b]

    def text(self) -> str:
        """Return the file's content with a trailing newline."""
        return "\n".join(self.lines()) + "\n"

    def start_of(self, i: int) -> int:
        """1-based line number of the first line of block `i`."""
        return 1 + sum(len(b) for b in self.blocks[:i])

    def editable(self) -> list[int]:
        """Return the indices of the named blocks, the ones an edit may replace."""
        return [i for i, n in enumerate(self.names) if n]


_PY_STMTS = (
    "«v» = self._repo.get(«Noun», «v»_id)",
    "if «v» is None:\n    raise «Noun»NotFound(«v»_id)",
    'log.debug("«fn»: loaded %s", «v»_id)',
    "total = sum(line.amount for line in «v».lines)",
    'if total <= 0:\n    raise ValueError(f"«noun» {«v»_id} has no billable lines")',
    "«v».status = «Noun»Status.«STATUS»\n«v».updated_at = utcnow()",
    "with self._session.begin_nested():\n    self._session.add(«v»)\n    self._session.flush()",
    "for attempt in range(1, MAX_RETRIES + 1):\n    try:\n        resp = self._client.post(«path_lit», json=payload, timeout=TIMEOUT_S)\n        break\n"
    '    except httpx.TimeoutException:\n        log.warning("«fn» timed out (attempt %d)", attempt)\n'
    "        time.sleep(BACKOFF_S * 2 ** attempt)\nelse:\n    raise UpstreamUnavailable(«path_lit»)",
    'payload = {\n    "id": «v».id,\n    "amount": str(«v».amount),\n    "currency": «v».currency,\n    "reference": «v».external_ref,\n}',
    "if «v».currency not in SUPPORTED_CURRENCIES:\n    raise UnsupportedCurrency(«v».currency)",
    'key = f"«noun»:{«v».id}:{«v».version}"\ncached = self._cache.get(key)\nif cached is not None:\n    return cached',
    "rows = [r for r in rows if r.«attr» is not None]",
    'self._metrics.increment("«nouns».«fn»", tags={"status": «v».status.value})',
    'amount = (amount * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)',
    "resp.raise_for_status()\ndata = resp.json()",
    'if «v».«attr» is None:\n    log.info("«noun» %s has no «attr», using default", «v».id)\n    «v».«attr» = DEFAULTS["«attr»"]',
    "batch = list(itertools.islice(rows, BATCH_SIZE))\nwhile batch:\n    self._write(batch)\n    batch = list(itertools.islice(rows, BATCH_SIZE))",
    "deadline = time.monotonic() + TIMEOUT_S",
    "events = sorted(events, key=lambda e: (e.created_at, e.id))",
    "seen: set[str] = set()\nunique = []\nfor row in rows:\n    if row.external_ref in seen:\n        continue\n    seen.add(row.external_ref)\n    unique.append(row)",
)

_TS_STMTS = (
    "const «v» = await client.get<«Noun»>(`/api/«nouns»/${«v»Id}`);",
    "if (!«v») {\n  throw new NotFoundError(`«noun» ${«v»Id} not found`);\n}",
    "const total = «v».items.reduce((sum, item) => sum + item.priceMinor * item.quantity, 0);",
    'logger.debug("«fn»", { «v»Id, attempt });',
    "for (let attempt = 1; attempt <= MAX_RETRIES; attempt++) {\n  try {\n    return await request(«v»);\n  } catch (err) {\n"
    "    if (!isRetryable(err)) throw err;\n    await sleep(BACKOFF_MS * 2 ** attempt);\n  }\n}",
    "const params = new URLSearchParams({ page: String(page), limit: String(PAGE_SIZE) });",
    "if («v».currency !== DEFAULT_CURRENCY) {\n  return convert(«v», DEFAULT_CURRENCY);\n}",
    "const key = `«noun»:${«v».id}`;\nconst cached = cache.get(key);\nif (cached) return cached;",
    'dispatch({ type: "«noun»/updated", payload: «v» });',
    "const parsed = «Noun»Schema.safeParse(body);\nif (!parsed.success) {\n  return { ok: false, errors: parsed.error.flatten() };\n}",
    "const controller = new AbortController();\nconst timer = setTimeout(() => controller.abort(), TIMEOUT_MS);",
    "const items = «v».items.filter((item) => item.quantity > 0);",
    "const discount = Math.round((total * percentOff) / 100);",
    "if (res.status === 401) {\n  await refreshToken();\n  return request(path, { ...init, retry: false });\n}",
)

_RS_STMTS = (
    'let resp = self.client.get(format!("{}/«nouns»/{}", self.base_url, id)).send()?;',
    "if !resp.status().is_success() {\n    return Err(«cls»Error::Http(resp.status().as_u16()));\n}",
    "for attempt in 1..=MAX_RETRIES {\n    match self.try_once(&req) {\n        Ok(resp) => return Ok(resp),\n"
    '        Err(e) if e.is_retryable() => {\n            tracing::warn!(attempt, error = %e, "retrying");\n'
    "            std::thread::sleep(BACKOFF * 2u32.pow(attempt));\n        }\n        Err(e) => return Err(e),\n    }\n}",
    "let entries: Vec<_> = entries.into_iter().filter(|e| !e.is_stale(now)).collect();",
    "let path = self.root.join(&«v».name);",
    'let tmp = path.with_extension("tmp");\nfs::write(&tmp, serde_json::to_vec_pretty(&«v»)?)?;\nfs::rename(&tmp, &path)?;',
    'tracing::debug!(count = entries.len(), "«fn» done");',
    'let cfg = Config::load(&path).with_context(|| format!("reading {}", path.display()))?;',
    "let mut seen = HashSet::new();\nentries.retain(|e| seen.insert(e.digest.clone()));",
    "let chunk_size = self.opts.chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE);",
    'if self.opts.dry_run {\n    println!("would write {} entries", entries.len());\n    return Ok(«v»);\n}',
)

_PY_DOCS = (
    "Load the «noun» and apply the change atomically",
    "Return the «noun» with totals recomputed",
    "Send the «noun» upstream, retrying transient failures",
    "Validate the «noun» before it is persisted",
    "Build the request payload for the «noun»",
    "Mark the «noun» as «status» and record the transition",
)


def _py_function(rng: random.Random, ctx: Mapping[str, Any], name: str, method: bool) -> list[str]:
    """Generate a typed Python function (or method) whose body is drawn from `_PY_STMTS`."""
    ind = "    " if method else ""
    v = ctx["noun"]
    c = dict(
        ctx,
        v=v,
        fn=name,
        path_lit=f'"{ctx["endpoint"].split(" ", 1)[1]}"',
        STATUS=_pick(rng, _STATUSES).upper(),
        attr=_pick(rng, _ATTRS),
    )
    self_ = "self, " if method else ""
    kw = _pick(
        rng,
        (
            "dry_run: bool = False",
            "timeout: float = TIMEOUT_S",
            "actor: str | None = None",
            "now: datetime | None = None",
            "limit: int = 100",
        ),
    )
    # PEP 8 spacing: one blank line before a method, two before a top-level function.
    out = ([""] if method else ["", ""]) + [f"{ind}def {name}({self_}{v}_id: str, *, {kw}) -> {ctx['Noun']}:"]
    out.append(f'{ind}    """{_fill(_pick(rng, _PY_DOCS), c)}."""')
    for s in rng.sample(_PY_STMTS, rng.randint(3, 8)):
        out.extend(f"{ind}    {ln}" for ln in _fill(s, c).split("\n"))
    out.append(f"{ind}    return {v}")
    return out


def _ts_function(rng: random.Random, ctx: Mapping[str, Any], name: str) -> list[str]:
    """Generate an exported async TypeScript function whose body is drawn from `_TS_STMTS`."""
    v = ctx["noun"]
    c = dict(ctx, v=v, fn=name)
    out = [
        "",
        f"export async function {name}({v}Id: string, options: {ctx['Noun']}Options = {{}}): Promise<{ctx['Noun']}> {{",
    ]
    for s in rng.sample(_TS_STMTS, rng.randint(3, 7)):
        out.extend(f"  {ln}" for ln in _fill(s, c).split("\n"))
    out.append(f"  return {v};")
    out.append("}")
    return out


def _ts_component(rng: random.Random, ctx: Mapping[str, Any], name: str) -> list[str]:
    """Generate a small React function component."""
    v = ctx["noun"]
    return [
        "",
        f"export function {name}({{ {v}, onChange }}: {name}Props) {{",
        "  const [open, setOpen] = useState(false);",
        f"  const total = useMemo(() => formatPrice({v}.totalMinor, {v}.currency), [{v}]);",
        "  useEffect(() => {",
        "    if (!open) return;",
        f"    onChange?.({{ ...{v}, viewedAt: Date.now() }});",
        f"  }}, [open, {v}, onChange]);",
        "  return (",
        f'    <section className="{v}-panel" data-testid="{v}-panel">',
        f"      <h2>{{{v}.title}}</h2>",
        f'      <span data-testid="{v}-total">{{total}}</span>',
        '      <button type="button" onClick={() => setOpen(!open)}>',
        '        {open ? "Hide details" : "Show details"}',
        "      </button>",
        "    </section>",
        "  );",
        "}",
    ]


def _rs_function(rng: random.Random, ctx: Mapping[str, Any], name: str) -> list[str]:
    """Generate a Rust method (inside an ``impl`` block) whose body is drawn from `_RS_STMTS`."""
    v = ctx["noun"]
    c = dict(ctx, v=v, fn=name)
    out = ["", f"    pub fn {name}(&self, id: &str) -> Result<{ctx['Noun']}, {ctx['cls']}Error> {{"]
    for s in rng.sample(_RS_STMTS, rng.randint(3, 7)):
        out.extend(f"        {ln}" for ln in _fill(s, c).split("\n"))
    out.append(f"        Ok({v})")
    out.append("    }")
    return out


def _helper_names(rng: random.Random, ctx: Mapping[str, Any], n: int) -> list[str]:
    """`n` distinct private helper names about the area's noun (they pad modules to realistic length)."""
    verbs = ("load", "persist", "validate", "normalize", "emit", "lookup", "merge", "serialize", "refresh", "audit")
    out: list[str] = []
    while len(out) < n:
        nm = f"_{_pick(rng, verbs)}_{ctx['noun']}_{_pick(rng, ('rows', 'state', 'payload', 'lines', 'meta', 'batch', 'ids', 'window'))}"
        if nm not in out:
            out.append(nm)
    return out


def _gen_module(rng: random.Random, project: _Project, area: _Area, path: str) -> _SourceFile:
    """Generate a source module of `area` in the project's language, heavy-tailed in length."""
    ctx = _area_ctx(rng, project, area)
    n_extra = _heavy(rng, 3, 1.1, 0, 60)
    public = [f for f in area.funcs if _module_of(area, f) == path]
    helpers = _helper_names(rng, ctx, n_extra)
    lang = project.lang
    blocks: list[list[str]] = []
    names: list[str | None] = []
    if lang == "python":
        pkg = path[:-3].replace("/", ".")
        header = [
            f'"""{_pascal(area.name)}: {ctx["nouns"]} and how they reach the {ctx["ext"]}."""',
            "",
            "from __future__ import annotations",
            "",
            "import itertools",
            "import logging",
            "import time",
            "from dataclasses import dataclass, field",
            "from datetime import datetime",
            "from decimal import ROUND_HALF_EVEN, Decimal",
            "",
            "import httpx",
            "from sqlalchemy.orm import Session",
            "",
            f"from {project.theme.package}.core.clock import utcnow",
            f"from {pkg.rsplit('.', 1)[0]}.errors import {ctx['Noun']}NotFound, UnsupportedCurrency, UpstreamUnavailable",
            f"from {pkg.rsplit('.', 1)[0]}.models import {ctx['Noun']}, {ctx['Noun']}Status",
            "",
            "log = logging.getLogger(__name__)",
            "",
            f"TIMEOUT_S = {rng.choice((2.5, 5.0, 8.0, 10.0, 12.5, 30.0))}",
            f"MAX_RETRIES = {rng.randint(2, 6)}",
            f"BACKOFF_S = {rng.choice((0.1, 0.2, 0.25, 0.5))}",
            f"BATCH_SIZE = {rng.choice((100, 250, 500, 1000, 5000))}",
            f"SUPPORTED_CURRENCIES = frozenset({{{', '.join(repr(c) for c in rng.sample(_CURRENCIES, 3))}}})",
        ]
        blocks.append(header)
        names.append(None)
        blocks.append(
            [
                "",
                "",
                "@dataclass(frozen=True)",
                f"class {ctx['Noun']}Request:",
                f"    {ctx['noun']}_id: str",
                "    amount: Decimal",
                '    currency: str = "EUR"',
                "    metadata: dict[str, str] = field(default_factory=dict)",
            ]
        )
        names.append(None)
        blocks.append(
            [
                "",
                "",
                f"class {area.cls}:",
                f'    """Entry point for {ctx["noun"]} operations."""',
                "",
                "    def __init__(self, session: Session, client: httpx.Client, metrics: Metrics) -> None:",
                "        self._session = session",
                "        self._client = client",
                "        self._metrics = metrics",
                "        self._cache: dict[str, object] = {}",
            ]
        )
        names.append(None)
        for fn in public + helpers:
            blocks.append(_py_function(rng, ctx, fn, method=True))
            names.append(fn)
    elif lang == "typescript":
        header = [
            'import { useEffect, useMemo, useState } from "react";',
            'import { client, request, isRetryable, sleep } from "../api/client";',
            f'import {{ {ctx["Noun"]}Schema, type {ctx["Noun"]} }} from "../api/schemas/{area.noun}";',
            'import { formatPrice } from "../utils/price";',
            'import { logger } from "../lib/logger";',
            "",
            f"const MAX_RETRIES = {rng.randint(2, 5)};",
            f"const BACKOFF_MS = {rng.choice((100, 200, 250, 500))};",
            f"const PAGE_SIZE = {rng.choice((20, 24, 48, 50))};",
            f"const TIMEOUT_MS = {rng.choice((3000, 5000, 8000, 10000))};",
            f'const DEFAULT_CURRENCY = "{_pick(rng, _CURRENCIES)}";',
            "",
            f"export interface {ctx['Noun']}Options {{",
            "  signal?: AbortSignal;",
            "  force?: boolean;",
            "}",
        ]
        blocks.append(header)
        names.append(None)
        for fn in public + [_camel(h.lstrip("_")) for h in helpers]:
            blocks.append(_ts_function(rng, ctx, _camel(fn)))
            names.append(_camel(fn))
        if path.endswith(".tsx"):
            blocks.append(
                [
                    "",
                    f"interface {area.cls}Props {{",
                    f"  {area.noun}: {ctx['Noun']};",
                    f"  onChange?: (next: {ctx['Noun']}) => void;",
                    "}",
                ]
            )
            names.append(None)
            blocks.append(_ts_component(rng, ctx, area.cls))
            names.append(area.cls)
    else:
        header = [
            "use std::collections::HashSet;",
            "use std::fs;",
            "use std::path::PathBuf;",
            "use std::time::Duration;",
            "",
            "use anyhow::Context;",
            "use serde::{Deserialize, Serialize};",
            "",
            f"const MAX_RETRIES: u32 = {rng.randint(2, 6)};",
            f"const BACKOFF: Duration = Duration::from_millis({rng.choice((100, 200, 250, 500))});",
            f"const DEFAULT_CHUNK_SIZE: usize = {rng.choice((4, 8, 16))} * 1024 * 1024;",
            "",
            "#[derive(Debug, thiserror::Error)]",
            f"pub enum {area.cls}Error {{",
            '    #[error("http status {0}")]',
            "    Http(u16),",
            '    #[error("io: {0}")]',
            "    Io(#[from] std::io::Error),",
            "}",
            "",
            "#[derive(Debug, Clone, Serialize, Deserialize)]",
            f"pub struct {ctx['Noun']} {{",
            "    pub id: String,",
            "    pub name: String,",
            "    pub digest: String,",
            "    pub size: u64,",
            "}",
            "",
            f"pub struct {area.cls} {{",
            "    client: reqwest::blocking::Client,",
            "    base_url: String,",
            "    root: PathBuf,",
            "    opts: Options,",
            "}",
            "",
            f"impl {area.cls} {{",
        ]
        blocks.append(header)
        names.append(None)
        for fn in public + [h.lstrip("_") for h in helpers]:
            blocks.append(_rs_function(rng, ctx, fn))
            names.append(fn)
        blocks.append(["}"])
        names.append(None)
    return _SourceFile(path, blocks, names)


def _test_block(rng: random.Random, project: _Project, area: _Area, fn: str, cond: str) -> list[str]:
    """One test of `fn` under condition `cond`, in the project's test framework."""
    ctx = _area_ctx(rng, project, area, fn)
    v = area.noun
    amount = f"{rng.randint(1, 400)}.{rng.randint(0, 99):02d}"
    status = _pick(rng, _STATUSES)
    if project.lang == "python":
        return [
            "",
            "",
            f"def {_test_title(project, fn, cond)}(service, {v}_factory, fake_{ctx['ext'].replace('-', '_')}):",
            f'    {v} = {v}_factory(amount=Decimal("{amount}"), currency="{_pick(rng, _CURRENCIES)}")',
            f"    result = service.{fn}({v}.id)",
            f'    assert result.status == "{status}"',
            f'    assert result.amount == Decimal("{amount}")',
            f"    assert fake_{ctx['ext'].replace('-', '_')}.calls == {rng.randint(0, 3)}",
        ]
    if project.lang == "typescript":
        return [
            "",
            f'  it("{_test_title(project, fn, cond)}", async () => {{',
            f'    const {v} = make{ctx["Noun"]}({{ totalMinor: {rng.randint(100, 99999)}, currency: "{_pick(rng, _CURRENCIES)}" }});',
            f"    const result = await {_camel(fn)}({v}.id);",
            f'    expect(result.status).toBe("{status}");',
            f"    expect(fetchMock).toHaveBeenCalledTimes({rng.randint(0, 3)});",
            "  });",
        ]
    return [
        "",
        "#[test]",
        f"fn {_test_title(project, fn, cond)}() {{",
        "    let dir = tempfile::tempdir().unwrap();",
        f"    let engine = {area.cls}::for_tests(dir.path());",
        f'    let got = engine.{fn}("{_tok(rng, 6)}").unwrap();',
        f"    assert_eq!(got.size, {rng.randint(0, 65536)});",
        "}",
    ]


def _gen_test_file(rng: random.Random, project: _Project, area: _Area) -> _SourceFile:
    """Generate the test file of `area`: a header, one named block per test, and a footer if the framework needs one."""
    lang = project.lang
    tests = project.tests[area.name]
    if lang == "python":
        header = [
            "from decimal import Decimal",
            "",
            "import pytest",
            "",
            f"from {area.modules[0][:-3].replace('/', '.')} import {area.cls}",
            "",
            "",
            "@pytest.fixture",
            "def service(db_session, http_client, metrics):",
            f"    return {area.cls}(db_session, http_client, metrics)",
        ]
        footer: list[str] | None = None
    elif lang == "typescript":
        mod = area.modules[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
        header = [
            'import { describe, expect, it, vi, beforeEach } from "vitest";',
            f'import {{ {", ".join(_camel(f) for f in area.funcs)} }} from "./{mod}";',
            f'import {{ make{_pascal(area.noun)} }} from "../test/factories";',
            "",
            "const fetchMock = vi.fn();",
            "",
            f'describe("{area.cls}", () => {{',
            "  beforeEach(() => {",
            "    fetchMock.mockReset();",
            '    vi.stubGlobal("fetch", fetchMock);',
            "  });",
        ]
        footer = ["});"]
    else:
        header = [f"use {project.name.replace('-', '_')}::{area.name}::{area.cls};"]
        footer = None
    blocks = [header]
    names: list[str | None] = [None]
    for fn, cond in tests:
        blocks.append(_test_block(rng, project, area, fn, cond))
        names.append(_test_title(project, fn, cond))
    if footer:
        blocks.append(footer)
        names.append(None)
    return _SourceFile(area.test, blocks, names)


def _gen_config(rng: random.Random, project: _Project, path: str) -> _SourceFile:
    """Config files: YAML / TOML sections (editable), JSON and others as one block."""
    theme = project.theme
    blocks: list[list[str]] = []
    names: list[str | None] = []
    if path.endswith((".yaml", ".yml")) and "docker-compose" not in path:
        blocks.append(
            [
                f"# {project.name} configuration; values here are development defaults.",
                "app:",
                f"  name: {project.name}",
                "  env: development",
                f"  log_level: {_pick(rng, ('info', 'debug'))}",
            ]
        )
        names.append(None)
        for area in theme.areas:
            sec = ["", f"{area.name}:"]
            for key in rng.sample(
                (
                    "timeout_s",
                    "max_retries",
                    "batch_size",
                    "enabled",
                    "base_url",
                    "concurrency",
                    "cache_ttl_s",
                    "queue",
                    "dry_run",
                    "page_size",
                ),
                rng.randint(3, 6),
            ):
                val = {
                    "timeout_s": rng.choice((2.5, 5, 10, 30)),
                    "max_retries": rng.randint(1, 6),
                    "batch_size": rng.choice((100, 500, 1000)),
                    "enabled": rng.choice(("true", "false")),
                    "base_url": f"https://{_pick(rng, theme.external)}.internal.example/v{rng.randint(1, 3)}",
                    "concurrency": rng.randint(1, 16),
                    "cache_ttl_s": rng.choice((30, 60, 300, 900)),
                    "queue": f"{area.name}-default",
                    "dry_run": "false",
                    "page_size": rng.choice((50, 100, 200)),
                }[key]
                sec.append(f"  {key}: {val}")
            blocks.append(sec)
            names.append(area.name)
    elif path.endswith("docker-compose.yml"):
        blocks.append(
            [
                "services:",
                "  api:",
                "    build: .",
                "    command: uvicorn app.main:app --host 0.0.0.0 --port 8000",
                "    ports:",
                '      - "8000:8000"',
                "    env_file: .env",
                "    depends_on:",
                "      - db",
                "      - redis",
                "  db:",
                "    image: postgres:16",
                "    environment:",
                f"      POSTGRES_DB: {project.name.replace('-', '_')}",
                "      POSTGRES_PASSWORD: dev",
                "    ports:",
                '      - "5432:5432"',
                "  redis:",
                "    image: redis:7-alpine",
            ]
        )
        names.append(None)
    elif path.endswith("pyproject.toml"):
        blocks.append(
            [
                "[project]",
                f'name = "{project.name}"',
                f'version = "0.{rng.randint(1, 30)}.{rng.randint(0, 9)}"',
                'requires-python = ">=3.11"',
                "dependencies = [",
                '    "httpx>=0.27",',
                '    "sqlalchemy>=2.0",',
                '    "pydantic>=2.6",',
                "]",
            ]
        )
        names.append(None)
        blocks.append(
            [
                "",
                "[tool.pytest.ini_options]",
                'addopts = "-ra --strict-markers"',
                'testpaths = ["tests"]',
                f"timeout = {rng.choice((30, 60, 120))}",
            ]
        )
        names.append("tool.pytest.ini_options")
        blocks.append(
            [
                "",
                "[tool.ruff]",
                "line-length = 100",
                'target-version = "py311"',
                "",
                "[tool.ruff.lint]",
                'select = ["E", "F", "I", "B", "UP"]',
            ]
        )
        names.append("tool.ruff")
        blocks.append(["", "[tool.mypy]", "strict = true", f'packages = ["{theme.package}"]'])
        names.append("tool.mypy")
    elif path.endswith("Cargo.toml"):
        blocks.append(
            [
                "[package]",
                f'name = "{project.name}"',
                f'version = "0.{rng.randint(1, 9)}.{rng.randint(0, 9)}"',
                'edition = "2021"',
            ]
        )
        names.append(None)
        blocks.append(
            [
                "",
                "[dependencies]",
                'anyhow = "1"',
                'clap = { version = "4.5", features = ["derive"] }',
                'reqwest = { version = "0.12", features = ["blocking", "json"] }',
                'serde = { version = "1", features = ["derive"] }',
                'serde_json = "1"',
                'thiserror = "1"',
                'tracing = "0.1"',
            ]
        )
        names.append("dependencies")
        blocks.append(["", "[dev-dependencies]", 'tempfile = "3"', 'assert_cmd = "2"'])
        names.append("dev-dependencies")
    elif path.endswith(".toml"):
        for area in theme.areas:
            blocks.append(
                [
                    "",
                    f"[{area.name}]",
                    f"retries = {rng.randint(1, 6)}",
                    f"timeout_ms = {rng.choice((500, 1000, 5000))}",
                    f'endpoint = "{theme.api_base}{area.path}"',
                ]
            )
            names.append(area.name)
    elif path.endswith("package.json"):
        blocks.append(
            [
                "{",
                f'  "name": "{project.name}",',
                f'  "version": "0.{rng.randint(1, 20)}.{rng.randint(0, 9)}",',
                '  "private": true,',
                '  "type": "module",',
                '  "scripts": {',
                '    "dev": "vite",',
                '    "build": "tsc -b && vite build",',
                '    "test": "vitest",',
                '    "lint": "eslint src --ext .ts,.tsx"',
                "  },",
                '  "dependencies": {',
                '    "react": "^18.3.1",',
                '    "react-dom": "^18.3.1",',
                '    "@reduxjs/toolkit": "^2.2.3",',
                '    "zod": "^3.23.4"',
                "  },",
                '  "devDependencies": {',
                '    "typescript": "^5.4.5",',
                '    "vite": "^5.2.8",',
                '    "vitest": "^1.5.0",',
                '    "eslint": "^8.57.0"',
                "  }",
                "}",
            ]
        )
        names.append(None)
    elif path.endswith("tsconfig.json"):
        blocks.append(
            [
                "{",
                '  "compilerOptions": {',
                '    "target": "ES2022",',
                '    "module": "ESNext",',
                '    "moduleResolution": "bundler",',
                '    "jsx": "react-jsx",',
                '    "strict": true,',
                f'    "noUncheckedIndexedAccess": {_pick(rng, ("true", "false"))},',
                '    "skipLibCheck": true',
                "  },",
                '  "include": ["src"]',
                "}",
            ]
        )
        names.append(None)
    else:  # vite.config.ts and friends
        blocks.append(
            [
                'import { defineConfig } from "vite";',
                'import react from "@vitejs/plugin-react";',
                "",
                "export default defineConfig({",
                "  plugins: [react()],",
                "  server: {",
                "    port: 5173,",
                f'    proxy: {{ "/api": "{theme.api_base}" }},',
                "  },",
                '  test: { environment: "jsdom", setupFiles: ["src/test/setup.ts"] },',
                "});",
            ]
        )
        names.append(None)
    return _SourceFile(path, blocks, names)


def _gen_schema(rng: random.Random, project: _Project, area: _Area, path: str, rev: str, down: str) -> _SourceFile:
    """Generate a migration or schema file for `area` (alembic, SQL, zod or JSON Schema)."""
    kind = project.theme.schema_kind
    col = _pick(rng, _ATTRS)
    table = area.table
    if kind == "alembic":
        lines = [
            f'"""add {col} to {table}',
            "",
            f"Revision ID: {rev}",
            f"Revises: {down}",
            f"Create Date: 2024-0{rng.randint(1, 3)}-{rng.randint(10, 28)} {rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
            "",
            '"""',
            "from alembic import op",
            "import sqlalchemy as sa",
            "",
            f'revision = "{rev}"',
            f'down_revision = "{down}"',
            "branch_labels = None",
            "depends_on = None",
            "",
            "",
            "def upgrade() -> None:",
            f'    op.add_column("{table}", sa.Column("{col}", sa.String(length=64), nullable=True))',
            f'    op.create_index("ix_{table}_{col}", "{table}", ["{col}"])',
            "",
            "",
            "def downgrade() -> None:",
            f'    op.drop_index("ix_{table}_{col}", table_name="{table}")',
            f'    op.drop_column("{table}", "{col}")',
        ]
    elif kind == "sql":
        lines = [
            f"-- {path.rsplit('/', 1)[-1]}",
            "BEGIN;",
            "",
            f"CREATE TABLE IF NOT EXISTS {table} (",
            "    id            BIGSERIAL PRIMARY KEY,",
            f"    {area.noun}_ref    TEXT        NOT NULL,",
            "    amount_minor  BIGINT      NOT NULL,",
            "    currency      CHAR(3)     NOT NULL,",
            f"    {col:<13} TEXT,",
            "    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()",
            ");",
            "",
            f"CREATE INDEX IF NOT EXISTS ix_{table}_{col} ON {table} ({col});",
            f"ALTER TABLE {table} ADD CONSTRAINT uq_{table}_{area.noun}_ref UNIQUE ({area.noun}_ref);",
            "",
            "COMMIT;",
        ]
    elif kind == "zod":
        lines = [
            'import { z } from "zod";',
            "",
            f"export const {_pascal(area.noun)}Schema = z.object({{",
            "  id: z.string().min(1),",
            "  totalMinor: z.number().int().nonnegative(),",
            "  currency: z.string().length(3),",
            f"  {_camel(col)}: z.string().optional(),",
            f"  status: z.enum([{', '.join(repr(s).replace(chr(39), chr(34)) for s in rng.sample(_STATUSES, 3))}]),",
            "});",
            "",
            f"export type {_pascal(area.noun)} = z.infer<typeof {_pascal(area.noun)}Schema>;",
        ]
    else:
        lines = [
            "{",
            '  "$schema": "https://json-schema.org/draft/2020-12/schema",',
            f'  "$id": "https://{project.name}.dev/schema/{area.noun}.json",',
            '  "type": "object",',
            '  "required": ["id", "name", "digest"],',
            '  "properties": {',
            '    "id": { "type": "string" },',
            '    "name": { "type": "string" },',
            '    "digest": { "type": "string", "pattern": "^sha256:[0-9a-f]{64}$" },',
            f'    "{col}": {{ "type": "string" }},',
            '    "size": { "type": "integer", "minimum": 0 }',
            "  }",
            "}",
        ]
    return _SourceFile(path, [lines], [None])


def _misc_file(rng: random.Random, project: _Project, path: str) -> _SourceFile:
    """README, Makefile, CI workflow and scripts: plain files that show up in listings and reads."""
    theme = project.theme
    if path.endswith("README.md"):
        lines = [
            f"# {project.name}",
            "",
            f"Internal {theme.key.replace('_', ' ')} maintained by the platform team.",
            "",
            "## Development",
            "",
            "```sh",
        ]
        lines += {
            "python": ["python -m venv .venv && . .venv/bin/activate", "pip install -e '.[dev]'", "pytest -q"],
            "typescript": ["npm ci", "npm run dev", "npx vitest run"],
            "rust": ["cargo build", "cargo test", f"./target/debug/{project.name} --help"],
        }[theme.language]
        lines += ["```", "", "## Layout", ""]
        lines += [f"- `{a.modules[0]}`: {a.name} ({a.noun}s)" for a in theme.areas]
        return _SourceFile(path, [lines], [None])
    if path.endswith("Makefile"):
        lines = [
            ".PHONY: test lint fmt run",
            "",
            "test:",
            "\tpytest -q",
            "",
            "lint:",
            f"\truff check {theme.package} tests",
            f"\tmypy {theme.package}",
            "",
            "fmt:",
            f"\truff format {theme.package} tests",
            "",
            "run:",
            "\tdocker compose up --build",
        ]
        return _SourceFile(path, [lines], [None])
    if path.endswith(".yml"):
        step = {
            "python": ["      - run: pip install -e '.[dev]'", "      - run: ruff check .", "      - run: pytest -q"],
            "typescript": ["      - run: npm ci", "      - run: npx tsc --noEmit", "      - run: npx vitest run"],
            "rust": ["      - run: cargo clippy --all-targets -- -D warnings", "      - run: cargo test"],
        }[theme.language]
        lines = [
            "name: ci",
            "on:",
            "  pull_request:",
            "  push:",
            "    branches: [main]",
            "jobs:",
            "  test:",
            "    runs-on: ubuntu-latest",
            "    steps:",
            "      - uses: actions/checkout@v4",
        ] + step
        return _SourceFile(path, [lines], [None])
    return _SourceFile(
        path, [["#!/usr/bin/env bash", "set -euo pipefail", "", 'cd "$(dirname "$0")/.."', 'exec "$@"']], [None]
    )
