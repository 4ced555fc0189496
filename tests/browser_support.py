"""What the browser tests share: a headless Chromium kept offline, a loopback server, the
in-process build of a site on a fake engine, and the probes a page is checked with.

Chromium is the distribution's (``apt-get install chromium``), driven by Playwright without
its own browser download; every request that leaves loopback is aborted and recorded.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import struct
import threading
import zlib
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


# Hides what stays put while the page scrolls (Material's header fades its shadow in).
HIDE_FIXED = """() => document.querySelectorAll('body *').forEach((element) => {
  if (['fixed', 'sticky'].includes(getComputedStyle(element).position)) {
    element.style.visibility = 'hidden';
  }
})"""

EDGE_PX = 8
"""How wide a strip at each edge of a box is looked at for its scroll mark."""


def png_rows(png: bytes) -> list[list[tuple[int, ...]]]:
    """The pixels of an 8-bit RGB(A) PNG (what Chromium's screenshots are), row by row, RGB."""
    width, height, depth, kind = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and kind in (2, 6), (depth, kind)
    channels = 3 if kind == 2 else 4
    data, at = b"", 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        if png[at + 4 : at + 8] == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    raw, stride, rows = zlib.decompress(data), width * channels, []
    previous = bytearray(stride)
    for row in range(height):
        start = row * (stride + 1)
        method, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if method == 1:
                line[i] = (line[i] + left) & 255
            elif method == 2:
                line[i] = (line[i] + up) & 255
            elif method == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif method == 4:
                guess = left + up - corner
                near = min((abs(guess - left), 0, left), (abs(guess - up), 1, up))
                near = min(near, (abs(guess - corner), 2, corner))
                line[i] = (line[i] + near[2]) & 255
        rows.append([tuple(line[x : x + 3]) for x in range(0, stride, channels)])
        previous = line
    return rows


def _edges_differ(drawn: bytes, bare: bytes) -> int:
    """How many pixels of the edge strips differ clearly (by more than a glyph's
    anti-aliasing does) between two shots of one box."""
    differ = 0
    for one, other in zip(png_rows(drawn), png_rows(bare), strict=True):
        for x in [*range(EDGE_PX), *range(len(one) - EDGE_PX, len(one))]:
            differ += max(abs(a - b) for a, b in zip(one[x], other[x], strict=True)) > 24
    return differ


def unmarked_scroll_boxes(page: Any, most_fitting: int = 3) -> list[str]:
    """Boxes that scroll sideways yet look like boxes that do not, and boxes that fit yet carry
    a scroll mark. A box is shot as drawn and again with neither background nor mask (its
    edge shadows are its background, a figure's fade its mask), so a box that scrolls must
    differ at an edge, and one that fits must not."""
    wrong = []
    fitting = 0
    page.evaluate(HIDE_FIXED)  # a fixed bar over a tall box would differ between the shots
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
        differ = _edges_differ(drawn, bare)
        if box["wide"] and differ == 0:
            wrong.append(f"scrolls with no sign of it: {box['what']}")
        if not box["wide"] and differ:
            wrong.append(f"fits yet is marked as scrolling ({differ} px): {box['what']}")
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


def set_scheme(page: Any, scheme: str) -> None:
    """Material's palette as its toggle sets it (``default`` or ``slate``)."""
    page.evaluate("(scheme) => { document.body.dataset.mdColorScheme = scheme; }", scheme)
    page.wait_for_timeout(400)  # Material fades colours over 0.25 s when the palette flips
