"""Take the README's screenshot: the top of a default run's ``report.html`` (`make screenshot`).

Runs the default profile into a temporary results folder (or uses ``--run RUN_DIR``), opens its
``report.html`` in Debian's headless Chromium through the playwright wheel with the network cut (as
``tests/browser.py`` does; never ``playwright install``), and writes the first 1280x900 CSS pixels as
``docs/img/report.png``, quantised with Pillow to stay small. Not a benchmark: ``benchmarks/run.py``
runs only ``bench_*.py``. Exit 1 with one line when Chromium is missing or the run fails.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
from pathlib import Path

from compaction_lab.core.paths import REPO_ROOT

#: Where the README shows it.
OUT = REPO_ROOT / "docs" / "img" / "report.png"
#: The viewport captured, in CSS pixels.
WIDTH, HEIGHT = 1280, 900
#: A README image stays below this size.
MAX_BYTES = 300_000


def default_run(results: Path) -> Path:
    """Run the default profile into `results` and return its run folder (the command's last line)."""
    cmd = [str(Path(sys.executable).with_name("compaction-lab")), "run", "--profile", "default", "--quiet"]
    proc = subprocess.run([*cmd, "--results", str(results)], capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"screenshot: the default run failed:\n{proc.stderr[-2000:]}")
    return Path(lines[-1].strip())


def shoot(report: Path, out: Path) -> int:
    """Write the top of `report` (a local HTML file) to `out` as a palette PNG; return its size in bytes."""
    sys.path.insert(0, str(REPO_ROOT))  # tests/browser.py holds the offline Chromium flags
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, is_local, require_chromium

    try:
        exe = require_chromium()
    except RuntimeError as err:
        raise SystemExit(f"screenshot: {err}") from None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(exe), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.route("**/*", lambda route: route.continue_() if is_local(route.request.url) else route.abort())
            page.goto(report.resolve().as_uri(), wait_until="load")
            png = page.screenshot(full_page=False)
        finally:
            browser.close()
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, optimize=True)
    return out.stat().st_size


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a run folder to use instead of running the default profile")
    parser.add_argument("--out", type=Path, default=OUT, help="the PNG written (default: docs/img/report.png)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="screenshot-") as tmp:
        run = args.run or default_run(Path(tmp))
        report = run / "report.html"
        if not report.is_file():
            raise SystemExit(f"screenshot: {report} does not exist (not a finished run folder)")
        size = shoot(report, args.out)
    print(f"{args.out}: {WIDTH}x{HEIGHT} from {report} ({size:,} bytes)")
    if size > MAX_BYTES:
        print(f"screenshot: {size:,} bytes is over the {MAX_BYTES:,} a README image should stay below", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
