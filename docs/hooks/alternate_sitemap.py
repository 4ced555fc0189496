"""MkDocs hook: the sitemap Material's language menu looks for under the Chinese half.

The menu links ``zh/`` as another language and, to keep the reader on the same page, reads
``zh/sitemap.xml``. Both halves of this site are one build with one sitemap; without a copy
there, every page load asks for a file that does not exist (a 404 in the console).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def on_post_build(config: Any, **kwargs: Any) -> None:
    """Copy the site's sitemap under each alternate language's folder."""
    site = Path(config["site_dir"])
    sitemap = site / "sitemap.xml"
    if not sitemap.is_file():
        return
    for alternate in config["extra"].get("alternate", []):
        folder = str(alternate.get("link", "")).strip("./")
        if folder:
            (site / folder).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(sitemap, site / folder / "sitemap.xml")
