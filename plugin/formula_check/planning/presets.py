"""Built-in settings for checking Keras' own layers (``preset="keras-mha"`` and friends), and
the published layers built of them (the TensorFlow tutorial's, Keras' example's).

A preset fills only what the block left unset, so an author can still override any part.
Its constructor keywords (``init``) are Keras' own: a factory of the block's, which has
parameters of its own, is given only those it takes (see :func:`init_sources`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any

from formula_check.errors import SpecError
from formula_check.model import CheckSpec

# Keras' MultiHeadAttention keeps per-head kernels: (d_model, heads, key_dim) for the query
# and key projections, (d_model, heads, value_dim) for the value's and (heads, value_dim,
# d_model) for the output. key_dim is the block's depth as written in dims= (d_model / h
# when unstated): a stated head width builds the layer it states. Keras' value_dim follows
# key_dim, as the oracle's depth_v follows depth; a block that states another depth_v says
# init="value_dim=depth_v" (without it, the value kernel's shape is an error that names
# both shapes). The engine reshapes a weight
# whose rank differs from the oracle's declared one (row-major), which is exactly
# "concatenate the heads" — the same order the paper's Concat(head_1, ..., head_h) uses.
_KERAS_MHA: Mapping[str, Any] = {
    "kind": "layer",
    "call": ("q", "v", "key=k", "attention_mask=mask", "return_attention_scores=true"),
    "mask_convention": "keep",
    "params": {"mask_dims": "b n m"},
    "weights": {
        "W_q": "query_dense.kernel",
        "b_q": "query_dense.bias",
        "W_k": "key_dense.kernel",
        "b_k": "key_dense.bias",
        "W_v": "value_dense.kernel",
        "b_v": "value_dense.bias",
        "W_o": "output_dense.kernel",
        "b_o": "output_dense.bias",
    },
    "init": {"num_heads": "h", "key_dim": "depth"},
}

_KERAS_LAYER_NORM: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {"gamma": "gamma", "beta": "beta", "epsilon": "epsilon"},
}
"""epsilon is read from the layer as a parameter, and checked against the formula's ε
(``params="epsilon=…"``, default 1e-6), never used in its place: a layer built with another
(Keras' own default is 1e-3) is a mismatch that names both."""

_KERAS_DENSE: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {"W": "kernel"},
    "init": {"units": "d_k", "use_bias": False},
}


# Published layers built of Keras' own: the composite and positional oracles' weights (named
# prefix.weight, e.g. attn.W_q) where the TensorFlow tutorial and Keras' text-classification
# example keep them. Each also reads one normalisation's epsilon, to check it against the
# formula's: the tutorial's LayerNormalization() keeps Keras' 1e-3 (params="epsilon=1e-3").


def _mha(prefix: str, path: str) -> dict[str, str]:
    """Keras' MultiHeadAttention at ``path``, as the weights ``prefix.W_q`` ... ``prefix.b_o``."""
    layers = {"q": "query_dense", "k": "key_dense", "v": "value_dense", "o": "output_dense"}
    return {
        f"{prefix}.{kind}_{part}": f"{path}.{layer}.{attribute}"
        for part, layer in layers.items()
        for kind, attribute in (("W", "kernel"), ("b", "bias"))
    }


def _norm(prefix: str, path: str) -> dict[str, str]:
    return {f"{prefix}.gamma": f"{path}.gamma", f"{prefix}.beta": f"{path}.beta"}


def _ffn(prefix: str, first: str, second: str) -> dict[str, str]:
    return {
        f"{prefix}.W_1": f"{first}.kernel",
        f"{prefix}.b_1": f"{first}.bias",
        f"{prefix}.W_2": f"{second}.kernel",
        f"{prefix}.b_2": f"{second}.bias",
    }


_TUTORIAL_LAYER_INIT = {"d_model": "d_model", "num_heads": "h", "dff": "d_ff"}
_TUTORIAL_FFN = {
    **_ffn("ffn", "ffn.seq.layers[0]", "ffn.seq.layers[1]"),
    **_norm("norm2", "ffn.layer_norm"),
}

_TUTORIAL_ATTENTION: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {
        **_mha("attn", "mha"),
        **_norm("norm", "layernorm"),
        "epsilon": "layernorm.epsilon",
    },
    "init": {"num_heads": "h", "key_dim": "depth"},
}
"""The tutorial's GlobalSelfAttention, CausalSelfAttention and CrossAttention: Keras'
MultiHeadAttention in ``mha``, an Add, a LayerNormalization in ``layernorm``; constructed
with Keras' own keywords (``key_dim=depth``: state depth=d_model as the tutorial does)."""

_TUTORIAL_ENCODER: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {
        **_mha("attn", "self_attention.mha"),
        **_norm("norm1", "self_attention.layernorm"),
        **_TUTORIAL_FFN,
        "epsilon": "self_attention.layernorm.epsilon",
    },
    "init": _TUTORIAL_LAYER_INIT,
}

_TUTORIAL_DECODER: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {
        **_mha("self_attn", "causal_self_attention.mha"),
        **_norm("norm1", "causal_self_attention.layernorm"),
        **_mha("cross_attn", "cross_attention.mha"),
        **_norm("norm2", "cross_attention.layernorm"),
        **_ffn("ffn", "ffn.seq.layers[0]", "ffn.seq.layers[1]"),
        **_norm("norm3", "ffn.layer_norm"),
        "epsilon": "causal_self_attention.layernorm.epsilon",
    },
    "init": _TUTORIAL_LAYER_INIT,
}

_TUTORIAL_POSITIONAL_EMBEDDING: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {"tokens": "embedding.embeddings"},
    "init": {"vocab_size": "vocab", "d_model": "d_model"},
    "params": {"layout": "halves"},
}
"""The tutorial's PositionalEmbedding: sines and cosines in halves, the embedding scaled."""

_EXAMPLE_BLOCK: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {
        **_mha("attn", "att"),
        **_norm("norm1", "layernorm1"),
        **_ffn("ffn", "ffn.layers[0]", "ffn.layers[1]"),
        **_norm("norm2", "layernorm2"),
        "epsilon": "layernorm1.epsilon",
    },
    "init": {"embed_dim": "d_model", "num_heads": "h", "ff_dim": "d_ff"},
}
"""Keras' text-classification example's TransformerBlock (its key_dim is embed_dim: state
depth=d_model)."""

_EXAMPLE_EMBEDDING: Mapping[str, Any] = {
    "kind": "layer",
    "weights": {"tokens": "token_emb.embeddings", "positions": "pos_emb.embeddings"},
    "init": {"maxlen": "max_len", "vocab_size": "vocab", "embed_dim": "d_model"},
}

PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "keras-mha": _KERAS_MHA,
        "keras-layer-norm": _KERAS_LAYER_NORM,
        "keras-dense": _KERAS_DENSE,
        "tf-tutorial-attention": _TUTORIAL_ATTENTION,
        "tf-tutorial-encoder-layer": _TUTORIAL_ENCODER,
        "tf-tutorial-decoder-layer": _TUTORIAL_DECODER,
        "tf-tutorial-positional-embedding": _TUTORIAL_POSITIONAL_EMBEDDING,
        "keras-example-transformer-block": _EXAMPLE_BLOCK,
        "keras-example-token-position-embedding": _EXAMPLE_EMBEDDING,
    }
)

PRESET_ORACLES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "keras-mha": ("multihead",),
        "keras-layer-norm": ("layer_norm",),
        "keras-dense": ("linear",),
        "tf-tutorial-attention": ("attention_sublayer", "cross_attention_sublayer"),
        "tf-tutorial-encoder-layer": ("encoder_layer",),
        "tf-tutorial-decoder-layer": ("decoder_layer",),
        "tf-tutorial-positional-embedding": ("sinusoidal_embedding",),
        "keras-example-transformer-block": ("encoder_layer",),
        "keras-example-token-position-embedding": ("learned_embedding",),
    }
)
"""The oracles whose formula each preset's layer computes: its weight map names their
weights, its call= passes their inputs."""


def preset_misfit(preset: str, oracle: str) -> str:
    """Why ``preset`` (``keras-mha``, or ``keras-mha@mha``) cannot serve a block of
    ``oracle``, or nothing when it can (or is not one of ours: that is said elsewhere)."""
    name = preset.partition("@")[0]
    meant = PRESET_ORACLES.get(name)
    if not meant or oracle in meant:
        return ""
    said = " or ".join(repr(o) for o in meant)
    return f"preset {name} is for blocks of oracle {said}, and this block's oracle is {oracle!r}"


UNSET: Mapping[str, Any] = {"kind": "auto", "mask_convention": "additive", "call": None}
"""A block's value for these fields that means "not given", so the preset may fill it (a block
that states it is an error: :func:`..pages.front_matter.block_options`)."""


def apply_preset(spec: CheckSpec) -> CheckSpec:
    """``spec`` with its preset's settings filled in where the block said nothing: a value
    the block states is never replaced, a map's names it states win over the preset's. A
    page's default the preset sets never reaches here (:func:`..pages.front_matter.block_options`
    leaves it out)."""
    if not spec.preset:
        return spec
    try:
        preset = PRESETS[spec.preset]
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        raise SpecError(
            f"unknown preset {spec.preset!r}; known presets: {known}", spec.location
        ) from None
    misfit = preset_misfit(spec.preset, spec.oracle)
    if misfit:
        raise SpecError(f"preset= cannot take effect: {misfit}", spec.location)
    changes: dict[str, Any] = {}
    for field, value in preset.items():
        current = getattr(spec, field)
        if isinstance(value, Mapping):
            changes[field] = MappingProxyType({**value, **current})
        elif current == UNSET[field] and field not in (spec.stated or ()):
            changes[field] = value
    return dataclasses.replace(spec, **changes)


def init_sources(spec: CheckSpec, dims: Collection[str]) -> dict[str, dict[str, str]]:
    """Where each constructor keyword of ``spec`` comes from, for the worker: ``origin`` is
    ``init`` (``init=``, the block's or the page's) or ``preset``, and ``said`` says it in
    words (``preset keras-mha; h from dims`` when its value names a dim, whose size it
    becomes; ``the page's init=`` for a page's default).

    ``spec`` is the block as written, before :func:`apply_preset`. The worker passes a
    preset's keyword only to an entry that takes it, and a construction that fails names
    the source of every keyword it was given."""
    preset = PRESETS.get(spec.preset or "", {})
    given = [(key, value, "preset") for key, value in preset.get("init", {}).items()]
    given += [(key, value, "init") for key, value in spec.init.items()]
    sources: dict[str, dict[str, str]] = {}
    for key, value, origin in given:  # the block's own init= last: it wins
        said = f"preset {spec.preset}" if origin == "preset" else "init="
        if origin == "init" and not spec.states("init"):
            said = "the page's init="
        if isinstance(value, str) and value in dims:
            said += f"; {value} from dims"
        sources[key] = {"origin": origin, "said": said}
    return sources
