"""The only part of the package that runs TensorFlow: the worker processes, and the build's
end of them. The messages they exchange are typed in the core (:mod:`..messages`,
:mod:`..messages.replies`, framed by :mod:`..wire`).

In the build process (the engine calls :mod:`.pool` only):

- :mod:`.pool`: N workers lent to one request at a time (:mod:`.idle` hands them out);
- :mod:`.process`: one worker process (start, ask, time out, kill), with its
  :mod:`.stderr_log`, :mod:`.memory` watch and :mod:`.outcome` (the reply the pool gives);
- :mod:`.zygote_client`, :mod:`.kept_client`: the parent's end of the zygote, one per run or
  kept alive between runs (:mod:`.kept_socket`: where it listens, how it is stopped);
  :mod:`.forked`: a worker the zygote forked; :mod:`.control`: their line protocol;
- :mod:`.environment`: the variables a worker may see (the one module faces read).

In the check processes:

- :mod:`.zygote` (imports TensorFlow, forks workers: :mod:`.zygote_server`, and kept alive
  :mod:`.kept_server`), :mod:`.child` (a worker's loop);
- :mod:`.isolation`: one process per check; :mod:`.confinement`: what it may still reach
  (Landlock); :mod:`.reaping`: what a check leaves, ended;
  :mod:`.read_buffer`: the buffer the warm worker reads messages into, which no check inherits;
- :mod:`.execution`: the warm worker made ready (its warm-up: :mod:`.warming`);
  :mod:`.one_check` runs a check with
  :mod:`.snippet_module`, :mod:`.entry_call`, :mod:`.layer_weights` (a layer called again on
  moved weights: :mod:`.moved_weights`), :mod:`.graph_mode` (the
  code traced under ``tf.function`` and called as a graph, to be judged), :mod:`.timing_runs`,
  :mod:`.project_reads` (what it read and wrote; outside the project :mod:`.outside_reads`,
  TensorFlow's own reads :mod:`.native_reads`) and :mod:`.snippet_failure`;
  :mod:`.faults`: the checker's own failures, said as such;
- :mod:`.artifacts`: an exported artifact checked in place of code (``code=`` naming a
  SavedModel, a ``.keras`` model or a TFLite file): :mod:`.artifact_calls` (calling one,
  its errors), :mod:`.artifact_formats` (SavedModel, ``.keras``), :mod:`.artifact_tflite`
  (TensorFlow's interpreter), :mod:`.artifact_weights` (a SavedModel's weights by path),
  :mod:`.float16_outputs` (float16 outputs of a float32 graph told from float16 arithmetic,
  and their rounding); for an int8 model :mod:`.quantized_error` (what quantization explains
  of its outputs), walking :mod:`.quantized_graph` (the interpreter's ops and tensors, each
  op's options) with :mod:`.quantized_ops` (each op's float definition).

In a process of its own, without TensorFlow: :mod:`.oracle_server`, where an oracle of one's
own (the ``oracles`` option) is imported and each of its calls answered (the build's end:
:mod:`..oracles.own_process`).
"""
