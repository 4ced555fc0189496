"""Lists and tuples in ``call=``: a decoder block called with a state list it writes into
(encoder outputs, their valid lengths, a cache), as a textbook's decoder is. The words are
checked when the header is read, planned into nested arguments that travel the wire, and
built afresh for every call; a returned state list is skipped with ``_`` and named as what
it is otherwise. Keras 3 keeps ``training=`` from a ``call(**kwargs)``: the card says so."""

from __future__ import annotations

from typing import Any

import pytest

from formula_check.checking.judge import snippet_failure
from formula_check.errors import SpecError
from formula_check.messages import Argument, Call, SnippetFailed
from formula_check.model import Location, Status
from formula_check.pages import fences
from formula_check.planning.option_values import call_words, spoken_call
from formula_check.planning.plan import plan_check
from support import run, spec_for

HERE = Location("docs/page.md", 7)


# -- the words ---------------------------------------------------------------------------------


def test_brackets_are_words_of_their_own_and_read_back_as_written() -> None:
    words = call_words("x [context mask [none]] state=(a b) training=true")
    assert words == (
        "x", "[", "context", "mask", "[", "none", "]", "]",
        "state=", "(", "a", "b", ")", "training=true",
    )  # fmt: skip
    assert spoken_call(words) == "x [context mask [none]] state=(a b) training=true"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x [context mask", "'[' is never closed: add ']'"),
        ("x context]", "'x context]': ']' closes nothing"),
        ("x [context)", "'x [context)': ')' cannot close '['"),
        ("x state= y", "'state=' gives no value: write state=name or state=[...]"),
    ],
)
def test_unbalanced_or_empty_words_are_errors_at_the_blocks_line(value: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        fences.parse_options({"oracle": "attention", "call": value}, HERE)
    assert str(caught.value).startswith(f"docs/page.md:7: option call={value!r}: ")
    assert message in caught.value.message


@pytest.mark.parametrize(
    "value", ["q k v training=false training=true", "q k v state=[k] state=(v)", "q k=k v k=v"]
)
def test_a_keyword_given_twice_is_an_error_at_the_blocks_line(value: str) -> None:
    """Python refuses it; keeping the last value silently dropped the first."""
    with pytest.raises(SpecError) as caught:
        fences.parse_options({"oracle": "attention", "call": value}, HERE)
    assert str(caught.value).startswith(f"docs/page.md:7: option call={value!r}: ")
    keyword = "training" if "training" in value else "state" if "state" in value else "k"
    assert caught.value.message.endswith(f"{keyword}= is given twice; Python passes a keyword once")


def test_a_keyword_inside_a_list_and_the_same_outside_are_not_the_same_keyword() -> None:
    assert call_words("x [a=1] a=2") == ("x", "[", "a=1", "]", "a=2")


# -- planned and sent --------------------------------------------------------------------------


def test_a_state_list_is_planned_as_nested_arguments_and_survives_the_wire() -> None:
    spec = spec_for(
        "decoder_layer",
        "def f(x, state): return x",
        kind="layer",
        mask="padding",
        call=call_words("x [context mask [none]] training=true"),
    )
    call = plan_check(spec, ".", with_timing=False).request.calls.layer
    state = Argument(
        items=(
            Argument(array="in/context"),
            Argument(array="in/mask"),
            Argument(items=(Argument(value=None),)),
        )
    )
    assert call.args == (Argument(array="in/x"), state)
    assert dict(call.kwargs) == {"training": Argument(value=True)}
    assert call.arrays() == ("in/x", "in/context", "in/mask")
    assert Call.decode(call.encode()) == call
    as_tuple = Argument(items=(Argument(array="in/x"),), sequence="tuple")
    assert Argument.decode(as_tuple.encode()) == as_tuple


def test_an_input_left_out_of_the_state_list_is_still_an_error() -> None:
    spec = spec_for(
        "decoder_layer",
        "def f(x, state): return x",
        kind="layer",
        call=call_words("x [[none]]"),
    )
    with pytest.raises(SpecError) as caught:
        plan_check(spec, ".", with_timing=False)
    assert "call='x [[none]]' never passes 'context'" in caught.value.message


def test_a_positional_list_after_a_keyword_is_named_whole() -> None:
    spec = spec_for(
        "attention", "def f(q, k, v): return q", call=call_words("q k=k [v]"), kind="function"
    )
    with pytest.raises(SpecError) as caught:
        plan_check(spec, ".", with_timing=False)
    assert caught.value.message == "call: positional '[v]' after keyword arguments"


# -- a schedule written for one step ------------------------------------------------------------

SCALAR_SCHEDULE = """
import tensorflow as tf


class Schedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, d_model, warmup_steps=4000):
        self.d_model = d_model
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        if step < self.warmup_steps:
            return self.d_model ** -0.5 * step * self.warmup_steps ** -1.5
        return self.d_model ** -0.5 * tf.math.rsqrt(step)
"""
"""Correct for Keras, which calls a schedule with one step; the check passes a vector."""
SCHEDULE_OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "dims": {"d_model": 512, "warmup_steps": 4000},
    "init": {"d_model": "d_model", "warmup_steps": "warmup_steps"},
    "call": ("step",),
}
VECTOR_OF_STEPS = "The check calls the schedule once, with a vector of n steps"


@pytest.mark.parametrize(
    "said",
    [
        "The truth value of an array with more than one element is ambiguous. Use a.any() or "
        "a.all()",
        "only 0-dimensional arrays can be converted to Python scalars",
        "Using a symbolic `tf.Tensor` as a Python `bool` is not allowed",
        "Shape must be rank 0 but is rank 1 for '{{node cond/Switch}}'",
    ],
)
def test_a_schedule_using_its_step_as_one_number_is_told_it_gets_a_vector(said: str) -> None:
    planned = plan_check(
        spec_for("transformer_lr_schedule", SCALAR_SCHEDULE, **SCHEDULE_OPTIONS), "."
    )
    failure = snippet_failure(planned, SnippetFailed("ValueError", said, "call", line=11), ".")
    assert failure.message.startswith(f"{said}. {VECTOR_OF_STEPS} (Keras calls it with one ")
    assert "tf.math.rsqrt" in failure.message


def test_another_failure_of_a_schedule_or_a_vector_failure_elsewhere_gets_no_hint() -> None:
    planned = plan_check(
        spec_for("transformer_lr_schedule", SCALAR_SCHEDULE, **SCHEDULE_OPTIONS), "."
    )
    other = snippet_failure(planned, SnippetFailed("NameError", "name 'w' is not defined"), ".")
    assert other.message == "name 'w' is not defined"
    ffn = plan_check(spec_for("ffn", "def f(x, w1, b1, w2, b2): return x"), ".")
    said = "The truth value of an array with more than one element is ambiguous."
    assert snippet_failure(ffn, SnippetFailed("ValueError", said), ".").message == said


@pytest.mark.tf
def test_a_schedule_written_for_one_step_is_told_it_gets_a_vector() -> None:
    result = run("transformer_lr_schedule", SCALAR_SCHEDULE, **SCHEDULE_OPTIONS)
    assert result.status is Status.ERROR
    assert VECTOR_OF_STEPS in result.headline(), result.headline()


# -- through the engine (TensorFlow) -----------------------------------------------------------

# A layer that reads its keys and values out of a state list and writes its cache back into
# it, the way a decoder keeps what it has seen. Its output depends on the list as it finds
# it: a list reused from an earlier call (the weights are moved and the layer called again,
# and timed) would hold a cache and change the answer.
CACHING = """
import tensorflow as tf


class CachingAttention(tf.keras.layers.Layer):
    def call(self, q, state, training=None):
        keys_values, cache = state
        k, v = keys_values
        if cache:
            k = tf.concat([cache[-1], k], axis=1)
            v = tf.concat([cache[-1], v], axis=1)
        cache.append(k)
        scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(q)[-1], q.dtype))
        return tf.matmul(tf.nn.softmax(scores, axis=-1), v), state
"""


@pytest.mark.tf
def test_a_state_list_written_into_starts_afresh_on_every_call() -> None:
    result = run(
        "attention",
        CACHING,
        kind="layer",
        call=call_words("q [(k v) []]"),
        returns=("output", "_"),
        timing=True,
    )
    assert result.status is Status.VERIFIED, result.headline()


@pytest.mark.tf
def test_a_returned_state_list_named_as_an_output_says_what_it_is() -> None:
    result = run(
        "attention",
        CACHING,
        kind="layer",
        call=call_words("q [(k v) []]"),
        returns=("output", "weights"),
    )
    assert result.status is Status.ERROR
    assert "the code returned a list as value 2 (weights), not a tensor" in result.headline()


@pytest.mark.tf
def test_a_state_list_that_keeps_the_wrong_tensor_is_caught() -> None:
    drifted = CACHING.replace("k, v = keys_values", "v, k = keys_values")
    result = run(
        "attention",
        drifted,
        kind="layer",
        call=call_words("q [(k v) []]"),
        returns=("output", "_"),
        dims={"d_k": 4, "d_v": 4},
    )
    assert result.status is Status.MISMATCH, result.headline()


# Keras 3 passes ``training`` on to a ``call`` that names it, and to no ``**kwargs``.
READS_TRAINING = """
import tensorflow as tf


class Scaled(tf.keras.layers.Layer):
    def call(self, q, k, v, **kwargs):
        if not kwargs.get("training"):
            q = q * 2.0
        scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(q)[-1], q.dtype))
        return tf.matmul(tf.nn.softmax(scores, axis=-1), v)
"""


@pytest.mark.tf
def test_training_kept_from_a_kwargs_call_is_the_reason_given_for_the_mismatch() -> None:
    result = run("attention", READS_TRAINING, kind="layer", call=call_words("q k v training=true"))
    assert result.status is Status.MISMATCH
    assert "training= never reached Scaled.call(), which takes it only through **kwargs" in (
        result.headline()
    )
    named = READS_TRAINING.replace("v, **kwargs", "v, training=None").replace(
        'kwargs.get("training")', "training"
    )
    verified = run("attention", named, kind="layer", call=call_words("q k v training=true"))
    assert verified.status is Status.VERIFIED, verified.headline()
    assert not any("never reached" in note for note in verified.notes)
