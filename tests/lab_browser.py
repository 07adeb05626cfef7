"""Drive JupyterLab as a person does, in headless Chromium with the network cut.

Used by tests/report/test_jupyterlab_browser.py. Two halves:

* `running_lab` starts ``jupyter lab`` on 127.0.0.1 with a random token, in a
  private set of Jupyter folders (config, data, runtime, settings, workspaces,
  IPython) under a temporary directory, so nothing from the home directory
  leaks in and nothing is fetched (no news, no update check). Kernelspecs are
  still found: the venv's own ``share/jupyter/kernels`` is on Jupyter's path
  through ``sys.prefix``. The server, and every kernel it started, is stopped
  when the block ends.
* `open_lab` opens one Chromium page on it with `browser.py`'s network cut
  (the same flags); its route lets through only ``file:``/``data:``/``blob:``/
  ``about:`` and the server's own origin, and records everything else, as well
  as console errors and uncaught page errors. The page helpers (`open_notebook`,
  `run_all_and_wait`, `add_cell_and_run`, `explorer_state`, `change_and_observe`,
  ...) use the menu bar, the keyboard and the rendered widgets, never the
  kernel's API.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.browser import CHROMIUM_ARGS, is_local, require_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Page

#: Seconds for the server to answer /api/status (first start compiles nothing, but 2 cores are slow).
SERVER_START_S = 60.0

#: Seconds for the server to stop (its kernels first) before it is killed.
SERVER_STOP_S = 15.0

#: The server's own settings: no news feed, no update check (both would fetch from the internet),
#: no browser to open and no terminals (nothing here needs a shell).
LAB_CONFIG = {
    "LabApp": {
        "news_url": None,
        "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate",
        # The default ("pypi") extension manager queries PyPI; "readonly" only lists what is installed.
        "extension_manager": "readonly",
    },
    "ServerApp": {"open_browser": False, "terminals_enabled": False},
}


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab server.

    Attributes
    ----------
    origin : str
        ``http://127.0.0.1:<port>`` (no trailing slash).
    token : str
        The random token every request must carry.
    root : Path
        The folder the file browser shows (``ServerApp.root_dir``).
    log : Path
        The server's combined stdout and stderr.
    process : subprocess.Popen
        The ``jupyter lab`` process.
    """

    origin: str
    token: str
    root: Path
    log: Path
    process: subprocess.Popen = field(repr=False, compare=False)

    def url(self, path: str) -> str:
        """An absolute URL on the server with the token, e.g. ``url("lab/tree/a.ipynb")``."""
        sep = "&" if "?" in path else "?"
        return f"{self.origin}/{path.lstrip('/')}{sep}token={self.token}"

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server log, for failure messages."""
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no server log: {exc})"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def lab_environment(base: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this one, with every per-user Jupyter and IPython folder under `base`.

    Parameters
    ----------
    base : Path
        A private folder; ``config``, ``data``, ``runtime``, ``settings``, ``workspaces`` and
        ``ipython`` are made in it.
    extra : dict, optional
        More variables (e.g. ``COMPACTION_LAB_RESULTS``); kernels inherit them from the server.
    """
    env = dict(os.environ)
    # A JUPYTER_PATH or JUPYTER_CONFIG_PATH from the caller would add folders outside `base`.
    for name in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_PLATFORM_DIRS", "JUPYTER_TOKEN"):
        env.pop(name, None)
    folders = {
        "JUPYTER_CONFIG_DIR": "config",
        "JUPYTER_DATA_DIR": "data",  # user kernelspecs/labextensions; sys.prefix's share/jupyter stays on the path
        "JUPYTER_RUNTIME_DIR": "runtime",
        "JUPYTERLAB_SETTINGS_DIR": "settings",
        "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
        "IPYTHONDIR": "ipython",  # no profile startup scripts from ~/.ipython in the kernels
    }
    for name, sub in folders.items():
        (base / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(base / sub)
    # The venv's python first, as if it were activated (the python3 kernelspec says just "python").
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def _status_ok(origin: str, token: str) -> bool:
    try:
        with urllib.request.urlopen(f"{origin}/api/status?token={token}", timeout=2) as resp:
            return resp.status == 200 and "started" in json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _api(server: LabServer, method: str, path: str) -> Any:
    req = urllib.request.Request(server.url(path), method=method)
    with urllib.request.urlopen(req, timeout=5) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def _stop(server: LabServer) -> None:
    """Shut the kernels down through the API, then stop the server; kill whatever is left."""
    import psutil

    try:
        family = psutil.Process(server.process.pid).children(recursive=True)
    except psutil.Error:
        family = []
    try:
        for kernel in _api(server, "GET", "api/kernels") or []:
            _api(server, "DELETE", f"api/kernels/{kernel['id']}")
    except (OSError, ValueError, urllib.error.URLError):
        pass  # the server may already be gone; the kill below still runs
    server.process.terminate()
    try:
        server.process.wait(timeout=SERVER_STOP_S)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=SERVER_STOP_S)
    # Kernels run in their own sessions (jupyter_client starts them so), so they are stopped one by one.
    for child in family:
        try:
            child.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(family, timeout=SERVER_STOP_S)


@contextmanager
def running_lab(base: Path, root: Path, env: dict[str, str] | None = None) -> Iterator[LabServer]:
    """Run ``jupyter lab`` on 127.0.0.1 for the duration of the block.

    Parameters
    ----------
    base : Path
        A private folder for Jupyter's own files (see `lab_environment`) and the server log.
    root : Path
        The folder the server serves (``ServerApp.root_dir``).
    env : dict, optional
        Extra environment for the server and its kernels.

    Raises
    ------
    RuntimeError
        When the server exits or does not answer ``/api/status`` within `SERVER_START_S`.
    """
    environ = lab_environment(base, env)
    write_lab_settings(Path(environ["JUPYTERLAB_SETTINGS_DIR"]))
    config = base / "lab_config.json"
    config.write_text(json.dumps(LAB_CONFIG, indent=1), encoding="utf-8")
    port, token = free_port(), secrets.token_hex(24)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # the port chosen, or fail: the browser's route admits only it
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--config={config}",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root; the server refuses it otherwise
    log = base / "jupyterlab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=environ, stdout=out, stderr=subprocess.STDOUT)
    server = LabServer(f"http://127.0.0.1:{port}", token, root, log, proc)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _status_ok(server.origin, token):
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not answer within {SERVER_START_S:g}s:\n{server.log_tail()}")
            time.sleep(0.2)  # polling the server's status, not synchronising the page
        yield server
    finally:
        _stop(server)


# --------------------------------------------------------------------------- the browser


def lab_chromium_args(server: LabServer) -> list[str]:
    """`browser.CHROMIUM_ARGS`, opened just wide enough to reach the server and nothing else on 127.0.0.1.

    The host resolver maps every name (IP literals included) to NOTFOUND, and ``<-loopback>`` sends
    loopback traffic to the dead proxy too; the server's ``127.0.0.1:<port>`` is excepted from both.
    Chromium applies the *last* bypass rule that matches, so the port rule goes after ``<-loopback>``.
    """
    hostport = server.origin.removeprefix("http://")
    args = []
    for arg in CHROMIUM_ARGS:
        if arg.startswith("--host-resolver-rules="):
            arg += " , EXCLUDE 127.0.0.1"
        elif arg.startswith("--proxy-bypass-list="):
            arg += f",{hostport}"
        args.append(arg)
    return args


def is_lab_local(url: str, server: LabServer) -> bool:
    """Whether a URL stays on the machine: `browser.is_local`, or the server's own http/ws origin."""
    ws_origin = "ws" + server.origin.removeprefix("http")
    return is_local(url) or url.startswith((f"{server.origin}/", f"{ws_origin}/"))


@dataclass
class LabPage:
    """One Chromium page on a JupyterLab server and what it has recorded so far.

    Attributes
    ----------
    page : playwright Page
    server : LabServer
    external_requests : list of str
        URLs the page (or a worker) asked for that are neither local nor the server (all blocked).
    console_errors : list of str
        Console messages of type error and uncaught page exceptions.
    """

    page: Page
    server: LabServer
    external_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def dialogs(self) -> list[str]:
        """The text of every open JupyterLab dialog (one can block the page)."""
        from playwright.sync_api import Error as PlaywrightError

        try:
            return [" ".join(t.split()) for t in self.page.locator(".jp-Dialog").all_inner_texts()]
        except PlaywrightError as exc:  # the page may be gone; this only feeds failure messages
            return [f"(could not read dialogs: {exc})"]

    def describe(self) -> str:
        """Console errors, external requests and open dialogs, one per line, for assertion messages."""
        lines = [f"console error: {c}" for c in self.console_errors[:20]]
        lines += [f"open dialog: {d}" for d in self.dialogs()]
        lines += [f"external request: {u}" for u in dict.fromkeys(self.external_requests)]
        return "\n".join(lines) or "(no console errors, no external requests)"


#: The user settings written before the page opens: never ask about, or fetch, Jupyter news.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def write_lab_settings(settings_dir: Path) -> None:
    """Write `LAB_SETTINGS` into a ``JUPYTERLAB_SETTINGS_DIR`` (the news toast would cover the notebook)."""
    for name, values in LAB_SETTINGS.items():
        path = settings_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


@contextmanager
def open_lab(server: LabServer, timeout_s: float = 60) -> Iterator[LabPage]:
    """One headless Chromium page with the network cut, recording what it tries, for the block.

    Parameters
    ----------
    server : LabServer
        The only origin let through (besides file:, data:, blob:, about:).
    timeout_s : float
        Default timeout for every page action.

    Raises
    ------
    RuntimeError
        When Chromium is not installed (``make browser`` installs it).
    """
    exe = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(exe), headless=True, args=lab_chromium_args(server), timeout=timeout_s * 1000
        )
        try:
            context = browser.new_context(service_workers="block", viewport={"width": 1280, "height": 900})
            lab = LabPage(context.new_page(), server)

            def _route(route):
                url = route.request.url
                if is_lab_local(url, server):
                    route.continue_()
                else:
                    lab.external_requests.append(url)
                    route.abort("blockedbyclient")

            def _seen(url: str) -> None:
                if not is_lab_local(url, server):
                    lab.external_requests.append(url)

            # Websockets are not routed; they are recorded (and a non-local one fails the check).
            context.route("**/*", _route)
            page = lab.page
            page.set_default_timeout(timeout_s * 1000)
            page.on("request", lambda req: _seen(req.url))
            page.on("websocket", lambda ws: _seen(ws.url))
            page.on("console", lambda msg: lab.console_errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: lab.console_errors.append(f"uncaught: {exc}"))
            yield lab
            context.close()
        finally:
            browser.close()


# --------------------------------------------------------------------------- notebooks


@dataclass(frozen=True)
class CodeCell:
    """One code cell as the page shows it.

    Attributes
    ----------
    prompt : str
        ``[3]:`` once run, ``[*]:`` while queued or running, ``[ ]:`` never run.
    source : str
        The cell's code.
    output : str
        The visible text of its output area (tables, streams, tracebacks).
    """

    prompt: str
    source: str
    output: str

    @property
    def executed(self) -> bool:
        return re.fullmatch(r"\[\d+\]:", self.prompt.strip()) is not None

    @property
    def error(self) -> bool:
        """An error output: IPython prints every traceback with this header."""
        return "Traceback (most recent call last)" in self.output


@dataclass(frozen=True)
class NotebookRun:
    """What "Run All Cells" left on the page.

    Attributes
    ----------
    name : str
        The notebook's file name.
    cells : tuple of CodeCell
    kernel : str
        The toolbar's kernel status (``idle`` once done).
    seconds : float
        From "Run All Cells" until every cell had run (or the wait gave up).
    """

    name: str
    cells: tuple[CodeCell, ...]
    kernel: str
    seconds: float

    @property
    def finished(self) -> bool:
        """Every code cell has an execution count and the kernel is idle."""
        return bool(self.cells) and all(c.executed for c in self.cells) and self.kernel == "idle"

    @property
    def errors(self) -> list[CodeCell]:
        return [c for c in self.cells if c.error]

    def describe(self, chars: int = 600) -> str:
        """Each cell's prompt, first source line and output text (shortened), for assertion messages."""
        lines = [f"{self.name}: kernel {self.kernel}, {self.seconds:.1f}s"]
        for cell in self.cells:
            first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
            out = cell.output.strip()
            lines.append(f"  {cell.prompt} {first[:80]}")
            if out:
                lines += [f"      | {line}" for line in out[:chars].splitlines()]
        return "\n".join(lines)


# Runs in the page: the visible notebook panel's code cells and kernel status.
_NOTEBOOK_JS = r"""
() => {
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find((p) => !p.classList.contains('lm-mod-hidden'));
  if (!panel) return null;
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const text = (el) => {  // without the CSS that pandas puts in front of its tables
    if (!el) return '';
    const copy = el.cloneNode(true);
    copy.querySelectorAll('style, script').forEach((n) => n.remove());
    return copy.textContent;
  };
  const cells = [...panel.querySelectorAll('.jp-Notebook .jp-CodeCell')].map((cell) => ({
    prompt: (cell.querySelector('.jp-InputPrompt') || {}).textContent || '',
    source: [...cell.querySelectorAll('.cm-content .cm-line')].map((l) => l.textContent).join('\n'),
    // textContent, not innerText: JupyterLab skips laying out far-off cells, and innerText of those is empty.
    output: text(cell.querySelector('.jp-OutputArea')),
  }));
  return {kernel: status ? status.getAttribute('data-status') : 'unknown', cells};
}
"""

# True once every code cell of the visible notebook has an execution count and the kernel is idle.
_EXECUTED_JS = (
    "() => { const nb = (" + _NOTEBOOK_JS.strip() + ")(); return !!nb && nb.kernel === 'idle' && "
    "nb.cells.length > 0 && nb.cells.every((c) => /^\\[\\d+\\]:$/.test(c.prompt.trim())); }"
)


# True once the visible notebook's first code cell is queued, running or has run.
_STARTED_JS = (
    "() => { const nb = (" + _NOTEBOOK_JS.strip() + ")(); return !!nb && nb.cells.length > 0 && "
    "/^\\[(\\*|\\d+)\\]:$/.test(nb.cells[0].prompt.trim()); }"
)


def _panel(lab: LabPage):
    """The notebook panel in front."""
    return lab.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


def wait_until_executed(lab: LabPage, timeout_s: float = 120) -> bool:
    """Wait until the visible notebook shows every cell's execution count and its own kernel is idle.

    The status bar can still read "Idle" for the notebook shown before while the new one's kernel
    starts; the notebook panel's own kernel status is the one to wait for. False on a time-out (the
    caller's assertion then shows the state).
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        lab.page.wait_for_function(_EXECUTED_JS, timeout=timeout_s * 1000, polling=250)
    except PlaywrightTimeout:
        return False
    return True


def notebook_state(lab: LabPage, name: str, seconds: float = 0.0) -> NotebookRun:
    """The visible notebook's cells and kernel status, as they are now."""
    state = lab.page.evaluate(_NOTEBOOK_JS) or {"kernel": "no notebook", "cells": []}
    cells = tuple(CodeCell(c["prompt"], c["source"], c["output"]) for c in state["cells"])
    return NotebookRun(name, cells, state["kernel"], seconds)


def open_notebook(lab: LabPage, name: str, timeout_s: float = 60) -> None:
    """Open a notebook of the server root and wait until its kernel is idle.

    The first notebook is opened by its ``/lab/tree/<name>`` URL (that loads JupyterLab); later
    ones by double-clicking them in the file browser, as a person would, without a reload.
    """
    page, ms = lab.page, timeout_s * 1000
    if not page.url.startswith(lab.server.origin):
        page.goto(lab.server.url(f"lab/tree/{name}"), timeout=ms)
    else:
        page.locator("#filebrowser .jp-DirListing-item", has_text=name).dblclick(timeout=ms)
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).wait_for(timeout=ms)
    _panel(lab).locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=ms)
    # The status bar names the front notebook's kernel and its state; "<kernel> | Idle" means the
    # session has started and connected (Run All before that asks to select a kernel instead).
    page.locator("#jp-main-statusbar").get_by_text(re.compile(r"^\S.* \| Idle$")).wait_for(timeout=ms)


def show_notebook(lab: LabPage, name: str) -> None:
    """Bring an open notebook to the front by clicking its tab."""
    lab.page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text=name).click()
    lab.page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).wait_for()


def run_all_cells(lab: LabPage, timeout_s: float = 60) -> None:
    """Menu bar "Run" -> "Run All Cells" on the notebook in front, once the item is enabled.

    Right after a notebook opens, the item can still be disabled (JupyterLab enables it once the
    notebook is its current widget and has a kernel session); the menu is then closed and opened
    again until it is enabled or `timeout_s` passes.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = lab.page
    deadline = time.monotonic() + timeout_s
    while True:
        page.locator("#jp-MainMenu").get_by_role("menuitem", name="Run", exact=True).click()
        item = page.locator(".lm-Menu").get_by_role("menuitem", name="Run All Cells", exact=True)
        item.wait_for()
        if item.get_attribute("aria-disabled") != "true":
            item.click()
            try:  # the queued cells show [*] (or have already run) once the command took
                page.wait_for_function(_STARTED_JS, timeout=10_000, polling=100)
                return
            except PlaywrightTimeout:
                pass
        else:
            page.keyboard.press("Escape")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Run -> Run All Cells did not start the notebook within {timeout_s:g}s\n{lab.describe()}"
            )
        page.wait_for_timeout(250)  # retry interval while JupyterLab finishes opening the notebook


def run_all_and_wait(lab: LabPage, name: str, timeout_s: float = 180) -> NotebookRun:
    """Run every cell through the menu and wait until each has run and the kernel is idle.

    Returns the notebook's state either way (check `NotebookRun.finished`); never raises on timeout.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    start = time.monotonic()
    run_all_cells(lab)
    try:
        lab.page.wait_for_function(_EXECUTED_JS, timeout=timeout_s * 1000, polling=250)
    except PlaywrightTimeout:
        pass  # reported through NotebookRun.finished and its cells
    return notebook_state(lab, name, time.monotonic() - start)


def add_cell_and_run(lab: LabPage, code: str, timeout_s: float = 60) -> CodeCell:
    """Select the last cell, insert a cell below (B), type `code` into it and run it (Shift+Enter).

    Returns the new cell once it has an execution count and its output, or as it is at the timeout.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page, panel = lab.page, _panel(lab)
    cells = panel.locator(".jp-Notebook .jp-Cell")
    index = cells.count()  # the new cell's position
    # Nothing editable (a widget's readout, a cell editor) may keep the focus, or B would be typed into it.
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    cells.last.locator(".jp-InputPrompt").click()  # selects the cell
    page.keyboard.press("Escape")  # command mode
    page.keyboard.press("b")
    cells.nth(index).wait_for(timeout=timeout_s * 1000)
    page.keyboard.press("Enter")  # edit mode in the new cell
    # insert_text, not type: the editor's auto-indent and bracket handling must not change the code.
    page.keyboard.insert_text(code)
    page.keyboard.press("Shift+Enter")
    cell = cells.nth(index)
    try:
        cell.locator(".jp-InputPrompt", has_text=re.compile(r"^\[\d+\]:$")).wait_for(timeout=timeout_s * 1000)
        cell.locator(".jp-OutputArea-output").first.wait_for(timeout=timeout_s * 1000)
    except PlaywrightTimeout:
        pass  # the caller asserts on what the cell shows
    prompt = cell.locator(".jp-InputPrompt").text_content() or ""
    area = cell.locator(".jp-Cell-outputArea")
    output = area.text_content() or "" if area.count() else ""
    return CodeCell(prompt, code, output)


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class Figure:
    """The chart an output area shows: an image, a Vega SVG or a canvas.

    Attributes
    ----------
    kind : str
        ``img``, ``svg``, ``canvas`` or ``""`` (none found).
    width, height : int
        Its box on the page, CSS px.
    """

    kind: str
    width: int
    height: int

    @property
    def drawn(self) -> bool:
        return bool(self.kind) and self.width > 0 and self.height > 0

    def __str__(self) -> str:
        return f"{self.kind} {self.width}x{self.height}" if self.kind else "no figure"


# Runs in the page on an output element: its largest drawn figure (a loaded image, a Vega svg or canvas).
_FIGURE_JS = r"""
(root) => {
  let best = {kind: '', width: 0, height: 0};
  const consider = (el, kind) => {
    const r = el.getBoundingClientRect();
    if (r.width * r.height > best.width * best.height) best = {kind, width: Math.round(r.width), height: Math.round(r.height)};
  };
  for (const img of root.querySelectorAll('img')) if (img.complete && img.naturalWidth > 0) consider(img, 'img');
  for (const svg of root.querySelectorAll('.vega-embed svg.marks, .vega-embed > svg')) consider(svg, 'svg');
  for (const canvas of root.querySelectorAll('.vega-embed canvas')) consider(canvas, 'canvas');
  return best;
}
"""


def cell_figure(lab: LabPage, source_contains: str, timeout_s: float = 30) -> Figure:
    """The figure in the output of the visible notebook's code cell whose code contains `source_contains`.

    The cell is scrolled into view first: JupyterLab skips laying out cells far off screen.
    """
    cell = _panel(lab).locator(".jp-Notebook .jp-CodeCell", has_text=source_contains).last
    cell.scroll_into_view_if_needed(timeout=timeout_s * 1000)
    return _wait_for_figure(lab, cell.locator(".jp-Cell-outputArea"), timeout_s)


def _wait_for_figure(lab: LabPage, area, timeout_s: float) -> Figure:
    """Poll an output area until it shows a drawn figure or `timeout_s` passes; the figure either way."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = Figure(**area.evaluate(_FIGURE_JS)) if area.count() else Figure("", 0, 0)
        if found.drawn or time.monotonic() > deadline:
            return found
        lab.page.wait_for_timeout(100)  # poll interval: images decode and Vega draws asynchronously


# --------------------------------------------------------------------------- the explorer of notebook 02

#: The explorer's controls, by the CSS class `ProjectionExplorer.widget` gives each, with their labels.
EXPLORER_CONTROLS = {
    "session-id": "chain",
    "strategy": "strategy",
    "window": "window W",
    "output-ceiling": "output O",
    "tail-tokens": "tail",
    "history-target": "history",
    "evidence-tokens": "evidence",
}


@dataclass(frozen=True)
class ExplorerState:
    """What the explorer shows at one moment.

    Attributes
    ----------
    controls : tuple of str
        Labels of the controls that are visible with a non-zero box.
    text : str
        The first line of the output area (``<strategy>: N tokens in M segments (capacity ...)``).
    table_rows : int
        Rows of the segment table under it.
    figure : Figure
        The chart under the table.
    """

    controls: tuple[str, ...]
    text: str
    table_rows: int
    figure: Figure

    def __str__(self) -> str:
        return f"controls {list(self.controls)}; text {self.text!r}; {self.table_rows} table rows; chart {self.figure}"


@dataclass(frozen=True)
class OutputChange:
    """The explorer before and after one change of a control.

    Attributes
    ----------
    action : str
        What was done, e.g. ``strategy -> truncate-oldest``.
    before, after : ExplorerState
    seconds : float
        How long the change took to show (or how long it was waited for, when it did not).
    """

    action: str
    before: ExplorerState
    after: ExplorerState
    seconds: float

    @property
    def changed(self) -> bool:
        """The output area's text changed (the callback recomputed the projection)."""
        return bool(self.after.text) and self.after.text != self.before.text

    def describe(self) -> str:
        verdict = "output changed" if self.changed else "output did not change"
        return f"{self.action}: {verdict} after {self.seconds:.1f}s\n  before: {self.before}\n  after:  {self.after}"


# Runs in the page on the explorer's root (.cl-explorer): the visible controls' labels and the output.
_EXPLORER_JS = r"""
(root, controls) => {
  const shown = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const labels = [];
  for (const [cls, label] of Object.entries(controls)) {
    const el = root.querySelector('.cl-explorer-' + cls);
    const text = el && (el.querySelector('.widget-label') || {}).textContent;
    if (el && shown(el) && text === label) labels.push(label);
  }
  const out = root.querySelector('.cl-explorer-output');
  const stdout = out && out.querySelector('[data-mime-type="application/vnd.jupyter.stdout"]');
  return {
    controls: labels,
    text: stdout ? stdout.textContent.trim().split('\n')[0] : '',
    rows: out ? out.querySelectorAll('table tbody tr').length : 0,
  };
}
"""


def _explorer(lab: LabPage):
    return _panel(lab).locator(".cl-explorer").last


def explorer_state(lab: LabPage) -> ExplorerState:
    """The explorer's controls, text, table and chart as they are now (scrolled into view first)."""
    root = _explorer(lab)
    root.scroll_into_view_if_needed()
    state = root.evaluate(_EXPLORER_JS, EXPLORER_CONTROLS)
    figure = root.locator(".cl-explorer-output")
    found = Figure(**figure.evaluate(_FIGURE_JS)) if figure.count() else Figure("", 0, 0)
    return ExplorerState(tuple(state["controls"]), state["text"], state["rows"], found)


def wait_for_explorer(lab: LabPage, timeout_s: float = 30) -> ExplorerState:
    """Poll until the explorer shows its controls, its text and a drawn chart; its state either way."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = explorer_state(lab) if _explorer(lab).count() else ExplorerState((), "", 0, Figure("", 0, 0))
        if (len(state.controls) == len(EXPLORER_CONTROLS) and state.text and state.figure.drawn) or (
            time.monotonic() > deadline
        ):
            return state
        lab.page.wait_for_timeout(100)  # poll interval: widgets render after the kernel's messages


def change_and_observe(lab: LabPage, action: str, change: Callable[[], None], timeout_s: float = 20) -> OutputChange:
    """Do `change`, then wait until the explorer's text changes and its chart is drawn, or `timeout_s` passes.

    The one helper for the positive checks (assert `OutputChange.changed`) and the negative control
    (assert not changed): it reports, it does not assert.

    Parameters
    ----------
    lab : LabPage
    action : str
        What `change` does, for the report.
    change : callable
        Acts on the page (selects an option, edits a readout, ...).
    timeout_s : float
        How long a change may take to show.
    """
    before = explorer_state(lab)
    start = time.monotonic()
    change()
    deadline = start + timeout_s
    while True:
        after = explorer_state(lab)
        differs = bool(after.text) and after.text != before.text
        if (differs and after.figure.drawn) or time.monotonic() > deadline:
            return OutputChange(action, before, after, time.monotonic() - start)
        lab.page.wait_for_timeout(100)  # poll interval: the kernel recomputes, then the widgets redraw


def select_option(lab: LabPage, control: str, value: str) -> None:
    """Pick `value` in a dropdown of the explorer (``control`` as in `EXPLORER_CONTROLS`)."""
    _explorer(lab).locator(f".cl-explorer-{control} select").select_option(value)


def set_slider(lab: LabPage, control: str, value: int) -> None:
    """Type `value` into a slider's readout: click it, select all, type, Enter (ipywidgets 8 readouts are editable)."""
    readout = _explorer(lab).locator(f".cl-explorer-{control} .widget-readout")
    readout.click()
    lab.page.keyboard.press("Control+A")
    lab.page.keyboard.type(str(value))
    lab.page.keyboard.press("Enter")
    # Enter commits but leaves the caret in the readout, where later keys (a notebook shortcut such as
    # B) would land; a person clicks elsewhere, this lets go of the focus.
    readout.blur()


def slider_value(lab: LabPage, control: str) -> str:
    """The value a slider's handle reports (``aria-valuetext``)."""
    handle = _explorer(lab).locator(f".cl-explorer-{control} [role=slider]")
    return handle.get_attribute("aria-valuetext") or ""
