"""A verdict is a function of its own block alone: real builds in which a block that changes
its process comes before a block it could fool, against the same later blocks built alone,
with and without the cache."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from support import mkdocs_build

pytestmark = [pytest.mark.site, pytest.mark.tf]

CONFIG = """\
site_name: Clean slate
plugins:
  - formula-check:
      timing: false
markdown_extensions:
  - pymdownx.superfences
"""


def block(header: str, latex: str, code: str) -> str:
    return f"```formula {header}\n{latex}\n```\n\n```python\n{textwrap.dedent(code).strip()}\n```\n"


SOFTMAX = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
LINEAR = "Q = XW_Q"
ATTENTION = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"
LAYER_NORM = (
    r"\text{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta"
)

# Each polluter changes its process in a way that would fool the block after it.
POLLUTERS = {
    "patches-softmax": block(
        'id="patches-softmax" oracle="softmax"',
        SOFTMAX,
        """
        import tensorflow as tf

        _softmax = tf.nn.softmax
        tf.nn.softmax = lambda x, axis=-1, name=None: _softmax(x, axis=-1)


        def softmax(x):
            return tf.nn.softmax(x, axis=-1)
        """,
    ),
    "half-precision": block(
        'id="half-precision" oracle="linear" dims="d_k=4"',
        LINEAR,
        """
        import tensorflow as tf

        tf.keras.mixed_precision.set_global_policy("mixed_float16")


        def project(x, W):
            return tf.einsum("bnd,dk->bnk", x, W)
        """,
    ),
    "moves-away": block(
        'id="moves-away" oracle="linear" dims="d_k=4"',
        LINEAR,
        """
        import os

        import tensorflow as tf

        os.chdir(os.sep)


        def project(x, W):
            return tf.einsum("bnd,dk->bnk", x, W)
        """,
    ),
    "chatty-thread": block(
        'id="chatty-thread" oracle="linear" dims="d_k=4"',
        LINEAR,
        """
        import threading
        import time

        import tensorflow as tf


        def chatter():
            while True:
                print("a line from another block")
                time.sleep(0.001)


        threading.Thread(target=chatter, daemon=True).start()


        def project(x, W):
            return tf.einsum("bnd,dk->bnk", x, W)
        """,
    ),
    "patches-checker": block(
        'id="patches-checker" oracle="linear" dims="d_k=4"',
        LINEAR,
        """
        import tensorflow as tf

        from formula_check.execution import layer_weights

        layer_weights.perturb = lambda variables, seed: None


        def project(x, W):
            return tf.einsum("bnd,dk->bnk", x, W)
        """,
    ),
}

# What each later block is, alone: the verdict it must keep after any polluter.
VICTIMS = {
    "wrong-axis": (
        "mismatch",
        block(
            'id="wrong-axis" oracle="softmax"',
            SOFTMAX,
            """
            import tensorflow as tf


            def softmax(x):
                return tf.nn.softmax(x, axis=1)
            """,
        ),
    ),
    "dense": (
        "verified",
        block(
            'id="dense" oracle="linear" dims="d_k=4" kind="factory" '
            'init="d_k=d_k" weights="W=kernel"',
            LINEAR,
            """
            import tensorflow as tf


            def make_projection(d_k):
                return tf.keras.layers.Dense(d_k, use_bias=False)
            """,
        ),
    ),
    "reads-params": (
        "verified",
        block(
            'id="reads-params" oracle="attention"',
            ATTENTION,
            """
            import json

            import tensorflow as tf


            def attention(q, k, v):
                with open("snippets/params.json", encoding="utf-8") as file:
                    axis = json.load(file)["axis"]
                scale = tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
                weights = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / scale, axis=axis)
                return tf.matmul(weights, v), weights
            """,
        ),
    ),
    "ignores-gain": (
        "mismatch",
        block(
            'id="ignores-gain" oracle="layer_norm" kind="layer" weights="gamma=gamma beta=beta"',
            LAYER_NORM,
            """
            import tensorflow as tf


            class Norm(tf.keras.layers.Layer):
                def build(self, shape):
                    self.gamma = self.add_weight(shape=shape[-1:], initializer="ones")
                    self.beta = self.add_weight(shape=shape[-1:], initializer="zeros")

                def call(self, x):
                    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
                    return (x - mean) / tf.sqrt(variance + 1e-6) + self.beta
            """,
        ),
    ),
}


# Which polluter comes before which victim, in this order (in a shared process the precision
# policy would also reach every block after it: it comes last, so each pair shows its own harm).
PAIRS = [
    ("patches-checker", "ignores-gain"),
    ("patches-softmax", "wrong-axis"),
    ("moves-away", "reads-params"),
    ("half-precision", "dense"),
]


def make_site(folder: Path, polluted: bool) -> Path:
    """One page of victims; with ``polluted``, each after the polluter that would fool it."""
    (folder / "docs").mkdir(parents=True)
    (folder / "snippets").mkdir()
    (folder / "snippets" / "params.json").write_text('{"axis": -1}\n', encoding="utf-8")
    (folder / "mkdocs.yml").write_text(CONFIG, encoding="utf-8")
    parts = ["# Blocks\n"]
    for polluter, victim in PAIRS:
        if polluted:
            parts.append(POLLUTERS[polluter])
        parts.append(VICTIMS[victim][1])
    (folder / "docs" / "index.md").write_text("\n".join(parts), encoding="utf-8")
    return folder


def build(project: Path) -> dict[str, dict[str, object]]:
    """``mkdocs build`` (cache on); each block's entry in the JSON report, by id."""
    done = mkdocs_build(project)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((project / "site" / "formula-check-report.json").read_text("utf-8"))
    return {entry["id"]: entry for entry in report["blocks"]}


def verdict(entry: dict[str, object]) -> tuple[object, ...]:
    return (entry["status"], entry["detail"], entry["max_abs_error"], entry["notes"])


def test_every_block_gets_the_verdict_it_gets_alone_with_and_without_the_cache(
    tmp_path: Path,
) -> None:
    alone = build(make_site(tmp_path / "alone", polluted=False))
    polluted_site = make_site(tmp_path / "polluted", polluted=True)
    polluted = build(polluted_site)
    again = build(polluted_site)  # every block from the cache this time
    for victim_id, (status, _) in VICTIMS.items():
        assert alone[victim_id]["status"] == status, alone[victim_id]
        assert verdict(polluted[victim_id]) == verdict(alone[victim_id]), victim_id
        assert verdict(again[victim_id]) == verdict(alone[victim_id]), victim_id
        assert again[victim_id]["cached"] is True


def test_a_thread_left_running_prints_into_no_other_card(tmp_path: Path) -> None:
    """Only the block that started the thread may show its lines in its Printed output."""
    project = tmp_path / "site"
    (project / "docs").mkdir(parents=True)
    (project / "mkdocs.yml").write_text(CONFIG, encoding="utf-8")
    quiet = VICTIMS["dense"][1]
    (project / "docs" / "index.md").write_text(
        "# Threads\n\n" + POLLUTERS["chatty-thread"] + "\n" + quiet, encoding="utf-8"
    )
    build(project)
    html = (project / "site" / "index.html").read_text("utf-8")
    chatty, _, rest = html.partition('id="fc-dense"')
    assert "a line from another block" not in rest
    assert 'id="fc-chatty-thread"' in chatty
