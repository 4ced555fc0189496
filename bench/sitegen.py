"""Synthetic MkDocs sites for the benchmarks: N pages of K formula blocks each.

Blocks cycle through six recipes modelled on ``fixtures/sites/good`` (attention, softmax,
feed-forward, linear projection, positional encoding, Keras layer normalisation), with small
dims. Every snippet carries a ``# page P, block B`` comment and every block its own ``seed=``,
so no two blocks share a cache key or a figure: a site of 200 blocks is 200 checks, never 40
checks and 160 hits.

The same blocks can be written out as notebook cells (snippet + a NumPy comparison against
the oracle's formula), which is what ``notebook_compare.py`` executes.

Used as a library by the benchmarks, or on its own::

    python bench/sitegen.py OUT_DIR --pages 10 --blocks-per-page 4
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEDGER_ENV = "FORMULA_BENCH_LEDGER"
"""When a site is written with ``ledger=True``, each snippet appends ``PID TAG`` to the file
this environment variable names: an execution count that does not trust the product's own."""


@dataclass(frozen=True)
class Recipe:
    """One kind of block: the fence's options, its formula, the snippet and a notebook check."""

    oracle: str
    options: str
    latex: str
    snippet: str
    check: str


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        oracle="attention",
        options='dims="b=2 n=5 m=7 d_k=16 d_v=12"',
        latex=r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V",
        snippet="""
            def scaled_dot_product_attention(q, k, v, mask=None):
                scores = tf.matmul(q, k, transpose_b=True)
                scores = scores / tf.math.sqrt(tf.cast(tf.shape(k)[-1], tf.float32))
                if mask is not None:
                    scores += mask * -1e9
                weights = tf.nn.softmax(scores, axis=-1)
                return tf.matmul(weights, v), weights
        """,
        check="""
            q, k, v = (rng.standard_normal(s) for s in [(2, 5, 16), (2, 7, 16), (2, 7, 12)])
            actual, _ = scaled_dot_product_attention(*(tf.constant(a, tf.float32) for a in (q, k, v)))
            logits = q @ k.transpose(0, 2, 1) / np.sqrt(16)
            weights = np.exp(logits - logits.max(-1, keepdims=True))
            weights /= weights.sum(-1, keepdims=True)
            np.testing.assert_allclose(actual.numpy(), weights @ v, rtol=1e-5, atol=1e-6)
        """,
    ),
    Recipe(
        oracle="softmax",
        options='dims="b=2 n=5 m=7"',
        latex=r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}",
        snippet="""
            def softmax(x):
                return tf.nn.softmax(x, axis=-1)
        """,
        check="""
            x = rng.standard_normal((2, 5, 7))
            actual = softmax(tf.constant(x, tf.float32)).numpy()
            expected = np.exp(x - x.max(-1, keepdims=True))
            expected /= expected.sum(-1, keepdims=True)
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
        """,
    ),
    Recipe(
        oracle="ffn",
        options='dims="b=2 n=5 d_model=8 d_ff=12"',
        latex=r"\text{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2",
        snippet="""
            def feed_forward(x, W_1, b_1, W_2, b_2):
                hidden = tf.nn.relu(tf.einsum("bnd,df->bnf", x, W_1) + b_1)
                return tf.einsum("bnf,fd->bnd", hidden, W_2) + b_2
        """,
        check="""
            arrays = [rng.standard_normal(s) for s in [(2, 5, 8), (8, 12), (12,), (12, 8), (8,)]]
            x, W_1, b_1, W_2, b_2 = arrays
            actual = feed_forward(*(tf.constant(a, tf.float32) for a in arrays)).numpy()
            expected = np.maximum(0.0, x @ W_1 + b_1) @ W_2 + b_2
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
        """,
    ),
    Recipe(
        oracle="linear",
        options='dims="b=2 n=5 d_model=8 d_k=4"',
        latex=r"Q = XW_Q",
        snippet="""
            def project(x, W):
                return tf.einsum("bnd,dk->bnk", x, W)
        """,
        check="""
            x, W = rng.standard_normal((2, 5, 8)), rng.standard_normal((8, 4))
            actual = project(tf.constant(x, tf.float32), tf.constant(W, tf.float32)).numpy()
            np.testing.assert_allclose(actual, x @ W, rtol=1e-5, atol=1e-5)
        """,
    ),
    Recipe(
        oracle="positional_encoding",
        options='dims="n=50 d_model=16"',
        latex=r"PE_{(pos, 2i)} = \sin\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right), \quad "
        r"PE_{(pos, 2i+1)} = \cos\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)",
        snippet="""
            def positional_encoding(position, d_model):
                i = np.arange(d_model)[np.newaxis, :]
                rates = 1 / np.power(10000, (2 * (i // 2)) / np.float32(d_model))
                angles = np.arange(position)[:, np.newaxis] * rates
                angles[:, 0::2] = np.sin(angles[:, 0::2])
                angles[:, 1::2] = np.cos(angles[:, 1::2])
                return tf.cast(angles[np.newaxis, ...], dtype=tf.float32)
        """,
        check="""
            actual = positional_encoding(50, 16).numpy()[0]
            angles = np.arange(50)[:, None] / np.power(10000.0, np.arange(0, 16, 2) / 16)
            expected = np.empty((50, 16))
            expected[:, 0::2], expected[:, 1::2] = np.sin(angles), np.cos(angles)
            np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)
        """,
    ),
    Recipe(
        oracle="layer_norm",
        options='dims="b=2 n=5 d_model=8" preset="keras-layer-norm" kind="factory"',
        latex=r"\text{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}"
        r" + \beta",
        snippet="""
            def make_layer_norm():
                return tf.keras.layers.LayerNormalization(epsilon=1e-6)
        """,
        check="""
            x = rng.standard_normal((2, 5, 8))
            layer = make_layer_norm()
            actual = layer(tf.constant(x, tf.float32)).numpy()
            gamma, beta = layer.gamma.numpy(), layer.beta.numpy()
            mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            expected = gamma * (x - mean) / np.sqrt(var + 1e-6) + beta
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
        """,
    ),
)

PROSE = (
    "The formula below is checked against its TensorFlow implementation on every build.",
    "Shapes are small on purpose: the check is about the maths, not about speed.",
    "If the code drifts from the formula, the card under the block turns red.",
)

NOTEBOOK_SETUP = """\
import os

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
"""


@dataclass(frozen=True)
class Block:
    """Block ``index`` of page ``page``, made from ``recipe``."""

    page: int
    index: int
    recipe: Recipe

    @property
    def block_id(self) -> str:
        return f"p{self.page}-b{self.index}-{self.recipe.oracle.replace('_', '-')}"

    def snippet(self, *, ledger: bool = False) -> str:
        """The snippet's Python source, unique to this block."""
        head = [f"# page {self.page}, block {self.index}"]
        head += ["import os"] if ledger else []
        head += ["import numpy as np", "import tensorflow as tf", "", ""]
        if ledger:
            head += [
                f'with open(os.environ["{LEDGER_ENV}"], "a", encoding="utf-8") as ledger:',
                # the warm worker that forked this check's process: one per worker while
                # TensorFlow stays loaded (each check's own process ends with it)
                f'    ledger.write(f"{{os.getppid()}} {self.block_id}\\n")',
                "",
            ]
        return "\n".join(head) + "\n" + textwrap.dedent(self.recipe.snippet).strip() + "\n"

    def markdown(self, *, heatmaps: bool = True, ledger: bool = False) -> str:
        """The fence, its formula and the snippet, as they sit on the page."""
        recipe = self.recipe
        seed = self.page * 1000 + self.index  # distinct inputs: distinct figures, as in real pages
        options = f'id="{self.block_id}" oracle="{recipe.oracle}" {recipe.options} seed="{seed}"'
        if not heatmaps:
            options += ' heatmaps="none"'
        return (
            f"```formula {options}\n{recipe.latex}\n```\n\n"
            f"```python\n{self.snippet(ledger=ledger)}```\n"
        )

    def notebook_code(self) -> str:
        """One notebook cell: the snippet, then a NumPy float64 comparison against the formula."""
        check = textwrap.dedent(self.recipe.check).strip()
        seed = self.page * 1000 + self.index
        return f"{self.snippet()}\n\nrng = np.random.default_rng({seed})\n{check}\n"


def generate(pages: int, blocks_per_page: int = 4) -> list[list[Block]]:
    """``pages`` lists of ``blocks_per_page`` blocks, cycling through :data:`RECIPES`."""
    count = len(RECIPES)
    return [
        [Block(p, b, RECIPES[(p * blocks_per_page + b) % count]) for b in range(blocks_per_page)]
        for p in range(pages)
    ]


def page_markdown(
    number: int, blocks: list[Block], *, heatmaps: bool = True, ledger: bool = False
) -> str:
    """A page: a title, a paragraph of prose before each block."""
    parts = [f"# Page {number}\n"]
    for block in blocks:
        parts.append(PROSE[block.index % len(PROSE)] + "\n")
        parts.append(block.markdown(heatmaps=heatmaps, ledger=ledger))
    return "\n".join(parts)


def site_config(name: str, plugin: Mapping[str, Any] | None) -> str:
    """``mkdocs.yml`` text; ``plugin`` holds formula-check's options, ``None`` leaves it out."""
    lines = [f"site_name: {name}", "theme:", "  name: material", "  font: false"]
    if plugin is None:
        lines.append("plugins: []")
    else:
        lines += ["plugins:", "  - formula-check:"]
        lines += [f"      {key}: {_yaml(value)}" for key, value in plugin.items()]
    lines += [
        "markdown_extensions:",
        "  - pymdownx.superfences",
        "  - pymdownx.arithmatex:",
        "      generic: true",
        "  - pymdownx.highlight",
    ]
    return "\n".join(lines) + "\n"


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_site(
    root: Path,
    pages: list[list[Block]],
    *,
    plugin: Mapping[str, Any] | None = None,
    heatmaps: bool = True,
    ledger: bool = False,
) -> Path:
    """Write ``mkdocs.yml`` and ``docs/`` under ``root``; returns the config's path."""
    docs = root / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for number, blocks in enumerate(pages):
        text = page_markdown(number, blocks, heatmaps=heatmaps, ledger=ledger)
        (docs / ("index.md" if number == 0 else f"page-{number:03d}.md")).write_text(text)
    options = {"timing": False, **(plugin or {})}
    if ledger:  # the snippets append to the file this variable names: checks see it by name
        options.setdefault("env", f"[{LEDGER_ENV}]")
    config = root / "mkdocs.yml"
    total = sum(len(blocks) for blocks in pages)
    config.write_text(site_config(f"Generated ({len(pages)} pages, {total} blocks)", options))
    return config


def notebook_cells(pages: list[list[Block]]) -> list[tuple[str, str]]:
    """``(kind, source)`` cells: a setup cell, then per block its formula and its check."""
    cells = [("code", NOTEBOOK_SETUP)]
    for blocks in pages:
        for block in blocks:
            cells.append(("markdown", f"$$\n{block.recipe.latex}\n$$"))
            cells.append(("code", block.notebook_code()))
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="folder to write mkdocs.yml and docs/ into")
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--blocks-per-page", type=int, default=4)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-heatmaps", action="store_true", help='add heatmaps="none"')
    args = parser.parse_args()
    pages = generate(args.pages, args.blocks_per_page)
    config = write_site(
        args.root, pages, plugin={"workers": args.workers}, heatmaps=not args.no_heatmaps
    )
    print(f"wrote {config} ({args.pages} pages, {args.pages * args.blocks_per_page} blocks)")


if __name__ == "__main__":
    main()
