"""An oracle defined outside the builtin catalog: RMS normalisation.

``mkdocs.yml`` registers it with ``oracles: ["docs.snippets.rms_norm_oracle:rms_norm"]``.
"""

import numpy as np

from formula_check.oracles import Oracle, TensorSpec


def _rms_norm(arrays, params):
    x, gain = arrays["x"], arrays["gain"]
    mean_square = np.mean(np.square(x), axis=-1, keepdims=True)
    return {"output": gain * x / np.sqrt(mean_square + params["epsilon"])}


rms_norm = Oracle(
    name="rms_norm",
    title="RMS normalisation",
    summary="Divides each position by the root mean square of its features, then scales.",
    latex=r"\text{RMSNorm}(x) = \frac{x}{\sqrt{\frac{1}{d}\sum_{i=1}^{d} x_i^2 + \epsilon}}"
    r" \odot g",
    compute=_rms_norm,
    inputs=(TensorSpec("x", ("b", "n", "d_model"), "activations"),),
    weights=(TensorSpec("gain", ("d_model",), "per-feature gain", optional=True, default=1.0),),
    outputs=(TensorSpec("output", ("b", "n", "d_model")),),
    dims={"b": 2, "n": 3, "d_model": 8},
    params={"epsilon": 1e-6},
)
