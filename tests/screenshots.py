"""Screenshots of the attention guide's first card for the docs, at a phone's, a split screen's
and a desktop's width: light, slate, and the Chinese page.

Build the docs first (their checks run for real), then::

    python tests/screenshots.py site docs/assets/screens

Chromium is the distribution's, as in the browser tests; nothing leaves loopback.
"""

from __future__ import annotations

import sys
from pathlib import Path

from browser_support import WIDTHS, chromium, open_page, serve, set_scheme

SHOTS = (("guide/attention/", "default", "light"), ("guide/attention/", "slate", "dark"))
SHOTS += (("zh/guide/attention/", "default", "zh"),)
CARD = "#fc-sdpa"
"""The card shot: scaled dot-product attention, its formula just above it."""


def shoot(site: Path, folder: Path) -> list[Path]:
    """One viewport-high picture per page, palette and width, the card's formula at its top."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with serve(site) as url, chromium() as browser:
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 900})
            for path, scheme, name in SHOTS:
                page, log = open_page(context, url + path)
                set_scheme(page, scheme)  # after the page's own scripts have set theirs
                # The formula above the card at the top, below Material's bar.
                page.evaluate(
                    """(card) => {
                      const formula = document.querySelector(card).previousElementSibling;
                      const top = formula.getBoundingClientRect().top + window.scrollY;
                      window.scrollTo(0, top - 70);
                    }""",
                    CARD,
                )
                page.wait_for_timeout(300)
                target = folder / f"attention-{name}-{width}.png"
                page.screenshot(path=target, animations="disabled")
                log.assert_clean(f"{path} at {width} px, {scheme}")
                written.append(target)
                page.close()
            context.close()
    return written


if __name__ == "__main__":
    for shot in shoot(Path(sys.argv[1]), Path(sys.argv[2])):
        print(shot)
