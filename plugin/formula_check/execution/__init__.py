"""What a check's process runs, once the runtime has forked and confined it; imported only
there and by the warm worker, which it makes import TensorFlow. Requests are concrete: the
build has generated every array and decided every argument, so nothing here knows oracles.

- :mod:`.one_check` runs a check with :mod:`.snippet_module` (the snippet's module loaded,
  the project's forgotten after), :mod:`.entry_call` (the entry built and bound to its
  arguments), :mod:`.builder` (a Keras functional builder), :mod:`.layer_weights` (weights
  read and moved; a layer called again on moved weights: :mod:`.moved_weights`),
  :mod:`.graph_mode` (the code traced under ``tf.function`` and called as a graph, to be
  judged), :mod:`.timing_runs`, :mod:`.project_reads` (what it read and wrote; outside the
  project :mod:`.outside_reads`, TensorFlow's own reads :mod:`.native_reads`) and
  :mod:`.snippet_failure` (what it raised, its traceback shown with :mod:`..paths`);
- :mod:`.warming`: the warm worker's warm-up, a few small checks of our own;
- :mod:`.artifacts`: an exported artifact checked in place of code (``code=`` naming a
  SavedModel, a ``.keras`` model or a TFLite file): :mod:`.artifact_calls` (calling one, its
  errors), :mod:`.artifact_formats` (SavedModel, ``.keras``), :mod:`.artifact_tflite`
  (TensorFlow's interpreter), :mod:`.artifact_weights` (a SavedModel's weights by path),
  :mod:`.float16_outputs` (float16 outputs of a float32 graph told from float16 arithmetic,
  and their rounding); for an int8 model :mod:`.quantized_error` (what quantization explains
  of its outputs), walking :mod:`.quantized_graph` (the interpreter's ops and tensors, each
  op's options) with :mod:`.quantized_ops` (each op's float definition).
"""
