"""Export the artifacts docs/guide/production.md checks, into docs/snippets/artifacts/.

    python docs/snippets/export_artifacts.py

This is the step a project keeps in its tests or scripts: the docs build never exports, it
checks what was exported. Our own build runs it from the hook docs/hooks/export_artifacts.py,
only when this file or the model's has changed since the last export. The folder ignores
itself (its own .gitignore): exported files are never committed.

The layer itself is saved, so the SavedModel's weight paths are the layer's own (``wq.kernel``)
and one weight map serves the source, the SavedModel and the TFLite files. TFLite converts the
serving function with its weights frozen into constants (its conversion of the SavedModel keeps
Keras 3's variables as resource variables, which the interpreter leaves unset).
"""

import sys
import warnings
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from docs.snippets.production_block import TransformerBlock  # noqa: E402

OUT = ROOT / "docs" / "snippets" / "artifacts"
N, D_MODEL = 5, 8


def main():
    warnings.simplefilter("ignore")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / ".gitignore").write_text("*\n")
    keras.utils.set_random_seed(0)
    block = TransformerBlock(D_MODEL, num_heads=2, d_ff=16)
    x_spec = tf.TensorSpec([None, N, D_MODEL], tf.float32, name="x")
    mask_spec = tf.TensorSpec([None, 1, N, N], tf.float32, name="mask")
    serve = tf.function(
        lambda x, mask: {"output": block(x, mask)}, input_signature=[x_spec, mask_spec]
    )
    serve.get_concrete_function()  # builds the block
    rng = np.random.default_rng(0)
    for weight in block.weights:  # as training would: zero biases would hide a forgotten term
        value = np.asarray(weight.numpy())
        weight.assign(value + 0.1 * rng.standard_normal(value.shape).astype(value.dtype))
    tf.saved_model.save(block, str(OUT / "block"), signatures={"serving_default": serve})
    x, mask = keras.Input((N, D_MODEL), name="x"), keras.Input((1, N, N), name="mask")
    keras.Model([x, mask], block(x, mask)).save(OUT / "block.keras")
    masked = convert_variables_to_constants_v2(serve.get_concrete_function())
    (OUT / "block.tflite").write_bytes(
        tf.lite.TFLiteConverter.from_concrete_functions([masked]).convert()
    )
    unmasked = tf.function(lambda x: block(x), input_signature=[x_spec])
    frozen = convert_variables_to_constants_v2(unmasked.get_concrete_function())
    converter = tf.lite.TFLiteConverter.from_concrete_functions([frozen])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    converter.representative_dataset = lambda: (
        [rng.standard_normal((1, N, D_MODEL)).astype(np.float32)] for _ in range(64)
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    (OUT / "block_int8.tflite").write_bytes(converter.convert())


if __name__ == "__main__":
    main()
