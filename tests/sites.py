"""Small generated sites for the sharding and merging tests: softmax blocks, some drifting."""

from __future__ import annotations

from pathlib import Path

_BLOCK = """
```formula id="{name}" oracle="softmax" timing="off"
\\mathrm{{softmax}}(x)_i = \\frac{{e^{{x_i}}}}{{\\sum_j e^{{x_j}}}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis={axis})  # page {page}, block {block}
```
"""


def softmax_site(root: Path, pages: int, blocks: int, *, drifting: int = 3) -> Path:
    """``pages`` pages of ``blocks`` blocks each under ``root``; every ``drifting``-th block
    computes its softmax over the wrong axis (``axis=1``: a mismatch)."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "mkdocs.yml").write_text(
        "site_name: shards\nplugins:\n  - formula-check\n"
        "markdown_extensions:\n  - pymdownx.superfences\n",
        encoding="utf-8",
    )
    number = 0
    for page in range(pages):
        text = f"# Page {page}\n"
        for block in range(blocks):
            number += 1
            axis = 1 if drifting and number % drifting == 0 else -1
            text += _BLOCK.format(name=f"p{page}-b{block}", axis=axis, page=page, block=block)
        (root / "docs" / f"page{page:03d}.md").write_text(text, encoding="utf-8")
    return root
