"""The one house theme, and the one way a chart is written to disk: `save_chart` (PNG, SVG, self-contained HTML).

PNG and SVG are drawn by vl-convert (no browser, no network); the HTML inlines Vega's JavaScript, so
figures open offline. In notebooks, `setup_notebook()` enables the theme and a renderer that emits both
the interactive Vega-Lite spec (JupyterLab) and a PNG (nbconvert HTML, GitHub, any viewer that cannot run
Vega), so a rendered report needs no CDN.

The figures themselves are in `compaction_lab.report.figures` (one module per notebook, each figure
registered where it is drawn).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import os
import re
import secrets
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import altair as alt
import jsonschema
import pandas as pd
import vl_convert as vlc
from altair.utils.html import TEMPLATES
from altair.utils.mimebundle import spec_to_mimebundle
from altair.utils.schemapi import SchemaBase, debug_mode

from compaction_lab.core import paths

THEME = "compaction_lab"
RENDERER = "compaction_lab"

#: One colour per record kind, fixed so every chart of every run agrees.
KIND_COLORS: dict[str, str] = {
    "tool_output": "#4c78a8",
    "tool_call": "#9ecae9",
    "assistant": "#f58518",
    "reasoning": "#ffbf79",
    "user": "#54a24b",
    "system": "#bab0ac",
    "summary": "#b279a2",
}
POINTER_COLORS: dict[str, str] = {"assistant": "#f58518", "user": "#54a24b", "tool": "#4c78a8"}

_FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"


@alt.theme.register(THEME, enable=False)
def _theme() -> alt.theme.ThemeConfig:
    """House style: quiet axes, readable sizes, white background (PNG and SVG alike)."""
    return {
        "config": {
            "background": "white",
            "font": _FONT,
            "view": {"stroke": None, "continuousWidth": 360, "continuousHeight": 240},
            "title": {"fontSize": 15, "anchor": "start", "subtitleFontSize": 11, "subtitleColor": "#555"},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "gridColor": "#eee", "domainColor": "#888"},
            "legend": {"labelFontSize": 11, "titleFontSize": 12},
            "header": {"labelFontSize": 12, "titleFontSize": 12},
        }
    }


def _vegalite_mimetype() -> str:
    major = alt.SCHEMA_VERSION.lstrip("v").split(".")[0]
    return f"application/vnd.vegalite.v{major}+json"


#: Scale of every PNG (twice the chart's CSS size: sharp on high-density screens and in print).
PNG_SCALE = 2

#: How many recently rendered specs are kept (`_images`): a notebook saves a figure and then shows it.
_RENDER_CACHE_SIZE = 16
_rendered: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
#: How many validated specs are remembered (`checked_spec`), by `_spec_key`.
_VALIDATED_CACHE_SIZE = 256
_validated: OrderedDict[str, bool] = OrderedDict()


#: Noncharacters (U+FDD0–U+FDEF and the last two code points of every plane): HTML reads each as a
#: parse error, XML forbids U+FFFE and U+FFFF.
_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(f"{chr(p + 0xFFFE)}{chr(p + 0xFFFF)}" for p in range(0, 0x110000, 0x10000))

#: Characters no page carries raw: NUL and every control but tab, LF, FF and CR (HTML parse errors; NUL
#: becomes U+FFFD or nothing), form feed and the other C0 controls XML 1.0 forbids in an SVG (vl-convert,
#: parsing the SVG Vega wrote, panics on one and aborts the whole process: a notebook's kernel dies), lone
#: surrogates (no UTF-8 for them: the page could not be written) and noncharacters.
_UNPAGEABLE = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff" + _NONCHARACTERS
_NON_PAGE = re.compile(f"[{_UNPAGEABLE}]")
#: What no string in a Vega spec may hold: the above, and U+2028 / U+2029, which Vega's expression parser
#: rejects raw (Vega-Lite writes a sort list into an expression: one session id holding one failed the run).
_NON_VEGA = re.compile(f"[{_UNPAGEABLE}\u2028\u2029]")
#: The same, and the mark that opens a written code point, so that writing a string is one-to-one.
_CODE_OPEN, _CODE_CLOSE = "\u27e8", "\u27e9"
_NON_VEGA_OR_MARK = re.compile(f"[{_UNPAGEABLE}\u2028\u2029{_CODE_OPEN}]")
#: Every character outside the Basic Multilingual Plane (emoji, private use planes).
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _code_point(match: re.Match[str]) -> str:
    """Write one character as its code point between the marks: ``⟨U+2028⟩``."""
    return f"{_CODE_OPEN}U+{ord(match.group()):04X}{_CODE_CLOSE}"


def _written(value: Any, pattern: re.Pattern[str]) -> Any:
    """`value` with every `pattern` character of every string (keys included) written as its code point."""
    return each_string(value, lambda text: pattern.sub(_code_point, text))


def vega_safe(value: Any) -> Any:
    r"""Make a string (or every string of a spec, list, tuple or DataFrame) safe for Vega, SVG and a page.

    Each character no renderer takes is written as its code point between marks: U+2028 and U+2029
    (Vega's expression parser rejects them, and a figure's sort list is an expression), NUL and the
    other controls XML or HTML forbid, lone surrogates (no UTF-8 for them), noncharacters; the mark
    ``⟨`` itself too, so two different strings never become one (two session ids that differ only in
    such a character stay two categories). Character by character: a label inside a longer text (a
    title, an expression) is written as the label alone is. Text without any of them is unchanged,
    and nothing but strings is touched (a number is never moved).

    Every registered figure's arguments pass through it (`compaction_lab.report.figures.register`).

    Parameters
    ----------
    value : str, dict, list, tuple, DataFrame or any other value
        A DataFrame's column names and text cells are written; other values are returned as they are.

    Examples
    --------
    >>> vega_safe("s\u2028x\x00")
    's⟨U+2028⟩x⟨U+0000⟩'
    """
    return _written(value, _NON_VEGA_OR_MARK)


def each_string(value: Any, text: Callable[[str], str]) -> Any:
    """`value` with every string passed through `text`: a DataFrame's column names, index and text cells, keys.

    The redaction hook of a redacted run's figures (`compaction_lab.report.charts.draw` passes the run's
    redactor's ``text``): a PNG cannot be rewritten by the final sweep, so what it is drawn from is masked
    first. Numbers are never touched; a DataFrame is copied, never changed in place.
    """
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {each_string(k, text): each_string(v, text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(each_string(v, text) for v in value)
    if isinstance(value, pd.DataFrame):
        out = value.rename(columns=lambda c: each_string(c, text))
        for i in range(out.shape[1]):
            out.isetitem(i, _each_cell(out.iloc[:, i], text).array)
        if not isinstance(out.index, pd.MultiIndex):
            out.index = pd.Index(_each_cell(out.index.to_series(), text).array, name=each_string(out.index.name, text))
        return out
    return value


def _each_cell(cells: pd.Series, text: Callable[[str], str]) -> pd.Series:
    """`cells` with every string passed through `text` (each distinct value once), in the column's own dtype."""
    if isinstance(cells.dtype, pd.CategoricalDtype):
        cats = [each_string(c, text) for c in cells.cat.categories]
        if len(set(cats)) == len(cats):
            return cells.cat.rename_categories(cats)
        cells = cells.astype(object)  # two categories masked alike: one value now
    if not (pd.api.types.is_object_dtype(cells) or pd.api.types.is_string_dtype(cells)):
        return cells
    done: dict[str, str] = {}
    for v in cells:
        if isinstance(v, str) and v not in done:
            done[v] = text(v)
    if all(k == v for k, v in done.items()):
        return cells
    mapped = [done[v] if isinstance(v, str) else v for v in cells]
    out = pd.Series(mapped, index=cells.index, dtype=object, name=cells.name)
    return out if pd.api.types.is_object_dtype(cells) else out.astype(cells.dtype)


def page_safe(text: str) -> str:
    """Write a page's text with no character HTML forbids (NUL, controls, lone surrogates, noncharacters).

    Each is written as its code point, as `vega_safe` writes it; the page's markup and scripts hold
    none, so only what came from a log changes (`compaction_lab.report.render`, ``sweep.html``).
    """
    return _NON_PAGE.sub(_code_point, text)


#: Ids Vega numbers from counters global to its runtime (vega-scenegraph's ``gradient_id`` and ``clip_id``),
#: as the SVG defines and uses them: in vl-convert's runtime, which lives as long as the process, the numbers
#: depend on what the process drew before (a kernel a sweep's earlier run used: ``gradient_28``, not ``_0``).
_COUNTED_ID = re.compile(r'(\s(?:id|fill|stroke|clip-path)="(?:url\(#)?)((?:p_)?gradient_|clip)(\d+)(?=[")])')
#: A tag of the SVG (where ids are defined and used; a label's text is outside every tag).
_TAG = re.compile(r"<[^<>]*>")


def stable_ids(svg: str) -> str:
    """Return `svg` with Vega's counted ids numbered from 0 in the order they first appear in it.

    So a figure's bytes depend on its spec alone, not on what the process drew before it. Only the ids'
    definitions and uses (``id``, ``fill``, ``stroke``, ``clip-path`` attributes of a tag) are rewritten, never a
    label's text.
    """
    numbers: dict[tuple[str, str], int] = {}
    given: dict[str, int] = {}  # ids numbered so far, per kind

    def renumbered(m: re.Match[str]) -> str:
        kind, old = m.group(2), (m.group(2), m.group(3))
        if old not in numbers:
            numbers[old] = given[kind] = given.get(kind, -1) + 1
        return f"{m.group(1)}{kind}{numbers[old]}"

    return _TAG.sub(lambda tag: _COUNTED_ID.sub(renumbered, tag.group(0)), svg)


def _svg(spec: dict) -> str:
    """Return the SVG vl-convert draws of `spec`, whatever characters its labels hold, its ids `stable_ids`."""
    try:
        svg = vlc.vegalite_to_svg(_written(spec, _NON_VEGA), vl_version=_vl_version())
    except ValueError:
        # Vega shortens a long label by UTF-16 units, which can split a character outside the BMP into a
        # lone surrogate that vl-convert's text measure rejects: write such characters as code points too.
        svg = vlc.vegalite_to_svg(_written(_written(spec, _NON_VEGA), _ASTRAL), vl_version=_vl_version())
    return stable_ids(svg)


def _spec_key(spec: dict) -> str:
    """Return a spec's digest: SHA-256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()


def checked_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """Return the chart's Vega-Lite spec (themed, as ``chart.to_dict()``), validated once per distinct spec.

    Altair validates against the whole Vega-Lite schema at every ``to_dict``, a cost per chart that grows
    with its layers; a notebook saves a figure and then shows it, so it paid twice for one spec. Here the
    spec is made unvalidated and checked against the schema Altair's ``to_dict`` checks it against (where
    that fails, Altair's own ``to_dict`` raises its error), unless this process already checked a spec of
    the same shape (`_skeleton`, by `_spec_key`). Under whichever theme is active: `save_chart` enables
    the house theme first; a notebook shows a chart under the theme its reader chose.
    """
    with alt.data_transformers.disable_max_rows():  # as Altair's own save: a large table is still drawn
        spec = chart.to_dict(validate=False, context={"pre_transform": False})
        skeleton = _skeleton(spec)
        key = _spec_key(skeleton)
        if _recalled(_validated, key) is None:
            try:
                schema_class: Any = type(chart)  # Altair's own `to_dict` validates against this class's schema
                schema_class.validate(skeleton)
            except jsonschema.ValidationError:
                # Refused as Altair refuses it, in its words (this check also sees the theme's config, which
                # Altair merges in after its own: a chart Altair accepts is accepted).
                chart.to_dict(validate=True, context={"pre_transform": False})
            _kept(_validated, key, True, _VALIDATED_CACHE_SIZE)
    return spec


#: The chart `_drawn_spec` last made a spec of: what it was made of (`_made_of`), the settings then, its spec.
_last_drawn: tuple[list[Any], tuple[Any, ...], dict[str, Any]] | None = None


def _made_of(chart: Any) -> list[Any]:
    """Every object a chart is made of, walked in a fixed order: its parts, their values, lists and dicts.

    Held (not their ids: a freed object's id can be taken by a new one), so a chart whose parts were
    replaced or added to since -- ``chart.title = ...``, a layer appended -- is not the same list. A
    table's own cells are not walked (a table changed in place after drawing is shown as drawn).
    """
    out: list[Any] = []
    stack = [chart]
    while stack:
        o = stack.pop()
        out.append(o)
        if isinstance(o, SchemaBase):
            out.append(len(o._args))
            stack += o._args
            out += o._kwds  # the keys, in order
            stack += o._kwds.values()
        elif isinstance(o, dict):
            out += o
            stack += o.values()
        elif isinstance(o, list | tuple):
            out.append(len(o))
            stack += o
    return out


def _drawn_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """`checked_spec`, made once for a chart a notebook saves (`save_chart`) and then shows (`_shown`).

    The spec of the chart last made is returned again while the chart is made of the same objects
    (`_made_of`) under the same theme and data transformer: Altair's ``to_dict`` turned its tables into
    rows a second time for the display. Only read here: the renderer and `_save` make what they write.
    """
    global _last_drawn
    settings = (alt.theme.active, alt.data_transformers.active, alt.data_transformers.consolidate_datasets)
    parts = _made_of(chart)
    last = _last_drawn
    if last is not None and last[1] == settings and len(last[0]) == len(parts):
        if all(a is b for a, b in zip(last[0], parts, strict=True)):
            return last[2]
    spec = checked_spec(chart)
    _last_drawn = (parts, settings, spec)
    return spec


def _skeleton(spec: dict[str, Any]) -> dict[str, Any]:
    """Return `spec` as Altair validates it, whatever its rows: each dataset empty and named by its rank.

    Altair validates a chart before it adds the ``datasets`` (its rows, each named by their hash): two
    charts drawn alike from other rows are valid alike, so one check (`checked_spec`) serves both, as
    it does for a sweep's runs drawing every figure in the same warm kernel.
    """
    datasets = spec.get("datasets")
    if not isinstance(datasets, dict) or not datasets:
        return spec
    ranks = {name: f"data-{i}" for i, name in enumerate(datasets)}

    def renamed(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: ranks.get(v, v) if k == "name" and isinstance(v, str) else renamed(v) for k, v in o.items()}
        return [renamed(v) for v in o] if isinstance(o, list) else o

    out = renamed({k: v for k, v in spec.items() if k != "datasets"})
    out["datasets"] = dict.fromkeys(ranks.values(), [])
    return out


def _recalled(cache: OrderedDict[str, Any], key: str) -> Any:
    """Return what a bounded cache (`_kept`) holds under `key`, marked most recently used, or None."""
    hit = cache.get(key)
    if hit is not None:
        cache.move_to_end(key)
    return hit


def _kept(cache: OrderedDict[str, Any], key: str, value: Any, size: int) -> Any:
    """Keep `value` under `key` in a cache of at most `size` entries (least recently used dropped); return it."""
    cache[key] = value
    while len(cache) > size:
        cache.popitem(last=False)
    return value


def unchecked_parts() -> contextlib.AbstractContextManager[None]:
    """Within it, Altair does not validate each part of a chart as it is made (its "debug mode").

    Each part is otherwise checked against its piece of the Vega-Lite schema when constructed: a figure
    of a few hundred gradient stops (`figures._common.hatched`) paid for a schema check per stop, and again
    for the mark holding them. A registered figure is built so, and the whole chart is still validated,
    once, where it is saved or shown (`checked_spec`); what is lost is only the traceback pointing at the
    part that was wrong.
    """
    return debug_mode(False)


def _images(spec: dict) -> tuple[str, bytes]:
    """Return the SVG and the PNG of a Vega-Lite spec, drawn once.

    Vega lays the chart out once, as SVG; the PNG is that SVG rasterised
    (vl-convert's ``vegalite_to_png`` does the same internally: the pixels are
    identical). Kept for the last few specs by their canonical JSON, so a figure
    that is saved and then displayed is drawn one time, not four.
    """
    key = _spec_key(spec)
    hit = _recalled(_rendered, key)
    if hit is not None:
        return hit
    svg = _svg(spec)
    return _kept(_rendered, key, (svg, bytes(vlc.svg_to_png(svg, scale=PNG_SCALE))), _RENDER_CACHE_SIZE)


def _renderer(spec: dict, **metadata) -> dict:
    """Display bundle: the Vega-Lite spec for live frontends plus a PNG fallback."""
    _, png = _images(spec)
    return {
        _vegalite_mimetype(): _written(spec, _NON_VEGA),
        "image/png": base64.b64encode(png).decode("ascii"),
        "text/plain": f"<{spec.get('$schema', 'Vega-Lite').rsplit('/', 1)[-1]} chart>",
    }


alt.renderers.register(RENDERER, _renderer)


def _vl_version() -> str:
    # vl-convert wants "6.1"-style versions; Altair's schema says "v6.1.0".
    parts = alt.SCHEMA_VERSION.lstrip("v").split(".")
    return f"{parts[0]}.{parts[1]}"


def _bundle_stem() -> str:
    return f"vega-bundle-vl-convert-{metadata.version('vl-convert-python')}-vega-lite-{_vl_version()}"


def _kept_bundle() -> str | None:
    """`vega_bundle` as `compaction_lab.core.paths.cache_dir` keeps it, if a file there matches its name."""
    stem, folder = _bundle_stem(), paths.cache_dir()
    for found in sorted(folder.glob(f"{stem}-*.js")) if folder.is_dir() else []:
        try:
            text = found.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if found.name == f"{stem}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.js":
            return text
    return None


def verbatim_texts() -> tuple[str, ...]:
    """Return what the figure pages carry unchanged from installed packages: Vega's JavaScript (`vega_bundle`).

    For the final sweep to leave whole (`compaction_lab.privacy.scrub.scrub_run_folder`'s ``verbatim``):
    it holds nothing of a session. Only a bundle already built (in this process, or kept on disk by the
    kernels that drew the figures) is returned: the sweep never pays for building one it may not find.
    """
    if vega_bundle.cache_info().currsize:
        return (vega_bundle(),)
    kept = _kept_bundle()
    return () if kept is None else (kept,)


@functools.cache
def vega_bundle() -> str:
    """Return Vega's JavaScript as one bundle, for self-contained HTML figures.

    vl-convert builds it once per process, slowly: every notebook's kernel paid that for its first
    figure. The bundle depends only on the vl-convert and Vega-Lite versions, so it is kept in
    `compaction_lab.core.paths.cache_dir` under a name holding both and its own SHA-256; a file whose
    content does not match its name is built again, and a cache that cannot be written costs only time.
    """
    cached = _kept_bundle()
    if cached is not None:
        return cached
    stem, folder = _bundle_stem(), paths.cache_dir()
    # Called as Altair calls it (no snippet: the bundle alone); the stub marks `snippet` required.
    text = vlc.javascript_bundle(vl_version=_vl_version())  # type: ignore[call-arg]  # optional at run time
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".bundle-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        # Written whole and then renamed: a reader in another process sees no file or the whole file.
        os.replace(tmp, folder / f"{stem}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.js")
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return text


#: Where the page's Vega bundle goes, until the rest of the page is `page_safe` (unguessable: a label
#: from a log cannot hold it).
_BUNDLE_MARK = f"/*vega-bundle-{secrets.token_hex(16)}*/"


@functools.cache
def _safe_bundle() -> str:
    """`vega_bundle` as a page carries it (`page_safe`; it holds no such character, so unchanged)."""
    return page_safe(vega_bundle())


class _InlineTemplate:
    """Altair's ``inline`` HTML template with Vega's JavaScript from `vega_bundle` (a template object Altair accepts).

    The page comes out `page_safe`: the template and the spec are made so, and the bundle (most of the
    page, the same in every figure) once per process.
    """

    def render(self, **kw: Any) -> str:
        page = page_safe(TEMPLATES["inline"].render(vegaembed_script=_BUNDLE_MARK, **kw))
        return page.replace(_BUNDLE_MARK, _safe_bundle(), 1)


def use_theme() -> None:
    """Enable the house theme (idempotent)."""
    alt.theme.enable(THEME)


def setup_notebook() -> None:
    """Theme plus the PNG-carrying renderer; call once at the top of a notebook.

    The notebook shows a chart as its figure file holds it: a table over Altair's 5,000-row limit (one
    long session's segments in figure 7) is drawn, as `save_chart` draws it, not refused.
    """
    use_theme()
    alt.renderers.enable(RENDERER)
    alt.data_transformers.disable_max_rows()
    from IPython import get_ipython  # loaded in any notebook; not imported where no notebook runs

    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.mimebundle_formatter.for_type(alt.TopLevelMixin, _shown)


def _shown(chart: alt.TopLevelMixin) -> Any:
    """Return what a notebook shows for a chart: Altair's ``_repr_mimebundle_``, its spec validated once (`checked_spec`).

    Registered with IPython for every Altair chart by `setup_notebook`, so a figure `save_chart` wrote and
    the notebook then shows is validated one time, not two, and made into a spec once (`_drawn_spec`).
    """
    renderer = alt.renderers.get()
    return renderer(_drawn_spec(chart)) if renderer else {}


#: A chart too small to matter, drawn once to start vl-convert's engine.
_WARM_SPEC: dict[str, Any] = {
    "data": {"values": [{"x": 0}]},
    "mark": "point",
    "encoding": {"x": {"field": "x", "type": "quantitative"}},
}


@functools.cache
def warm() -> None:
    """Start vl-convert's JavaScript engine (slow, once per process), as a process's first figure would.

    For a kernel warmed before its notebook starts (`compaction_lab.run.kernel.warm_code`). Not on a
    background thread of a notebook's own process: vl-convert holds the GIL while its engine starts.
    Nothing drawn here is kept.
    """
    vlc.svg_to_png(vlc.vegalite_to_svg(_WARM_SPEC, vl_version=_vl_version()), scale=PNG_SCALE)


#: What JSON must not carry raw inside an HTML ``<script>`` block: ``<`` (``</script>`` ends the block,
#: ``<!--`` hides its end), ``>`` and ``&`` (read as markup by an XHTML parser), and U+2028 / U+2029
#: (line ends to older JavaScript). Each is written as the JSON escape of the same character.
_SCRIPT_UNSAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def script_safe(json_text: str) -> str:
    r"""Make JSON text safe to embed in an HTML ``<script>`` block; it still parses to the same value.

    These characters can occur in JSON only inside strings, where the ``\uXXXX`` escape means the
    same character, so a log's ``</script><script>...`` stays data.

    Parameters
    ----------
    json_text : str
        Serialised JSON.
    """
    return json_text.translate(_SCRIPT_UNSAFE)


class _ScriptSafeEncoder(json.JSONEncoder):
    """`json.dumps` encoder whose output can sit in a ``<script>`` block (`script_safe`)."""

    def encode(self, o: Any) -> str:
        return script_safe(super().encode(o))


def save_chart(
    chart: alt.TopLevelMixin, stem: str | Path, formats: Iterable[str] = ("png", "svg", "html")
) -> dict[str, Path]:
    """Write a chart as PNG, SVG and self-contained HTML next to each other.

    Parameters
    ----------
    chart : altair chart
    stem : path without suffix, e.g. ``run/figures/fig2_composition``
    formats : which of png, svg, html to write

    Returns
    -------
    dict mapping format to written path.
    """
    return _save(chart, stem, formats)[0]


def _save(chart: alt.TopLevelMixin, stem: str | Path, formats: Iterable[str]) -> tuple[dict[str, Path], dict[str, Any]]:
    """`save_chart`'s work; also returns the validated spec it drew."""
    use_theme()
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    formats = list(formats)
    unknown = [f for f in formats if f not in ("png", "svg", "html")]
    if unknown:
        raise ValueError(f"unknown chart format {unknown[0]!r}; expected png, svg or html")
    # A chart drawn by a registered figure holds only `vega_safe` strings; any other is made safe here.
    spec = _written(_drawn_spec(chart), _NON_VEGA)
    images = _images(spec) if {"png", "svg"} & set(formats) else None
    written: dict[str, Path] = {}
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        if fmt == "png" and images:
            path.write_bytes(images[1])
        elif fmt == "svg" and images:
            path.write_text(images[0], encoding="utf-8")
        elif fmt == "html":
            # The inline template bundles Vega's JavaScript (`vega_bundle`): no CDN needed. Altair writes the
            # spec into a <script> block as plain json.dumps, so a label from a log could close the block
            # and run as script: the encoder escapes what HTML would read (neither Altair nor vl-convert
            # offers it).
            # What ``chart.save(path, format="html", inline=True)`` writes, from the spec validated above.
            page = spec_to_mimebundle(
                spec=spec,
                format="html",
                mode="vega-lite",
                vega_version=alt.VEGA_VERSION,
                vegalite_version=alt.VEGALITE_VERSION,
                vegaembed_version=alt.VEGAEMBED_VERSION,
                json_kwds={"cls": _ScriptSafeEncoder},
                template=_InlineTemplate(),
            )
            path.write_text(page["text/html"], encoding="utf-8")  # page_safe: `_InlineTemplate`
        written[fmt] = path
    return written, spec
