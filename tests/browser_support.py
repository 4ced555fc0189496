"""What the browser tests share: a headless Chromium kept offline, a loopback server, the
in-process build of a site on a fake engine, and the probes a page is checked with.

Chromium is the distribution's (``apt-get install chromium``), driven by Playwright without
its own browser download; every request that leaves loopback is aborted and recorded.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
LOOPBACK = {"127.0.0.1", "localhost"}
# Material's own light/slate toggle, so the dark palette is checked the way a reader flips it.
PALETTE_TOGGLE = [
    {"scheme": "default", "toggle": {"icon": "material/brightness-7", "name": "Dark mode"}},
    {"scheme": "slate", "toggle": {"icon": "material/brightness-4", "name": "Light mode"}},
]
WIDTHS = (390, 700, 1280)
"""A phone, a split-screen editor and preview, a desktop."""

# Waits until MathJax's startup promise settles, also when the page chained a re-typeset onto it.
MATHJAX_DONE = """async () => {
  for (;;) {
    const pending = MathJax.startup.promise;
    await pending;
    if (pending === MathJax.startup.promise) return;
  }
}"""

# Words drawn on more than one line inside the elements `selector` finds: a word cut in two
# ("outpu/t"). A <pre> holds a message as written, which may wrap anywhere: it is left out.
BROKEN_WORDS = """(selector) => [...document.querySelectorAll(selector)].flatMap((element) => {
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  const broken = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest('pre')) continue;
    let offset = 0;
    for (const word of node.data.split(/(\\s+)/)) {
      if (word.trim()) {
        const range = document.createRange();
        range.setStart(node, offset);
        range.setEnd(node, offset + word.length);
        const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
        if (lines.size > 1) broken.push(`${word} (${lines.size} lines)`);
      }
      offset += word.length;
    }
  }
  return broken;
})"""


# Each display formula's drawn width against its natural width (MathJax's ex size in px):
# a formula squeezed to 1 px, or shrunk to fit, is drawn smaller than its content.
MATH_WIDTHS = """() => [...document.querySelectorAll('div.arithmatex mjx-container svg')].map((svg) => ({
  tex: svg.closest('div.arithmatex').textContent.trim().slice(0, 40),
  drawn: svg.getBoundingClientRect().width,
  natural: svg.width.baseVal.value,
}))"""

# The lowest contrast of any code chip in a card against its own background (WCAG's ratio).
CODE_CONTRAST = """() => {
  const channel = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const luminance = (css) => {
    const [r, g, b] = css.match(/[\\d.]+/g).map(Number);
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  };
  const background = (node) => {
    for (; node; node = node.parentElement) {
      const colour = getComputedStyle(node).backgroundColor;
      if (!/rgba\\(.*, 0\\)$/.test(colour) && colour !== 'transparent') return colour;
    }
    return 'rgb(255, 255, 255)';
  };
  const ratios = [...document.querySelectorAll('.fc-card code')].map((code) => {
    const [a, b] = [luminance(getComputedStyle(code).color), luminance(background(code))];
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  });
  return Math.min(...ratios);
}"""


# What a reader at this width cannot see: a card table wider than its box, a page that scrolls
# sideways, a piece of a card that sticks out of it, a message or note that does not wrap, a
# figure drawn so small that its smallest text (`smallest` px in the figure's own pixels) falls
# under `readable` px. What a box clips or scrolls (display math, a figure, a <pre>) is not
# said to stick out; `SCROLL_BOXES` checks that those show they scroll.
LAYOUT_PROBLEMS = """([smallest, readable]) => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) {
    problems.push(`the page scrolls sideways: ${root.scrollWidth} > ${root.clientWidth} px`);
  }
  for (const table of document.querySelectorAll('.fc-card table')) {
    const box = table.parentElement;
    if (table.getBoundingClientRect().width > box.clientWidth + 1) {
      problems.push(`${table.className} wider than its box: `
        + `${Math.round(table.getBoundingClientRect().width)} > ${box.clientWidth} px`);
    }
  }
  const clipped = (element, card) => {
    for (let box = element.parentElement; box && box !== card; box = box.parentElement) {
      if (getComputedStyle(box).overflowX !== 'visible') return true;
    }
    return false;
  };
  for (const card of document.querySelectorAll('.fc-card')) {
    const right = card.getBoundingClientRect().right + 1;
    for (const element of card.querySelectorAll('*')) {
      if (!element.getClientRects().length || clipped(element, card)) continue;
      if (element.getBoundingClientRect().right > right) {
        problems.push(`${element.tagName.toLowerCase()}.${element.className} sticks out of `
          + `its card: ${element.textContent.trim().slice(0, 40)}`);
      }
    }
  }
  // Messages and notes wrap: their point must not hide at the end of a scroll box.
  const wrapping = ['.fc-formula pre', '.fc-formula pre > code', 'pre.fc-error-message',
    'pre.fc-error-message > code', '.fc-notes'].map((inside) => `.fc-card ${inside}`).join();
  for (const text of document.querySelectorAll(wrapping)) {
    if (text.getClientRects().length && text.scrollWidth > text.clientWidth + 1) {
      problems.push(`${text.className || text.tagName} does not wrap: `
        + `${text.textContent.trim().slice(0, 40)}`);
    }
  }
  for (const image of document.querySelectorAll('.fc-card .fc-figure img')) {
    if (!image.naturalWidth || !image.getClientRects().length) continue;
    const text = smallest * image.getBoundingClientRect().width / image.naturalWidth;
    if (text < readable) {
      problems.push(`${image.getAttribute('alt')}: its labels drawn ${text.toFixed(1)} px high`);
    }
  }
  return problems;
}"""

# Boxes meant to scroll sideways, each tagged with a data-fc-probe number; `wide` says whether
# it has more than it shows. Its mark is looked at in a screenshot (`unmarked_scroll_boxes`).
SCROLL_BOXES = """() => [...document.querySelectorAll('div.arithmatex, .fc-scroll, .fc-figure')]
  .filter((box) => box.getClientRects().length && box.clientWidth > 0)
  .map((box, index) => {
    box.dataset.fcProbe = String(index);
    return {
      index,
      wide: box.scrollWidth > box.clientWidth, // as the browser sees it: it scrolls 1 px too
      what: box.textContent.trim().slice(0, 40),
    };
  })"""


# Hides what stays put while the page scrolls (Material's header fades its shadow in), or
# shows it again (`false`).
HIDE_FIXED = """(hide) => document.querySelectorAll('body *').forEach((element) => {
  if (['fixed', 'sticky'].includes(getComputedStyle(element).position)) {
    element.style.visibility = hide ? 'hidden' : '';
  }
})"""

EDGE_PX = 8
"""How wide a strip at each edge of a box is looked at for its scroll mark."""


# The pixels of a PNG (Chromium's screenshots, given base64), decoded by the browser itself:
# an RGBA `ImageData`, its values as the file holds them.
DECODE_PNG = """async (png) => {
  const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
  const bitmap = await createImageBitmap(new Blob([bytes], {type: 'image/png'}),
    {colorSpaceConversion: 'none', premultiplyAlpha: 'none'});
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const context = canvas.getContext('2d');
  context.drawImage(bitmap, 0, 0);
  return context.getImageData(0, 0, bitmap.width, bitmap.height);
}"""

# One pixel's RGB.
PNG_PIXEL = f"""async ([png, x, y]) => {{
  const image = await ({DECODE_PNG})(png);
  const at = 4 * (y * image.width + x);
  return [...image.data.slice(at, at + 3)];
}}"""

# How many pixels of the strips `edge` px wide at the left and right differ clearly (by more
# than a glyph's anti-aliasing does, `by`) between two shots of one box; null where the two
# shots differ in size.
EDGES_DIFFER = f"""async ([drawn, bare, edge, by]) => {{
  const [one, other] = [await ({DECODE_PNG})(drawn), await ({DECODE_PNG})(bare)];
  if (one.width !== other.width || one.height !== other.height) return null;
  const columns = [...Array(edge).keys()].flatMap((x) => [x, one.width - edge + x]);
  let differ = 0;
  for (let y = 0; y < one.height; y++) {{
    for (const x of columns) {{
      const at = 4 * (y * one.width + x);
      const channels = [0, 1, 2].map((c) => Math.abs(one.data[at + c] - other.data[at + c]));
      differ += Math.max(...channels) > by;
    }}
  }}
  return differ;
}}"""


def png_pixel(page: Any, png: bytes, x: int, y: int) -> tuple[int, ...]:
    """The colour of one pixel of a screenshot, read by the browser of ``page``."""
    return tuple(page.evaluate(PNG_PIXEL, [base64.b64encode(png).decode(), x, y]))


def _edges_differ(page: Any, drawn: bytes, bare: bytes) -> int:
    """How many pixels of the edge strips differ clearly between two shots of one box."""
    shots = [base64.b64encode(png).decode() for png in (drawn, bare)]
    differ = page.evaluate(EDGES_DIFFER, [*shots, EDGE_PX, 24])
    assert differ is not None, "the two shots of one box differ in size"
    return int(differ)


def unmarked_scroll_boxes(page: Any, most_fitting: int = 3) -> list[str]:
    """Boxes that scroll sideways yet look like boxes that do not, and boxes that fit yet carry
    a scroll mark. A box is shot as drawn and again with neither background nor mask (its
    edge shadows are its background, a figure's fade its mask), so a box that scrolls must
    differ at an edge, and one that fits must not."""
    wrong = []
    fitting = 0
    page.evaluate(HIDE_FIXED, True)  # a fixed bar over a tall box would differ between shots
    for box in page.evaluate(SCROLL_BOXES):
        fitting += not box["wide"]
        if fitting > most_fitting and not box["wide"]:
            continue
        element = page.locator(f'[data-fc-probe="{box["index"]}"]')
        # Not `animations="disabled"`: that would run a figure's scroll-driven fade to its end.
        drawn = element.screenshot()
        element.evaluate("(box) => { box.style.background = 'none'; box.style.mask = 'none'; }")
        bare = element.screenshot()
        element.evaluate("(box) => { box.style.background = ''; box.style.mask = ''; }")
        differ = _edges_differ(page, drawn, bare)
        if box["wide"] and differ == 0:
            wrong.append(f"scrolls with no sign of it: {box['what']}")
        if not box["wide"] and differ:
            wrong.append(f"fits yet is marked as scrolling ({differ} px): {box['what']}")
    page.evaluate(HIDE_FIXED, False)
    return wrong


@dataclass
class PageLog:
    """What one page did on the wire and in its console."""

    requests: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_clean(self, name: str) -> None:
        """Something was loaded, all of it from loopback, nothing failed, no console error."""
        assert self.requests, f"{name}: no requests recorded"
        assert self.external == [], f"{name}: requests left loopback: {self.external}"
        assert self.failed == [], f"{name}: failed responses: {self.failed}"
        assert self.errors == [], f"{name}: console errors: {self.errors}"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """``directory`` served on a free loopback port; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """One headless Chromium (the distribution's, with a fresh profile)."""
    from playwright import sync_api  # the callers skip when it is missing

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


def watch(page: Any) -> PageLog:
    """Record every request, abort those leaving loopback, and collect console errors."""
    log = PageLog()

    def route(route: Any) -> None:
        url = route.request.url
        if urlsplit(url).hostname in LOOPBACK:
            route.continue_()
        else:
            log.external.append(url)
            route.abort()

    page.route("**/*", route)
    page.on("request", lambda request: log.requests.append(request.url))
    page.on(
        "response",
        lambda response: (
            response.status >= 400 and log.failed.append(f"{response.status} {response.url}")
        ),
    )
    page.on("console", lambda message: message.type == "error" and log.errors.append(message.text))
    page.on("pageerror", lambda error: log.errors.append(f"uncaught: {error}"))
    return log


# Flips the palette and waits until every colour it fades (Material's 0.25 s transitions)
# has arrived: a colour read mid-fade is neither palette's, and a slow machine draws late.
SET_SCHEME = """async (scheme) => {
  document.body.dataset.mdColorScheme = scheme;
  getComputedStyle(document.body).color;  // the transitions start here
  const fades = document.getAnimations().filter((fade) => fade instanceof CSSTransition);
  await Promise.all(fades.map((fade) => fade.finished.catch(() => {})));
}"""


def open_page(context: Any, url: str) -> tuple[Any, PageLog]:
    """Load a page and wait for MathJax to finish typesetting it."""
    page = context.new_page()
    log = watch(page)
    page.goto(url, wait_until="load")
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate(MATHJAX_DONE)
    return page, log


def set_scheme(page: Any, scheme: str) -> None:
    """Material's palette as its toggle sets it (``default`` or ``slate``), faded in."""
    page.evaluate(SET_SCHEME, scheme)
