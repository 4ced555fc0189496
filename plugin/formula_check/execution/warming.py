"""The warm worker's warm-up: two small checks of our own, run through the path every check
takes, and Keras' most used layers, before the first check's process is forked from it.

A check's process starts a new eager context (:func:`..runtime.isolation.fresh_runtime`), but what
the warm worker holds outside it is inherited: the modules Keras and TensorFlow import on
first use, the op definitions, shape functions and kernel registrations TensorFlow looks up
once per op, the Python caches of Keras' layers and of ``tf.function``. A check whose ops and
layers the warm worker has already run skips that work: 20 to 30 ms of CPU on a block of
attention, multi-head attention or a feed-forward network. So the warm-up runs what the
blocks checked most use: a function of matmul and softmax (also timed eagerly and under
``tf.function``), sines and cosines of a positional encoding, and a Keras layer built of
Dense layers, Keras' own MultiHeadAttention, a Sequential feed-forward network and layer
normalisation, with einsum and matmul, called eagerly and traced. All at tiny sizes: the
warm-up is paid once per worker, the savings once per check.

Nothing of it reaches a check. Its modules are unloaded as any snippet's are, each check
seeds every generator afresh, and a check's process starts an eager context of its own. Keras
names each layer after a count kept in its global state (``dense``, ``dense_1``...): the
warm-up runs its Keras layers in a global state of their own and puts Keras' back as it was
(:func:`keras_state_kept`). Where that state cannot be reached (another Keras), the warm-up
leaves its Keras layers out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from formula_check.execution.one_check import check
from formula_check.execution.snippet_module import WorkerState
from formula_check.messages import CheckReply
from formula_check.model import CheckSpec, Location, TimingSpec
from formula_check.planning.plan import plan_check
from formula_check.snippets import inline_snippet

WHERE = Location("<formula-check warm-up>", 1)
"""Where the warm-up's snippets say they are."""

ATTENTION = """
import tensorflow as tf

def attention(q, k, v, mask=None):
    scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
    if mask is not None:
        scores += (1.0 - tf.cast(mask, scores.dtype)) * -1e9
    weights = tf.nn.softmax(scores, axis=-1)
    return tf.matmul(weights, v), weights
"""

POSITIONS = """
import numpy as np
import tensorflow as tf

def positional_encoding(length, depth):
    positions = tf.range(length, dtype=tf.float32)[:, tf.newaxis]
    i = np.arange(depth)[np.newaxis, :]
    angles = positions / tf.pow(10000.0, tf.constant((2 * (i // 2)) / depth, tf.float32))
    return tf.concat([tf.sin(angles[:, 0::2]), tf.cos(angles[:, 1::2])], axis=-1)
"""


def specs() -> list[CheckSpec]:
    """The warm-up's checks: a function of matmul and softmax (timed, eagerly and traced) and
    a positional encoding."""
    timed = TimingSpec(enabled=True, warmup=1, repeats=3)
    return [
        CheckSpec("warm-up", WHERE, "attention", inline_snippet(ATTENTION, WHERE), timing=timed),
        CheckSpec(
            "warm-up-positions",
            WHERE,
            "positional_encoding",
            inline_snippet(POSITIONS, WHERE),
            dims={"n": 6, "d_model": 8},
            timing=TimingSpec(enabled=False),
        ),
    ]


def warm_up(session: WorkerState) -> bool:
    """Run the warm-up's checks, then its Keras layers; True when each check answered. A
    warm-up never stops a worker from serving: a check of it that fails is said in the hello
    (``warmed_up``), and the checks go on."""
    answered = True
    for spec in specs():
        try:
            plan = plan_check(spec, str(session.root))
            reply, _ = check(session, plan.request, dict(plan.arrays))
        except Exception:  # said in the hello
            reply = None
        answered = answered and isinstance(reply, CheckReply)
    with keras_state_kept() as kept, contextlib.suppress(Exception):
        if kept:
            warm_layers()
    return answered


def warm_layers() -> None:
    """Keras' layers that blocks use most, built and called once eagerly and once traced:
    Dense (with an activation), MultiHeadAttention, LayerNormalization, in a Sequential and
    in a layer of their own. Not through a check (each layer built there again for each of
    its runs), which would cost ten times as much for the same first-use costs."""
    import tensorflow as tf

    class Block(tf.keras.layers.Layer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.dense = tf.keras.layers.Dense(4, activation="relu")
            self.mha = tf.keras.layers.MultiHeadAttention(num_heads=2, key_dim=2)
            self.ffn = tf.keras.Sequential([tf.keras.layers.Dense(4)])
            self.norm = tf.keras.layers.LayerNormalization(epsilon=1e-6)

        def call(self, x: tf.Tensor) -> tf.Tensor:
            heads = tf.einsum("bnd,bmd->bnm", x, self.dense(x))
            return self.norm(x + self.ffn(self.mha(x, x) + tf.matmul(heads, x)))

    block = Block()
    x = tf.reshape(tf.range(12, dtype=tf.float32), (1, 3, 4)) / 12.0
    block(x).numpy()
    # Traced as Keras traces it; not converted by AutoGraph, whose file for this module would
    # stay in the worker's folder (the attention check above has warmed AutoGraph up).
    tf.function(block, autograph=False)(x).numpy()


@contextlib.contextmanager
def keras_state_kept() -> Iterator[bool]:
    """Meanwhile, a Keras global state of its own (layer name counts, seed generator, dtype
    policy); Keras' own put back after. Yields False, and changes nothing, where this Keras
    keeps its state elsewhere."""
    try:
        from keras.src.backend.common import global_state
    except ImportError:
        yield False
        return
    names = ("GLOBAL_STATE_TRACKER", "GLOBAL_SETTINGS_TRACKER")
    saved = [getattr(global_state, name, None) for name in names]
    if any(tracker is None for tracker in saved):
        yield False
        return
    import threading

    for name in names:
        setattr(global_state, name, threading.local())
    try:
        yield True
    finally:
        for name, tracker in zip(names, saved, strict=True):
            setattr(global_state, name, tracker)
