"""A team's own oracle, registered through ``load_oracle("team_oracles:rms_norm")``."""

import numpy as np

from formula_check.oracles import Oracle, TensorSpec


def _rms_norm(arrays, params):
    x, gain = arrays["x"], arrays["gain"]
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + params["epsilon"])
    return {"output": gain * x / rms}


rms_norm = Oracle(
    name="rms_norm",
    title="RMSNorm",
    latex=r"\mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\frac{1}{d}\sum_i x_i^2 + \epsilon}} \odot g",
    compute=_rms_norm,
    inputs=(TensorSpec("x", ("b", "n", "d_model")),),
    weights=(TensorSpec("gain", ("d_model",), optional=True, default=1.0),),
    outputs=(TensorSpec("output", ("b", "n", "d_model")),),
    dims={"b": 2, "n": 3, "d_model": 8},
    params={"epsilon": 1e-6},
    summary="Root-mean-square normalisation, as in T5 and LLaMA.",
)
