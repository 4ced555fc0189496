"""The helpers that several layers share, each defined once: durations, the largest element,
a picture's file name and ``data:`` URI."""

from __future__ import annotations

import base64
import hashlib

import numpy as np
import pytest

from formula_check.render.picture import Figure, data_uri
from formula_check.results import format_seconds, largest_index


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(2.5, "2.50 s"), (1.0, "1.00 s"), (0.0123, "12.30 ms"), (4.2e-5, "42 µs"), (3e-9, "0 µs")],
)
def test_a_duration_in_a_log_line(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1.0, "1 s"),
        (0.002, "2 ms"),
        (1e-4, "100 µs"),
        (5e-9, "5 ns"),
        (0.001 * (1 - 1e-12), "1 ms"),  # a hair under a round tick is labelled as it
        (1234.5678, "1235 s"),
    ],
)
def test_a_duration_on_a_time_axis(seconds: float, text: str) -> None:
    assert format_seconds(seconds, tick=True) == text


def test_largest_index_is_the_first_of_equals_and_empty_for_nothing() -> None:
    values = np.array([[1.0, 5.0], [5.0, 2.0]])
    assert largest_index(values) == (0, 1)
    assert largest_index(np.zeros((0, 3))) == ()
    assert all(isinstance(i, int) for i in largest_index(values))


def test_a_figure_is_named_by_its_content_and_inlined_as_a_data_uri() -> None:
    figure = Figure("weights", "t", "a", b"<svg/>", 10, 10)
    assert figure.file_name == hashlib.sha256(b"<svg/>").hexdigest()[:20] + ".svg"
    assert figure.data_uri == "data:image/svg+xml;base64," + base64.b64encode(b"<svg/>").decode()
    assert data_uri("image/png", b"\x89PNG") == "data:image/png;base64,iVBORw=="
