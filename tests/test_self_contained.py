"""A clone of the repository is the whole project: nothing reads a path outside it.

Every session fixture lives under ``tests/fixtures/`` (provenance in ``tests/fixtures/SOURCES.md``);
no file names a folder beside the repository or a path of one machine as a source of data or
documentation; every Markdown file that code, comments or documents point at exists.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from compaction_lab.core.paths import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures"
#: tests/fixtures/ as a whole stays small enough to clone quickly.
FIXTURES_MAX_BYTES = 10_000_000

#: Paths of the machine this project was developed on, and of folders beside the repository. Spelled in
#: two parts so that this file does not match itself.
MACHINE_MARKERS = tuple(
    a + b
    for a, b in (
        ("../sha", "red"),
        ("/work/sha", "red"),
        ("/work/ma", "in"),
        ("/work/.mir", "ror"),
        ("/work/.lib", "rary"),
        ("/tmp/upst", "ream"),
    )
)
#: A path reaching above the repository root from code that knows where the root is.
ESCAPE = re.compile(r"\b(REPO_ROOT|repo_root\(\))\.parent\b")
#: Where machines keep checkouts, homes and data: code that opens an absolute path there depends on one
#: machine. (The system's own folders, /proc, /usr/bin/chromium, temporary folders, are fine.)
MACHINE_ROOTS = ("/work/", "/root/", "/home/", "/Users/", "/opt/", "/mnt/", "/data/", "~/")
#: Calls whose first argument is a path to read or open.
PATH_CALLS = {"Path", "PurePath", "PurePosixPath", "open", "read_text", "read_bytes"}
#: Agent instruction files: test data name them as the agents do; they are not documents of ours.
AGENT_FILES = {"AGENTS.md", "CLAUDE.md", "GEMINI.md", "CONVENTIONS.md"}
MD_REFERENCE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
#: First segments of a path reference that name this repository's files (others, such as codex-rs/ or
#: packages/, name files of the upstream repositories a strategy reproduces).
OUR_FOLDERS = {"docs", "lib", "tests", "benchmarks", "notebooks", "data", "papermill_params", "strategies"}
#: A path of this repository named in prose: ``tests/report/test_report.py``, ``docs/cost.md``.
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:tests|lib|docs|benchmarks|notebooks|data|papermill_params)/[\w./-]*\.[A-Za-z]{1,6})\b"
)
#: Paths prose names that are not files of the repository, each with why.
NOT_IN_REPO = {
    "data/ledger/ledger.sqlite": "the call ledger, created by a run",
    "data/checkpoints/checkpoints.sqlite": "the checkpoint store, created by a run",
    "data/archive/originals.sqlite": "the archive of originals, created by `compaction-lab import`",
    "data/shapes/NAME.json": "a call shape `compaction-lab capture` writes, NAME chosen by the user",
    "tests/x.py": "an example path inside a session",
    "tests/test_cart.py": "an example path inside a session",
    "tests/basic/test_history.py": "Aider's upstream test file (Aider-AI/aider)",
    "tests/test_history_processors.py": "SWE-agent's upstream test file (SWE-agent/SWE-agent)",
}
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def tracked_files() -> list[Path]:
    """The repository's files (tracked, or new and not ignored), as a clone will have them."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted(REPO_ROOT / name for name in out.split("\0") if name and (REPO_ROOT / name).is_file())


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:4096]:
        return None
    return data.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- the scanners


def machine_markers_in(text: str) -> list[str]:
    """The machine paths and outside folders that `text` names."""
    return [m for m in MACHINE_MARKERS if m in text]


def outside_paths_in_code(source: str) -> list[tuple[int, str]]:
    """(line, path) of absolute paths outside the system's folders that Python `source` opens or builds.

    Also a step above the repository root (``REPO_ROOT.parent``, ``repo_root().parent``).
    """
    found = [(source.count("\n", 0, m.start()) + 1, m.group(0)) for m in ESCAPE.finditer(source)]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        arg = node.args[0]
        if name in PATH_CALLS and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if arg.value.startswith(MACHINE_ROOTS):
                found.append((node.lineno, arg.value))
    return found


def prose_of_python(source: str) -> str:
    """The comments and docstrings of Python `source`: where it points a reader at documents."""
    parts = [
        tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    return "\n".join(parts)


def md_references(prose: str) -> list[str]:
    """Markdown file names (``docs/cost.md``, ``README.md``) mentioned in `prose`, URLs left out."""
    prose = re.sub(r"https?://\S+", "", prose)
    return MD_REFERENCE.findall(prose)


def unresolved(reference: str, where: Path, basenames: set[str]) -> bool:
    """Whether a Markdown reference made in file `where` names no file of the repository.

    A path is tried from the referring file's folder, the repository root and the library package; a bare
    name must be some tracked file's name (or an agent's instruction file, which test data name).
    """
    if "/" not in reference:
        return reference not in basenames and reference not in AGENT_FILES
    ref = reference.removeprefix("./")
    if ref.split("/", 1)[0] not in OUR_FOLDERS | {".."}:
        return False
    roots = (where.parent, REPO_ROOT, REPO_ROOT / "lib" / "compaction_lab")
    return not any((root / ref).resolve().is_file() for root in roots)


def broken_links(markdown: str, where: Path) -> list[str]:
    """Relative links of a Markdown document that point at no file or folder of the repository."""
    bad = []
    for target in MD_LINK.findall(markdown):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (where.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or REPO_ROOT.resolve() not in (path, *path.parents):
            bad.append(target)
    return bad


# --------------------------------------------------------------------------- the repository


@pytest.fixture(scope="module")
def files() -> list[Path]:
    return tracked_files()


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def test_no_file_names_a_folder_beside_the_repository_or_a_machine_path(files):
    me = Path(__file__).resolve()
    offenders = []
    for path in files:
        if path.resolve() == me or FIXTURES in path.parents:
            continue  # fixtures are other agents' logs: their paths are data
        text = text_of(path)
        if text is not None and (found := machine_markers_in(text)):
            offenders.append(f"{_rel(path)}: {found}")
    assert offenders == []


@pytest.mark.slow
def test_no_code_opens_a_path_outside_the_repository(files):
    me = Path(__file__).resolve()
    offenders = []
    for path in files:
        if path.suffix == ".py" and FIXTURES not in path.parents and path.resolve() != me:
            for line, found in outside_paths_in_code(path.read_text(encoding="utf-8")):
                offenders.append(f"{_rel(path)}:{line}: {found}")
    assert offenders == []


def test_notebooks_and_profiles_name_no_outside_path(files):
    offenders = []
    for path in files:
        if path.suffix in (".ipynb", ".yaml", ".yml", ".toml", ".cfg") or path.name in ("Makefile", "run"):
            text = path.read_text(encoding="utf-8")
            if machine_markers_in(text) or ESCAPE.search(text):
                offenders.append(_rel(path))
    assert offenders == []


#: The files besides Python's and the Makefile whose whole text is prose that can point a reader somewhere.
PROSE_SUFFIXES = (".md", ".ipynb", ".yaml", ".yml")


@pytest.fixture(scope="module")
def prose(files) -> dict[Path, str]:
    """The prose of every non-fixture file that can point a reader somewhere: a Python file's docstrings and
    comments (parsed once here for the tests below), the whole text of the Makefile and of `PROSE_SUFFIXES`."""
    out = {}
    for path in files:
        if FIXTURES in path.parents:
            continue
        if path.suffix == ".py":
            out[path] = prose_of_python(path.read_text(encoding="utf-8"))
        elif path.name == "Makefile" or path.suffix in PROSE_SUFFIXES:
            out[path] = path.read_text(encoding="utf-8")
    return out


@pytest.mark.slow
def test_every_markdown_file_code_points_at_exists(files, prose):
    """Python's prose, the Makefile and the documents name Markdown files that exist."""
    basenames = {p.name for p in files}
    missing = []
    for path, text in prose.items():
        if path.suffix not in (".py", ".md") and path.name != "Makefile":
            continue
        missing += [f"{_rel(path)}: {ref}" for ref in md_references(text) if unresolved(ref, path, basenames)]
    assert missing == []


@pytest.mark.slow
def test_every_repository_path_named_in_prose_exists(prose):
    """Docstrings, comments, documents, the Makefile, notebooks and profiles name files that exist."""
    missing = []
    for path, text in prose.items():
        for ref in REPO_PATH.findall(text):
            if any(c in ref for c in "<*{") or ref in NOT_IN_REPO:
                continue  # a pattern or placeholder, or listed
            if not (REPO_ROOT / ref).exists() and not (path.parent / ref).exists():
                missing.append(f"{_rel(path)}: {ref}")
    assert missing == []


def test_every_link_in_the_documents_resolves(files):
    bad = []
    for path in files:
        if path.suffix == ".md" and FIXTURES not in path.parents:
            bad += [f"{_rel(path)}: {t}" for t in broken_links(path.read_text(encoding="utf-8"), path)]
    assert bad == []


def test_the_design_is_in_docs_and_the_readme_links_it():
    docs = REPO_ROOT / "docs"
    for name in (
        "README.md",
        "architecture.md",
        "session-formats.md",
        "strategies.md",
        "exams.md",
        "cost.md",
        "run-folder.md",
    ):
        assert (docs / name).is_file(), name
    index = (docs / "README.md").read_text(encoding="utf-8")
    for name in ("architecture.md", "session-formats.md", "strategies.md", "exams.md", "cost.md", "run-folder.md"):
        assert f"({name})" in index, name
    assert "(docs/README.md)" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    strategies_md = (docs / "strategies.md").read_text(encoding="utf-8")
    # The rules and their upstream pins are in docs/strategies.md itself, one section per strategy.
    assert "UPSTREAM.md" not in strategies_md and "### codex: upstream pins" in strategies_md


def test_every_document_is_in_the_index():
    """docs/README.md lists every document of docs/ (issue 48: what left the README is found from there)."""
    index = (REPO_ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    unlisted = [p.name for p in sorted((REPO_ROOT / "docs").glob("*.md")) if p.name != "README.md"]
    assert [name for name in unlisted if f"({name})" not in index] == []


def test_fixtures_are_small_and_every_public_one_has_its_source(files):
    fixtures = [p for p in files if FIXTURES in p.parents]
    assert sum(p.stat().st_size for p in fixtures) < FIXTURES_MAX_BYTES
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    public = [p for p in fixtures if FIXTURES / "public" in p.parents]
    assert public, "the real public sessions (tests/fixtures/public) are missing"
    assert [p for p in public if f"| {p.relative_to(FIXTURES)} |" not in sources] == []


# --------------------------------------------------------------------------- the scanners catch what they should


def test_scanners_catch_an_outside_fixture_path_and_a_missing_document(tmp_path):
    code = (
        "from pathlib import Path\n"
        'SHARED = Path("/work/elsewhere/fixtures/sessions")\n'
        'UP = REPO_ROOT.parent / "x"\n'
        'CHROME = Path("/usr/bin/chromium")\n'
        'def f():\n    """See ``docs/nowhere.md`` and STRATEGIES.md."""\n'
    )
    assert outside_paths_in_code(code) == [(3, "REPO_ROOT.parent"), (2, "/work/elsewhere/fixtures/sessions")]
    refs = md_references(prose_of_python(code))
    assert refs == ["docs/nowhere.md", "STRATEGIES.md"]
    assert all(unresolved(r, REPO_ROOT / "lib" / "x.py", {"README.md"}) for r in refs)
    assert not unresolved("strategies/base.py", REPO_ROOT / "lib" / "x.py", set())
    assert unresolved("strategies/UPSTREAM.md", REPO_ROOT / "lib" / "x.py", set())
    assert not unresolved("AGENTS.md", REPO_ROOT / "x.py", set())
    assert not unresolved("codex-rs/core/templates/compact/prompt.md", REPO_ROOT / "x.py", set())
    assert machine_markers_in("see " + MACHINE_MARKERS[0] + "/fixtures") == [MACHINE_MARKERS[0]]
    doc = tmp_path / "a.md"
    assert broken_links("[x](b.md) [y](https://example.com) [z](#top)", doc) == ["b.md"]
