"""The notebooks open with the project's kernel, the one `make setup` registers (issue 48)."""

from __future__ import annotations

import json
import re

from compaction_lab.core import paths
from tests.helpers import REPO_ROOT


def _makefile_kernel() -> tuple[str, str]:
    text = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    name = re.search(r"^KERNEL_NAME := (\S+)$", text, re.M)
    display = re.search(r'ipykernel install --sys-prefix --name \$\(KERNEL_NAME\) --display-name "([^"]+)"', text)
    assert name and display, "the Makefile no longer registers the project's kernel"
    setup = re.search(r"^setup: (.*?)##", text, re.M)
    assert setup and "$(KERNEL_SPEC)" in setup.group(1), "make setup must register the kernel"
    return name.group(1), display.group(1)


def test_every_notebook_names_the_kernel_make_setup_registers():
    name, display = _makefile_kernel()
    notebooks = sorted(paths.NOTEBOOKS_DIR.glob("*.ipynb"))
    assert notebooks
    for nb in notebooks:
        spec = json.loads(nb.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
        assert (spec["name"], spec["display_name"], spec["language"]) == (name, display, "python"), nb.name
