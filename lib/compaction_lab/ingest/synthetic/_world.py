"""The project's state during a chain: its files, edits and git history.

`_World` owns what must stay consistent across a chain: which files exist, their
current content (generated lazily, on first use, from the chain's stream), what
changed since the last commit, and the commit history. File views (read, grep,
ls) and git outputs live here because they are views of that state; outputs that
only draw on it (test runs, linters, HTTP, logs) are in `_testruns` and `_tools`.
"""

from __future__ import annotations

import difflib
import random
import re
from datetime import datetime, timedelta
from typing import Any

from compaction_lab.ingest.synthetic._files import (
    _gen_config,
    _gen_module,
    _gen_schema,
    _gen_test_file,
    _misc_file,
    _py_function,
    _rs_function,
    _SourceFile,
    _test_block,
    _ts_component,
    _ts_function,
)
from compaction_lab.ingest.synthetic._project import (
    _ATTRS,
    _COMMIT_THINGS,
    _COMMIT_VERBS,
    _TEST_CONDITIONS,
    _TZ_OFFSETS,
    _Area,
    _area_ctx,
    _Project,
    _test_title,
)
from compaction_lab.ingest.synthetic._random import _BASE_TIME, _fill, _hex, _pick


class _World:
    """The project's state during a chain (files, working tree, git history) and the tool views of it.

    Parameters
    ----------
    rng : random.Random
        The chain's stream; file contents are drawn from it lazily, on first use.
    project : _Project
        The project the chain works on.
    """

    def __init__(self, rng: random.Random, project: _Project) -> None:
        self.rng = rng
        self.project = project
        self.theme = project.theme
        self.files: dict[str, _SourceFile] = {}
        self.committed: dict[str, list[str]] = {}  # path -> lines at HEAD, for files changed since
        self.untracked: list[str] = []
        self.schema: dict[str, tuple[_Area, str, str]] = {}  # path -> (area, rev, down_rev)
        self.paths: list[str] = []
        self.history: list[tuple[str, str, datetime, str]] = []  # (sha, author, when, subject), oldest first
        self._init_paths()
        self._init_history()

    # -- inventory -------------------------------------------------------------------

    def _init_paths(self) -> None:
        """Lay out the file inventory: area modules and tests, configs, misc files, then a schema history."""
        rng, theme = self.rng, self.theme
        for area in theme.areas:
            self.paths.extend(area.modules)
            self.paths.append(area.test)
        self.paths.extend(theme.configs)
        extras = {
            "python": ["README.md", "Makefile", ".github/workflows/ci.yml", "scripts/dev.sh"],
            "typescript": ["README.md", ".github/workflows/ci.yml", "scripts/dev.sh"],
            "rust": ["README.md", ".github/workflows/ci.yml", "scripts/dev.sh"],
        }[theme.language]
        self.paths.extend(extras)
        down = "None"
        for i in range(rng.randint(3, 7)):
            area = _pick(rng, theme.areas)
            self._add_schema(area, i + 1, down)
            down = self.schema[self.paths[-1]][1]

    def _add_schema(self, area: _Area, n: int, down: str) -> str:
        """Register the `n`-th migration / schema file of `area` (named per the theme's schema kind)."""
        kind = self.theme.schema_kind
        col = _pick(self.rng, _ATTRS)
        rev = _hex(self.rng, 12)
        if kind == "alembic":
            path = f"{self.theme.schema_dir}/{rev}_add_{col}_to_{area.table}.py"
        elif kind == "sql":
            path = f"{self.theme.schema_dir}/V{n:03d}__{area.table}_{col}.sql"
        elif kind == "zod":
            path = f"{self.theme.schema_dir}/{area.noun}{'' if n == 1 else f'.v{n}'}.ts"
        else:
            path = f"{self.theme.schema_dir}/{area.noun}.v{n}.schema.json"
        self.schema[path] = (area, rev, down)
        self.paths.append(path)
        return path

    def _init_history(self) -> None:
        """Make the commits before the session starts, spread over the weeks before the epoch."""
        rng = self.rng
        when = _BASE_TIME - timedelta(days=rng.randint(40, 400))
        for _ in range(rng.randint(25, 80)):
            when += timedelta(minutes=rng.randint(20, 60 * 72))
            self.history.append((_hex(rng, 40), _pick(rng, self.project.authors)[0], when, self._commit_subject()))

    def _commit_subject(self) -> str:
        """Draw a commit subject line about some area (``Fix rounding in compute_totals``)."""
        area = _pick(self.rng, self.theme.areas)
        ctx = _area_ctx(self.rng, self.project, area)
        return f"{_pick(self.rng, _COMMIT_VERBS)} {_fill(_pick(self.rng, _COMMIT_THINGS), ctx)}"

    def area_of(self, path: str) -> _Area | None:
        """Return the area whose module or test file `path` is (None for config, schema and misc files)."""
        for area in self.theme.areas:
            if path in area.modules or path == area.test:
                return area
        return None

    def file(self, path: str) -> _SourceFile:
        """Return the current content of `path`, generated on first use."""
        f = self.files.get(path)
        if f is None:
            area = self.area_of(path)
            if area is not None and path == area.test:
                f = _gen_test_file(self.rng, self.project, area)
            elif area is not None:
                f = _gen_module(self.rng, self.project, area, path)
            elif path in self.schema:
                a, rev, down = self.schema[path]
                f = _gen_schema(self.rng, self.project, a, path, rev, down)
            elif path in self.theme.configs:
                f = _gen_config(self.rng, self.project, path)
            else:
                f = _misc_file(self.rng, self.project, path)
            self.files[path] = f
        return f

    def _touch(self, path: str) -> _SourceFile:
        """`path` about to change: remember its HEAD content first, so status and diff can compare."""
        f = self.file(path)
        if path not in self.committed and path not in self.untracked:
            self.committed[path] = f.lines()
        return f

    # -- file tools ------------------------------------------------------------------

    def read(self, path: str) -> tuple[dict[str, Any], str]:
        """Arguments and output of reading a file (cat -n style, ranged for big files)."""
        lines = self.file(path).lines()
        args: dict[str, Any] = {"path": path}
        lo, hi = 0, len(lines)
        if len(lines) > 400 and self.rng.random() < 0.5:
            lo = self.rng.randrange(0, len(lines) - 200)
            hi = min(len(lines), lo + self.rng.choice((150, 200, 250, 300)))
            args.update(offset=lo + 1, limit=hi - lo)
        body = "\n".join(f"{i + 1:>6}\t{lines[i]}" for i in range(lo, hi))
        return args, body

    def edit(self, path: str, name: str | None = None) -> tuple[dict[str, Any], str, str]:
        """Replace one named block of `path`; return (args, output, edited block name)."""
        f = self._touch(path)
        cands = f.editable()
        if not cands:
            mark = "//" if path.endswith((".ts", ".tsx", ".rs", ".js", ".mjs")) else "#"
            f.blocks[0] = f.blocks[0] + ["", f"{mark} reviewed {self.rng.randint(2, 28)} Mar"]
            i = 0
        else:
            i = f.names.index(name) if name is not None and name in f.names else _pick(self.rng, cands)
        old = f.blocks[i]
        new = self._rewrite_block(path, f, i)
        f.blocks[i] = new
        start = f.start_of(i)
        lines = f.lines()
        lo, hi = max(0, start - 4), min(len(lines), start - 1 + len(new) + 3)
        snippet = "\n".join(f"{k + 1:>6}\t{lines[k]}" for k in range(lo, hi))
        old_s = "\n".join(x for x in old if x.strip())
        new_s = "\n".join(x for x in new if x.strip())
        args = {"path": path, "old_string": old_s, "new_string": new_s}
        out = (
            f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet of "
            f"the edited file:\n{snippet}"
        )
        return args, out, f.names[i] or path

    def _rewrite_block(self, path: str, f: _SourceFile, i: int) -> list[str]:
        """Write new content for block `i`: a regenerated test or function, or a config section, one value changed."""
        rng = self.rng
        area = self.area_of(path)
        name = f.names[i]
        if area is not None and path == area.test and name:
            pair = next((p for p in self.project.tests[area.name] if _test_title(self.project, *p) == name), None)
            if pair:
                return _test_block(rng, self.project, area, *pair)
        if area is not None and name:
            ctx = _area_ctx(rng, self.project, area)
            if self.project.lang == "python":
                return _py_function(rng, ctx, name, method=True)
            if self.project.lang == "typescript":
                return _ts_component(rng, ctx, name) if name == area.cls else _ts_function(rng, ctx, name)
            return _rs_function(rng, ctx, name)
        # Config section: change one numeric value, keep the rest.
        block = list(f.blocks[i])
        idx = [k for k, ln in enumerate(block) if re.search(r"[:=] *\d+(\.\d+)?\s*$", ln)]
        if idx:
            k = _pick(rng, idx)
            block[k] = re.sub(r"\d+(\.\d+)?\s*$", str(rng.choice((2, 3, 5, 8, 10, 15, 20, 30, 60, 120, 250))), block[k])
        else:
            block.append(block[-1])
        return block

    def add_test(self, area: _Area) -> tuple[dict[str, Any], str, str]:
        """Append a new test for `area`; return (args, output, test title)."""
        f = self._touch(area.test)
        tests = self.project.tests[area.name]
        for _ in range(50):
            pair = (_pick(self.rng, area.funcs), _pick(self.rng, _TEST_CONDITIONS))
            if pair not in tests:
                break
        tests.append(pair)
        title = _test_title(self.project, *pair)
        block = _test_block(self.rng, self.project, area, *pair)
        at = len(f.blocks) - (1 if f.names[-1] is None and len(f.blocks) > 1 else 0)
        anchor = [x for x in f.blocks[at - 1] if x.strip()][-3:]
        f.blocks.insert(at, block)
        f.names.insert(at, title)
        start = f.start_of(at)
        lines = f.lines()
        snippet = "\n".join(
            f"{k + 1:>6}\t{lines[k]}" for k in range(max(0, start - 4), min(len(lines), start + len(block) + 2))
        )
        args = {
            "path": area.test,
            "old_string": "\n".join(anchor),
            "new_string": "\n".join(anchor + [x for x in block if x.strip()]),
        }
        out = (
            f"The file {area.test} has been updated. Here's the result of running `cat -n` on a snippet of "
            f"the edited file:\n{snippet}"
        )
        return args, out, title

    def write_schema(self, area: _Area) -> tuple[dict[str, Any], str, str]:
        """Create a new migration / schema file; return (args, output, path)."""
        latest = [p for p in self.paths if p in self.schema]
        down = self.schema[latest[-1]][1] if latest else "None"
        path = self._add_schema(area, len(latest) + 1, down)
        self.untracked.append(path)
        content = self.file(path).text()
        return {"path": path, "content": content}, f"File created successfully at: {path}", path

    def grep(self, pattern: str, scope: str) -> str:
        """``grep -rn`` hits of `pattern` in the generated files under `scope`."""
        hits: list[str] = []
        roots = scope.split()
        for path in self.paths:
            if not any(r == "." or path.startswith(r.rstrip("/") + "/") or path == r for r in roots):
                continue
            if not path.endswith((".py", ".ts", ".tsx", ".rs", ".sql", ".yaml", ".yml", ".toml", ".json")):
                continue
            for k, ln in enumerate(self.file(path).lines()):
                if pattern in ln:
                    hits.append(f"{path}:{k + 1}:{ln}")
                    if len(hits) >= 1500:
                        return "\n".join(hits)
        return "\n".join(hits) if hits else ""

    def ls(self, directory: str) -> str:
        """``ls -la`` of a directory, from the known paths."""
        rng = self.rng
        d = directory.rstrip("/")
        prefix = "" if d in ("", ".") else d + "/"
        entries: dict[str, bool] = {}  # name -> is_dir, insertion-ordered
        for p in self.paths:
            if p.startswith(prefix):
                rest = p[len(prefix) :]
                entries.setdefault(rest.split("/", 1)[0], "/" in rest)
        if self.project.lang == "python" and prefix:
            entries.setdefault("__init__.py", False)
            entries.setdefault("__pycache__", True)
        lines = [
            f"total {rng.randint(8, 96)}",
            f"drwxr-xr-x {rng.randint(2, 9):>2} dev dev 4096 Mar 11 {rng.randint(8, 9):02d}:{rng.randint(0, 59):02d} .",
            f"drwxr-xr-x {rng.randint(3, 14):>2} dev dev 4096 Mar 11 08:{rng.randint(0, 59):02d} ..",
        ]
        for name in sorted(entries):
            is_dir = entries[name]
            full = prefix + name
            size = 4096 if is_dir else (len(self.file(full).text()) if full in self.paths else 0)
            mon, day = _pick(
                rng, (("Jan", rng.randint(2, 31)), ("Feb", rng.randint(1, 29)), ("Mar", rng.randint(1, 11)))
            )
            lines.append(
                f"{'d' if is_dir else '-'}rw{'x' if is_dir else '-'}r-{'x' if is_dir else '-'}r-{'x' if is_dir else '-'} "
                f"{rng.randint(2, 6) if is_dir else 1:>2} dev dev {size:>6} {mon} {day:>2} "
                f"{rng.randint(8, 19):02d}:{rng.randint(0, 59):02d} {name}"
            )
        return "\n".join(lines)

    # -- git ---------------------------------------------------------------------------

    def dirty(self) -> list[str]:
        """Tracked files whose content differs from HEAD, in the order they were first touched."""
        return [p for p in self.committed if self.file(p).lines() != self.committed[p]]

    def git_status(self) -> str:
        """``git status`` of the working tree."""
        out = [f"On branch {self.project.branch}"]
        dirty = self.dirty()
        if not dirty and not self.untracked:
            return "\n".join(out + ["nothing to commit, working tree clean"])
        if dirty:
            out += [
                "Changes not staged for commit:",
                '  (use "git add <file>..." to update what will be committed)',
                '  (use "git restore <file>..." to discard changes in working directory)',
            ]
            out += [f"\tmodified:   {p}" for p in dirty]
            out.append("")
        if self.untracked:
            out += ["Untracked files:", '  (use "git add <file>..." to include in what will be committed)']
            out += [f"\t{p}" for p in self.untracked]
            out.append("")
        out.append('no changes added to commit (use "git add" and/or "git commit -a")')
        return "\n".join(out)

    def git_diff(self) -> str:
        """``git diff`` of the dirty files against HEAD (real unified diffs)."""
        chunks: list[str] = []
        for p in self.dirty():
            new = self.file(p).lines()
            chunks.append(f"diff --git a/{p} b/{p}")
            chunks.append(f"index {_hex(self.rng, 7)}..{_hex(self.rng, 7)} 100644")
            chunks.extend(difflib.unified_diff(self.committed[p], new, f"a/{p}", f"b/{p}", lineterm="", n=3))
        return "\n".join(chunks)

    def git_commit(self, message: str, when: datetime) -> str:
        """Commit everything (``git add -A && git commit``) and return git's summary."""
        dirty, new = self.dirty(), list(self.untracked)
        ins = dels = 0
        for p in dirty:
            for ln in difflib.unified_diff(self.committed[p], self.file(p).lines(), lineterm="", n=0):
                if ln.startswith("+") and not ln.startswith("+++"):
                    ins += 1
                elif ln.startswith("-") and not ln.startswith("---"):
                    dels += 1
        for p in new:
            ins += len(self.file(p).lines())
        sha = _hex(self.rng, 40)
        self.history.append((sha, self.project.authors[0][0], when, message))
        self.committed.clear()
        self.untracked.clear()
        n = len(dirty) + len(new)
        out = [
            f"[{self.project.branch} {sha[:7]}] {message}",
            f" {n} file{'s' if n != 1 else ''} changed, {ins} insertion{'s' if ins != 1 else ''}(+), "
            f"{dels} deletion{'s' if dels != 1 else ''}(-)",
        ]
        out += [f" create mode 100644 {p}" for p in new]
        return "\n".join(out)

    def git_log(self, n: int, oneline: bool) -> str:
        """``git log`` of the last `n` commits, newest first."""
        out: list[str] = []
        for sha, author, when, subject in reversed(self.history[-n:]):
            if oneline:
                out.append(f"{sha[:7]} {subject}")
                continue
            email = next((e for a, e in self.project.authors if a == author), "dev@example.com")
            out += [
                f"commit {sha}",
                f"Author: {author} <{email}>",
                f"Date:   {when.strftime('%a %b %d %H:%M:%S %Y')} {_pick(self.rng, _TZ_OFFSETS)}",
                "",
                f"    {subject}",
                "",
            ]
        return "\n".join(out).rstrip()
