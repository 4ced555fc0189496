"""A SavedModel's signature and a ``.keras`` model, loaded and called as :class:`..runtime.Loaded`.

A SavedModel's signature is read before it is called: the dtype it computes in is what its
graph says (:mod:`.float16_outputs`), not its outputs' alone. A ``.keras`` model computes in
its dtype policy's compute dtype; the modules its own classes come from are imported first.
"""

from __future__ import annotations

import importlib
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf

from formula_check.execution import float16_outputs
from formula_check.execution.artifact_calls import ArtifactError, Loaded, array, named
from formula_check.execution.artifact_weights import public_names
from formula_check.messages import Call
from formula_check.model import Array


class SavedModel(Loaded):
    """One signature of a loaded SavedModel, called with its inputs by name."""

    def __init__(self, loaded: Any, signature: str) -> None:
        signatures = dict(getattr(loaded, "signatures", {}))
        if signature not in signatures:
            raise ArtifactError(
                f"the SavedModel has no signature {signature!r}; it has "
                f"{', '.join(sorted(signatures)) or 'none'}"
            )
        self.loaded = loaded
        self.function = signatures[signature]
        self.specs = dict(self.function.structured_input_signature[1])
        self.what = f"signature {signature!r}"
        self.float16_use = float16_outputs.saved_model_use(self.function.graph.as_graph_def())
        kinds = {spec.dtype.name for spec in self.function.structured_outputs.values()}
        self.dtype = "float16" if self.float16_use else "float32"
        self.float16_outputs = not self.float16_use and "float16" in kinds

    def call(self, call: Call, arrays: Mapping[str, Array], prefix: str) -> Any:
        given = {
            name: tf.constant(array(arg, arrays, prefix), dtype=self.specs[name].dtype)
            for name, arg in named(call, sorted(self.specs), self.what).items()
        }
        return dict(self.function(**given))

    def weights_object(self, root: Path, described: Mapping[str, str]) -> Any:
        public_names(self.loaded)
        return self.loaded


class KerasModel(Loaded):
    """A ``.keras`` model: a layer again, called on its inputs in order."""

    def __init__(self, path: Path) -> None:
        import_custom_classes(path)
        self.model = tf.keras.models.load_model(path, compile=False)
        self.names = [str(getattr(t, "name", "")).split(":")[0] for t in self.model.inputs or ()]
        policy = getattr(self.model, "dtype_policy", None)
        self.dtype = str(getattr(policy, "compute_dtype", "float32"))

    def call(self, call: Call, arrays: Mapping[str, Array], prefix: str) -> Any:
        by_name = named(call, self.names, "the Keras model")
        given = [tf.constant(array(by_name[name], arrays, prefix)) for name in self.names]
        return self.model(given if len(given) > 1 else given[0], training=False)

    def weights_object(self, root: Path, described: Mapping[str, str]) -> Any:
        return self.model


def import_custom_classes(path: Path) -> None:
    """Import the modules a ``.keras`` file names for its own classes (its layers saved with
    ``register_keras_serializable``), as ``import`` finds them from the project: Keras finds
    a registered class only once its module has run."""
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
    modules: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            module = node.get("module")
            if (
                isinstance(module, str)
                and node.get("class_name")
                and module.split(".")[0] not in ("keras", "builtins")
            ):
                modules.add(module)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(config)
    for module in sorted(modules):
        importlib.import_module(module)
