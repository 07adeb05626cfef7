"""environment.yml and pyproject.toml list the same dependencies; the Makefile and CI agree with the README."""

import re
import sys
from pathlib import Path

import yaml

from compaction_lab.core.paths import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (requires-python) has no tomllib; tomli is the package it was taken from
    import tomli as tomllib


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_deps() -> set[str]:
    proj = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    deps = set(proj["dependencies"])
    for extra in proj.get("optional-dependencies", {}).values():
        deps |= set(extra)
    return {_name(d) for d in deps}


def _env_deps() -> set[str]:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            names |= {_name(d) for d in dep.get("pip", []) if not d.startswith("-e")}
        else:
            names.add(_name(dep))
    return names - {"python", "pip"}


def test_environment_and_pyproject_agree():
    assert _env_deps() == _pyproject_deps()


def test_environment_installs_the_package_editable():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    assert "-e ." in pip


def test_console_script_is_declared():
    proj = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert proj["scripts"]["compaction-lab"] == "compaction_lab.cli:main"


def test_ci_calls_the_readme_test_command():
    readme = (REPO_ROOT / "README.md").read_text()
    assert "make test" in readme and "make run" in readme
    assert "make test" in (REPO_ROOT / ".ci" / "run").read_text()


def test_every_make_target_the_readme_and_docs_name_exists():
    """`make X` in README.md and docs/*.md is a target of the Makefile (`make help` lists it)."""
    mk = (REPO_ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-zA-Z_-]+):", mk, re.MULTILINE))
    named = {}
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"(?:^|`)make ([a-z][a-z_-]*)\b", doc.read_text(encoding="utf-8"), re.MULTILINE):
            named.setdefault(target, doc.name)
    assert {"run", "test", "screenshot"} <= set(named)
    assert re.findall(r"(?:^|`)make ([a-z][a-z_-]*)\b", "to make it so, `make nope`", re.MULTILINE) == ["nope"]
    assert {t: d for t, d in named.items() if t not in targets} == {}


def test_makefile_targets():
    mk = (REPO_ROOT / "Makefile").read_text()
    for target in ("setup", "run", "test", "lab", "bench", "help", "screenshot"):
        assert re.search(rf"^{target}:", mk, re.MULTILINE), target
    assert re.search(r"^run: setup", mk, re.MULTILINE) and re.search(r"^test: setup", mk, re.MULTILINE)


def test_lib_is_not_ignored():
    ignored = (REPO_ROOT / ".gitignore").read_text().splitlines()
    assert "lib/" not in ignored and "data/results/" in ignored


def test_every_lint_or_type_ignore_says_why():
    """`make lint` allows no blanket ignores: a ``# noqa`` / ``# type: ignore`` names its code and a reason."""
    bare = re.compile(r"#\s*(noqa|type:\s*ignore)(?![:\[])")
    no_reason = re.compile(r"#\s*(noqa:\s*[A-Z0-9, ]+|type:\s*ignore\[[a-z-, ]+\])\s*$")
    found = []
    for folder in ("lib", "tests", "benchmarks"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # this checker quotes the comments it looks for
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if bare.search(line) or no_reason.search(line):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{n}: {line.strip()}")
    assert found == []
    assert no_reason.search("x = 1  # type: ignore[misc]") and not no_reason.search("x  # noqa: E402  (why)")
    assert bare.search("x = 1  # noqa") and not bare.search("x  # noqa: F401  (loaded now)")


def test_importing_altair_stays_light_with_jupyterlab_installed():
    """The jsonschema pin holds: no Earley parser is built when a notebook kernel imports altair.

    jsonschema 4.24+ imports rfc3987-syntax (pulled in by jupyterlab's jupyter-events), which costs
    ~1 s per kernel; pyproject.toml pins jsonschema below it.
    """
    import subprocess
    import sys

    code = "import sys, altair, jupyterlab; print(sorted(m for m in ('rfc3987_syntax', 'lark') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
