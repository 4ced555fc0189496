r"""The files a page with formula cards needs: the stylesheets, the report page's script and an
offline MathJax.

MathJax 3 comes from the PyPI package ``django-static-mathjax`` (its ``es5/`` folder). We ship
``tex-svg.js``: one self-contained file whose glyphs are SVG paths, so nothing depends on web
fonts loading (the failure mode seen with CHTML: typeset elements with blank glyphs). The TeX
extensions folder rides along because MathJax's ``autoload`` fetches e.g. ``\boldsymbol``
support on demand, relative to the script's own URL.

A site that loads its own MathJax (Material's recipe: a ``mathjax.js`` that sets
``window.MathJax``, then ``tex-mml-chtml.js`` from a CDN or a local copy) keeps it:
:func:`site_mathjax` finds it among the site's scripts, and ours is left out. Two copies on one
page fight over ``window.MathJax`` (the site's re-typeset hook then calls a function the other
copy lacks); the site's own MathJax typesets our cards' math, which is plain arithmatex output.

A site without the MkDocs plugin (Zensical, plain Markdown) calls :func:`write_assets` once
and lists the returned names in ``extra_css`` / ``extra_javascript``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from formula_check.render import STYLESHEET

ASSET_DIR = "assets/formula-check"
"""Where the assets live, relative to the site root."""

REPORT_STYLESHEET = STYLESHEET.parent / "formula-check-report.css"
"""The report page's stylesheet."""
REPORT_SCRIPT = STYLESHEET.parent / "formula-check-report.js"
"""The report page's filter, search and sorting; it does nothing on a page without a report."""

# A script of the site that is (or configures) a MathJax: its file name says "mathjax"
# (Material's `javascripts/mathjax.js`, MathJax 2's `MathJax.js`, a `mathjax@3` CDN path) or
# is one of MathJax's combined components (`tex-mml-chtml.js`, `tex-svg-full.js`...).
_MATHJAX_SCRIPT = re.compile(
    r"mathjax|(?:^|/)(?:tex|mml)-[a-z-]*(?:chtml|svg)[a-z-]*(?:\.min)?\.js$", re.IGNORECASE
)

# Our own startup: typeset only arithmatex output (what pymdownx.arithmatex in generic mode
# writes), and again after Material's instant navigation swaps the page body.
MATHJAX_CONFIG = """\
window.MathJax = {
  tex: {
    inlineMath: [["\\\\(", "\\\\)"]],
    displayMath: [["\\\\[", "\\\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
  svg: { fontCache: "global" }
};
(function () {
  function retypeset() {
    var mj = window.MathJax;
    if (!mj || !mj.startup || !mj.startup.promise) { return; }
    mj.startup.promise = mj.startup.promise.then(function () {
      mj.typesetClear();
      mj.texReset();
      return mj.typesetPromise();
    });
  }
  if (typeof window.document$ !== "undefined") { window.document$.subscribe(retypeset); }
})();
"""


class MissingMathJaxError(RuntimeError):
    """``django-static-mathjax`` is not installed (and MathJax was asked for)."""


@dataclass(frozen=True)
class Asset:
    """One file of the site: its name under :data:`ASSET_DIR`, and a source file or text."""

    name: str
    source: Path | None = None
    text: str = ""


def mathjax_root() -> Path:
    """The installed MathJax 3 ``es5`` folder."""
    spec = importlib.util.find_spec("mathjax")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / "static" / "mathjax" / "es5"
        if (candidate / "tex-svg.js").is_file():
            return candidate
    raise MissingMathJaxError(
        "MathJax is not installed: `pip install django-static-mathjax` (it ships MathJax 3 "
        "for offline use), or turn the plugin's `mathjax` option off and load your own"
    )


def _mathjax_assets() -> Iterator[Asset]:
    root = mathjax_root()
    yield Asset("mathjax-config.js", text=MATHJAX_CONFIG)
    yield Asset("mathjax/tex-svg.js", root / "tex-svg.js")
    for path in sorted((root / "input" / "tex" / "extensions").rglob("*.js")):
        yield Asset(f"mathjax/{path.relative_to(root).as_posix()}", path)


def site_mathjax(scripts: list[str]) -> str | None:
    """The first of a site's ``extra_javascript`` entries that loads or configures its own
    MathJax (ours, under :data:`ASSET_DIR`, do not count); ``None`` when there is none."""
    for script in scripts:
        path = script.split("?", 1)[0].split("#", 1)[0]
        if ASSET_DIR in path:
            continue
        if _MATHJAX_SCRIPT.search(path):
            return script
    return None


def site_assets(*, mathjax: bool = True, report: bool = False) -> list[Asset]:
    """Every asset a site needs, the stylesheets first; ``report``: with the report page's
    stylesheet and script (the MkDocs plugin's: only it makes a report page)."""
    assets = [Asset("formula-check.css", STYLESHEET)]
    if report:
        assets.append(Asset("formula-check-report.css", REPORT_STYLESHEET))
        assets.append(Asset("formula-check-report.js", REPORT_SCRIPT))
    if mathjax:
        assets.extend(_mathjax_assets())
    return assets


def stylesheets(*, report: bool = False) -> list[str]:
    """Site-relative paths for ``extra_css`` (``report``: the report page's too)."""
    report_css = [f"{ASSET_DIR}/formula-check-report.css"] if report else []
    return [f"{ASSET_DIR}/formula-check.css", *report_css]


def scripts(*, mathjax: bool = True, report: bool = False) -> list[str]:
    """Site-relative paths for ``extra_javascript``, in load order (config before MathJax;
    ``report``: the report page's script last)."""
    ours = [f"{ASSET_DIR}/mathjax-config.js", f"{ASSET_DIR}/mathjax/tex-svg.js"] if mathjax else []
    return ours + ([f"{ASSET_DIR}/formula-check-report.js"] if report else [])


def write_assets(site_dir: Path, *, mathjax: bool = True) -> list[Path]:
    """Copy every asset under ``site_dir/assets/formula-check/``; returns the written files."""
    written = []
    for asset in site_assets(mathjax=mathjax):
        target = site_dir / ASSET_DIR / asset.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if asset.source is not None:
            shutil.copyfile(asset.source, target)
        else:
            target.write_text(asset.text, encoding="utf-8")
        written.append(target)
    return written
