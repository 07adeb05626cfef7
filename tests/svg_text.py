"""Measure every text of an SVG figure in headless Chromium and check that it can be read.

Used by tests/report/test_figure_text.py (issue 48: figures never overlap text). Each SVG is opened on
its own (``file://``) in Debian's system Chromium, driven by the playwright wheel exactly as
`tests.browser` drives it (its flags: no network, no downloads; never ``playwright install``). For each
visible ``<text>`` the page gives its box in the element's own frame (``getBBox``) and the transform to
the SVG's frame (``getScreenCTM`` against the SVG's own), so a rotated label is a rotated rectangle, not the larger upright box
around it. Three checks, each a list of readable problems (empty: fine):

* `overlaps`: no two texts' boxes intersect by more than `OVERLAP_TOL` pixels;
* `clipped`: no text reaches past the SVG's width / height (or past a clip path around it), and no
  text mark (a point's or a bar's label) past its plot area, where it prints over axes and legends;
* `touching_ticks`: the tick labels of one axis, taken in order along it, are at least `TICK_GAP`
  pixels apart (Vega hides the labels its ``labelOverlap`` removes: those are not drawn, not checked).

No pair of texts is excused from `overlaps`: Vega writes a multi-line text (a subtitle, a long header)
as one ``<text>`` with a ``<tspan>`` per line, so its lines are one box, and a figure that stacks texts
must space them. Only what is not drawn is left out: empty texts, and hidden ones (opacity 0, no fill,
``display: none``), such as the tick labels Vega's ``labelOverlap`` drops.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.browser import CHROMIUM_ARGS, require_chromium

#: Two boxes may share this many pixels (antialiasing, rounding of Vega's own text measure).
OVERLAP_TOL = 1.0
#: A text may reach this far past the SVG's edge (sub-pixel rounding).
CLIP_TOL = 0.5
#: Adjacent tick labels of one axis must be at least this far apart, in pixels.
TICK_GAP = 2.0


@dataclass(frozen=True)
class TextBox:
    """One drawn text of an SVG, as Chromium lays it out.

    Attributes
    ----------
    text : str
        Its characters (the lines of a multi-line text joined).
    role : str
        Vega's role of the nearest group that has one (``axis-label``, ``title-text``, ``legend-label``,
        ``mark``, ...), or ``""``.
    axis : int
        Which axis (``g.role-axis``, in document order) the text belongs to; -1 for none.
    corners : tuple of (float, float)
        The four corners of its box in the SVG's frame (a rotated text's rotated box).
    clip : tuple of float or None
        ``(x0, y0, x1, y1)`` of the clip rectangle around it in the SVG's frame, when a parent clips.
    frame : tuple of float or None
        ``(x0, y0, x1, y1)`` of the plot area a text mark (a point's or a bar's label) is drawn in;
        None for every other text.
    """

    text: str
    role: str
    axis: int
    corners: tuple[tuple[float, float], ...]
    clip: tuple[float, float, float, float] | None
    frame: tuple[float, float, float, float] | None = None

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """``(x0, y0, x1, y1)``: the upright rectangle around the box."""
        xs = [c[0] for c in self.corners]
        ys = [c[1] for c in self.corners]
        return min(xs), min(ys), max(xs), max(ys)

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.bounds
        return (x0 + x1) / 2, (y0 + y1) / 2

    def describe(self) -> str:
        x0, y0, x1, y1 = self.bounds
        return f"{self.role or 'text'} {self.text[:60]!r} at ({x0:.0f},{y0:.0f})-({x1:.0f},{y1:.0f})"


@dataclass(frozen=True)
class SvgText:
    """The texts of one SVG file and the size of its canvas."""

    path: Path
    width: float
    height: float
    boxes: tuple[TextBox, ...]


# Runs in the page (the SVG document itself). Returns {width, height, boxes: [...]}.
_BOXES_JS = r"""
() => {
  const svg = document.documentElement;
  const vb = svg.viewBox && svg.viewBox.baseVal;
  const width = vb && vb.width ? vb.width : svg.width.baseVal.value;
  const height = vb && vb.height ? vb.height : svg.height.baseVal.value;
  const axes = [...svg.querySelectorAll('g.role-axis')];
  const inv = svg.getScreenCTM().inverse();
  const toRoot = (el) => inv.multiply(el.getScreenCTM());
  const apply = (m, x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
  const quad = (m, b) => [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => apply(m, x, y));
  const hidden = (el) => {
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
      const cs = getComputedStyle(n);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0) return true;
    }
    const cs = getComputedStyle(el);
    return cs.fill === 'none' || cs.fill === 'transparent' || parseFloat(cs.fillOpacity) === 0;
  };
  const roleOf = (el) => {
    for (let n = el.parentElement; n && n.nodeType === 1; n = n.parentElement) {
      const m = (n.getAttribute('class') || '').match(/\brole-([\w-]+)/);
      if (m) return m[1];
    }
    return '';
  };
  const clipOf = (el) => {
    let box = null;
    for (let n = el; n && n.nodeType === 1 && n !== svg; n = n.parentElement) {
      const ref = n.getAttribute('clip-path');
      const id = ref && ref.match(/url\(["']?#([^"')]+)["']?\)/);
      const cp = id && document.getElementById(id[1]);
      const shape = cp && cp.querySelector('rect, path');
      if (!shape) continue;
      const pts = quad(toRoot(n), shape.getBBox());
      const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
      const r = [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
      box = box ? [Math.max(box[0], r[0]), Math.max(box[1], r[1]), Math.min(box[2], r[2]), Math.min(box[3], r[3])] : r;
    }
    return box;
  };
  // The plot area a mark's text belongs to: the nearest group holding a non-empty background path.
  const frameOf = (el) => {
    for (let n = el.parentElement; n && n.nodeType === 1 && n !== svg; n = n.parentElement) {
      const bg = n.querySelector(':scope > path.background');
      if (!bg) continue;
      const b = bg.getBBox();
      if (b.width <= 0 || b.height <= 0) continue;
      const pts = quad(toRoot(n), b);
      const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
      return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
    }
    return null;
  };
  const boxes = [];
  for (const el of svg.querySelectorAll('text')) {
    // The lines of a multi-line text (Vega writes each as a <tspan>), joined.
    const text = [...el.childNodes].map((n) => n.textContent.trim()).filter(Boolean).join(' / ');
    if (!text || hidden(el)) continue;
    const b = el.getBBox();
    if (b.width <= 0 || b.height <= 0) continue;
    const role = roleOf(el);
    boxes.push({text, role, axis: axes.indexOf(el.closest('g.role-axis')),
                corners: quad(toRoot(el), b), clip: clipOf(el), frame: role === 'mark' ? frameOf(el) : null});
  }
  return {width, height, boxes};
}
"""


def measure(paths: Iterable[Path], timeout_s: float = 30) -> list[SvgText]:
    """Open each SVG in one headless Chromium and return its texts' boxes, in `paths` order.

    Raises
    ------
    RuntimeError
        When Chromium is not installed (``make browser`` installs it).
    """
    exe = require_chromium()
    from playwright.sync_api import sync_playwright

    ms = int(timeout_s * 1000)
    out: list[SvgText] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(exe), headless=True, args=CHROMIUM_ARGS, timeout=ms)
        try:
            context = browser.new_context(service_workers="block")
            # An SVG loads nothing; anything it asks for is refused.
            context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
            page = context.new_page()
            for path in paths:
                page.goto(Path(path).resolve().as_uri(), wait_until="load", timeout=ms)
                page.evaluate("document.fonts ? document.fonts.ready.then(() => true) : true")
                got = page.evaluate(_BOXES_JS)
                boxes = tuple(
                    TextBox(
                        b["text"],
                        b["role"],
                        int(b["axis"]),
                        tuple((float(x), float(y)) for x, y in b["corners"]),
                        _rect(b["clip"]),
                        _rect(b["frame"]),
                    )
                    for b in got["boxes"]
                )
                out.append(SvgText(Path(path), float(got["width"]), float(got["height"]), boxes))
            context.close()
        finally:
            browser.close()
    return out


def _rect(values: Sequence[float] | None) -> tuple[float, float, float, float] | None:
    return (float(values[0]), float(values[1]), float(values[2]), float(values[3])) if values else None


def _axes(corners: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The two edge normals of a rectangle given by its corners (unit length)."""
    out = []
    for (ax, ay), (bx, by) in ((corners[0], corners[1]), (corners[1], corners[2])):
        dx, dy = bx - ax, by - ay
        norm = (dx * dx + dy * dy) ** 0.5 or 1.0
        out.append((-dy / norm, dx / norm))
    return out


def separation(a: TextBox, b: TextBox) -> float:
    """How far apart two boxes are, in pixels: negative when they overlap (by that much, at least).

    The largest gap between their shadows on any edge normal of either (the separating axis test):
    for upright boxes, the gap along x or y, whichever is larger.
    """
    best = float("-inf")
    for nx, ny in _axes(a.corners) + _axes(b.corners):
        pa = [x * nx + y * ny for x, y in a.corners]
        pb = [x * nx + y * ny for x, y in b.corners]
        best = max(best, max(min(pb) - max(pa), min(pa) - max(pb)))
    return best


def overlaps(svg: SvgText, tol: float = OVERLAP_TOL) -> list[str]:
    """Every pair of texts whose boxes overlap by more than `tol` pixels."""
    boxes = svg.boxes
    return [
        f"overlap: {a.describe()} and {b.describe()} ({-separation(a, b):.1f} px)"
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if separation(a, b) < -tol
    ]


def clipped(svg: SvgText, tol: float = CLIP_TOL) -> list[str]:
    """Every text whose box reaches past the SVG's canvas, or past the clip rectangle around it."""
    out = []
    for box in svg.boxes:
        x0, y0, x1, y1 = box.bounds
        if x0 < -tol or y0 < -tol or x1 > svg.width + tol or y1 > svg.height + tol:
            out.append(f"clipped by the canvas ({svg.width:.0f}x{svg.height:.0f}): {box.describe()}")
        elif box.clip is not None:
            c0, d0, c1, d1 = box.clip
            if x0 < c0 - tol or y0 < d0 - tol or x1 > c1 + tol or y1 > d1 + tol:
                out.append(f"clipped by its plot area ({c0:.0f},{d0:.0f})-({c1:.0f},{d1:.0f}): {box.describe()}")
        if box.frame is not None:
            c0, d0, c1, d1 = box.frame
            if x0 < c0 - tol or y0 < d0 - tol or x1 > c1 + tol or y1 > d1 + tol:
                out.append(f"label past its plot area ({c0:.0f},{d0:.0f})-({c1:.0f},{d1:.0f}): {box.describe()}")
    return out


def touching_ticks(svg: SvgText, gap: float = TICK_GAP) -> list[str]:
    """Every two neighbouring tick labels of one axis less than `gap` pixels apart."""
    out = []
    for axis in sorted({b.axis for b in svg.boxes if b.axis >= 0}):
        labels = [b for b in svg.boxes if b.axis == axis and b.role == "axis-label"]
        if len(labels) < 2:
            continue
        xs = [b.centre[0] for b in labels]
        ys = [b.centre[1] for b in labels]
        along = 0 if max(xs) - min(xs) >= max(ys) - min(ys) else 1
        labels.sort(key=lambda b: b.centre[along])
        for a, b in zip(labels, labels[1:], strict=False):
            apart = separation(a, b)
            if apart < gap:
                out.append(f"tick labels touch ({apart:.1f} px apart): {a.text!r} and {b.text!r}")
    return out


def problems(svg: SvgText) -> list[str]:
    """All three checks' problems of one SVG (empty: every text can be read)."""
    return overlaps(svg) + clipped(svg) + touching_ticks(svg)
