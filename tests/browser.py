"""Open local HTML files in headless Chromium and check that their figures rendered offline.

Used by tests/report/test_report_browser.py. The browser is Debian's system
``chromium`` (installed by ``make browser``, a prerequisite of ``make test``);
the Python driver is the PyPI ``playwright`` wheel, which bundles its own
driver, so nothing is downloaded at run time (never run ``playwright install``).

Network is cut three ways, and every attempt is recorded rather than silently
dropped, so a page that *tries* to reach the internet fails the check:

* ``--host-resolver-rules`` makes every host name unresolvable and
  ``--proxy-server`` points anything else at a dead local port;
* a context-wide route lets ``file:``, ``data:``, ``blob:`` and ``about:``
  through and aborts (and records) everything else;
* every request, websocket and blocked route is recorded as it is made.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

#: Debian's chromium package installs its launcher here.
SYSTEM_CHROMIUM = Path("/usr/bin/chromium")

#: URL schemes that never leave the machine.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")

#: Flags for running headless as root with no background traffic to Google hosts.
#: Playwright itself adds ``--headless`` and a fresh, empty temporary
#: ``--user-data-dir`` for every launch (it refuses one passed in ``args``).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]

#: Inline SVGs smaller than this (either side, CSS px) are icons, not figures.
MIN_SVG_PX = 40

#: Seconds to wait for vega-embed charts to draw after the page has loaded.
VEGA_WAIT_S = 5.0


@dataclass(frozen=True)
class PageCheck:
    """What one page showed.

    Attributes
    ----------
    path : Path
        The HTML file opened.
    figures : int
        Rendered figures: loaded images, top-level SVGs (not icons) and
        vega-embed canvases, each with a non-zero box.
    empty_figures : list of str
        Figures that are there but show nothing: broken images, zero-size
        boxes, SVGs with nothing drawn, vega-embed containers with no chart.
    external_requests : list of str
        URLs the page asked for that are not file:/data:/blob:/about: (all blocked).
    console_errors : list of str
        Console errors and uncaught page exceptions.
    """

    path: Path
    figures: int
    empty_figures: list[str]
    external_requests: list[str]
    console_errors: list[str]

    @property
    def ok(self) -> bool:
        """At least one figure, none empty, no request left the machine."""
        return self.figures > 0 and not self.empty_figures and not self.external_requests

    def describe(self) -> str:
        """One readable block for assertion messages."""
        lines = [f"{self.path.name}: {self.figures} figure(s)"]
        lines += [f"  empty figure: {e}" for e in self.empty_figures]
        lines += [f"  external request: {u}" for u in self.external_requests]
        lines += [f"  console error: {c}" for c in self.console_errors[:10]]
        return "\n".join(lines)


def chromium_path() -> Path | None:
    """The system Chromium executable, or None when it is not installed."""
    if SYSTEM_CHROMIUM.exists():
        return SYSTEM_CHROMIUM
    found = shutil.which("chromium")
    return Path(found) if found else None


def require_chromium() -> Path:
    """The system Chromium executable; RuntimeError naming `make browser` when it is not installed."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("chromium is not installed; run `make browser` (Debian package `chromium`)")
    return exe


def is_local(url: str) -> bool:
    """Whether a URL stays on the machine (file:, data:, blob:, about:)."""
    return url.lower().startswith(LOCAL_SCHEMES)


# Runs in the page. Returns {"figures": n, "empty": [descriptions]}.
_SCAN_JS = r"""
(minSvg) => {
  const out = {figures: 0, empty: []};
  const shown = (el) => (el.checkVisibility
      ? el.checkVisibility({checkVisibilityCSS: true})
      : el.getClientRects().length > 0);
  const box = (el) => el.getBoundingClientRect();
  const where = (el) => {
    const id = el.id ? '#' + el.id : '';
    const holder = el.closest('[id]');
    const near = !id && holder ? ' in #' + holder.id : '';
    return el.tagName.toLowerCase() + id + near;
  };
  const drawn = 'path,rect,circle,ellipse,line,polyline,polygon,text,image,use';

  for (const img of document.images) {
    if (!shown(img)) continue;                       // inside a hidden element
    const r = box(img);
    const src = (img.currentSrc || img.src || '').slice(0, 80);
    if (!img.complete || img.naturalWidth === 0) {
      out.empty.push(`broken image ${where(img)} src=${src}`);
    } else if (r.width <= 0 || r.height <= 0) {
      out.empty.push(`zero-size image ${where(img)} src=${src}`);
    } else {
      out.figures++;
    }
  }

  for (const svg of document.querySelectorAll('svg')) {
    if (svg.parentElement && svg.parentElement.closest('svg')) continue;  // nested
    if (!shown(svg)) continue;
    const r = box(svg);
    if (r.width < minSvg || r.height < minSvg) continue;                 // icon
    if (!svg.querySelector(drawn)) {
      out.empty.push(`blank svg ${where(svg)} (${Math.round(r.width)}x${Math.round(r.height)})`);
    } else {
      out.figures++;
    }
  }

  for (const canvas of document.querySelectorAll('.vega-embed canvas')) {
    const r = box(canvas);
    if (shown(canvas) && r.width > 0 && r.height > 0) out.figures++;
  }

  // A vega-embed container must hold a chart with a non-zero box.
  for (const el of document.querySelectorAll('.vega-embed')) {
    if (!shown(el)) continue;
    const chart = [...el.querySelectorAll('svg, canvas')].some((c) => {
      const r = box(c);
      return r.width >= minSvg && r.height >= minSvg;
    });
    if (!chart) out.empty.push(`vega-embed ${where(el)} drew no chart`);
  }
  return out;
}
"""

# True once every vega-embed container on the page holds a drawn chart.
_VEGA_READY_JS = r"""
(minSvg) => [...document.querySelectorAll('.vega-embed')].every((el) =>
  [...el.querySelectorAll('svg, canvas')].some((c) => {
    const r = c.getBoundingClientRect();
    return r.width >= minSvg && r.height >= minSvg;
  }))
"""

# True once every image has finished loading (or failed).
_IMAGES_DONE_JS = r"""
() => { for (const img of document.images) { img.loading = 'eager'; }
        return [...document.images].every((img) => img.complete); }
"""


@dataclass
class _Open:
    """A page being checked and what it has recorded so far."""

    path: Path
    page: Page
    seen: list[str]
    errors: list[str]
    failed: str | None = None


def check_pages(paths: list[Path], timeout_s: float = 30, batch: int = 6) -> list[PageCheck]:
    """Open each HTML file in one headless Chromium and report what rendered.

    Parameters
    ----------
    paths : list of Path
        Local HTML files, opened as ``file://`` URLs.
    timeout_s : float
        Per-page limit for loading and settling.
    batch : int
        Pages open at once (they settle in parallel; results keep ``paths`` order).

    Raises
    ------
    RuntimeError
        When Chromium is not installed (``make browser`` installs it).
    """
    exe = require_chromium()
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    ms = int(timeout_s * 1000)
    results: list[PageCheck] = []
    # URLs the route blocked, by page; requests no page can be found for go to every page.
    blocked: dict[object, list[str]] = {}
    unattributed: list[str] = []

    def _route(route):
        url = route.request.url
        if is_local(url):
            route.continue_()
            return
        try:
            blocked.setdefault(route.request.frame.page, []).append(url)
        except PlaywrightError:  # service-worker or browser-level request
            unattributed.append(url)
        route.abort("blockedbyclient")

    def _open(context, path: Path) -> _Open:
        page = context.new_page()
        job = _Open(path, page, [], [])
        page.on("request", lambda req: job.seen.append(req.url))
        page.on("websocket", lambda ws: job.seen.append(ws.url))
        page.on("console", lambda msg: job.errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: job.errors.append(f"uncaught: {exc}"))
        try:
            page.goto(path.as_uri(), wait_until="load", timeout=ms)
        except PlaywrightError as exc:
            job.failed = f"page did not load: {str(exc).splitlines()[0]}"
        return job

    def _settle_and_scan(job: _Open) -> PageCheck:
        page = job.page
        scan: dict[str, Any] | None = {"figures": 0, "empty": [job.failed]} if job.failed else None
        try:
            if scan is None:
                try:
                    page.wait_for_load_state("networkidle", timeout=ms)
                except PlaywrightTimeout:
                    job.errors.append(f"network never went idle within {timeout_s:g}s")
                try:
                    page.wait_for_function(_IMAGES_DONE_JS, timeout=ms)
                except PlaywrightTimeout:
                    pass  # still-loading images are reported as broken below
                deadline = time.monotonic() + VEGA_WAIT_S
                while page.locator(".vega-embed").count() and time.monotonic() < deadline:
                    if page.evaluate(_VEGA_READY_JS, MIN_SVG_PX):
                        break
                    page.wait_for_timeout(100)
                # What a reader can unfold (collapsed tables, figures that measured nothing) is checked unfolded.
                page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
                scan = page.evaluate(_SCAN_JS, MIN_SVG_PX)
        except PlaywrightError as exc:
            scan = {"figures": 0, "empty": [f"page could not be checked: {str(exc).splitlines()[0]}"]}
        finally:
            page.close()
        urls = [u for u in job.seen if not is_local(u)] + blocked.pop(page, []) + unattributed
        return PageCheck(job.path, scan["figures"], list(scan["empty"]), list(dict.fromkeys(urls)), job.errors)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(exe), headless=True, args=CHROMIUM_ARGS, timeout=ms)
        try:
            context = browser.new_context(service_workers="block", viewport={"width": 1280, "height": 900})
            context.route("**/*", _route)
            todo = [Path(p).resolve() for p in paths]
            for i in range(0, len(todo), max(1, batch)):
                jobs = [_open(context, path) for path in todo[i : i + batch]]
                results += [_settle_and_scan(job) for job in jobs]
            context.close()
        finally:
            browser.close()
    return results
