"""While a check is judged, NumPy's BLAS runs on one thread, whichever of the engine's
threads judges it: each may be the first in or the last out, and threadpoolctl (3.8 on)
lets only one thread set a pthreads OpenBLAS's pool size unless it is taken over."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from threadpoolctl import ThreadpoolController, threadpool_info

from formula_check.session.engine import ONE_BLAS_THREAD, _take_blas_control


def _blas_threads() -> list[int]:
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def _in_thread(action: object) -> list[int]:
    seen: list[int] = []

    def judge() -> None:
        with ONE_BLAS_THREAD.held():
            seen.extend(_blas_threads())
            if callable(action):
                action()

    thread = threading.Thread(target=judge)
    thread.start()
    thread.join()
    return seen


@pytest.fixture
def two_blas_threads() -> Iterator[None]:
    """BLAS on two threads (whatever the machine's cores), restored after the test."""
    if not _blas_threads():
        pytest.skip("NumPy's BLAS is not one threadpoolctl knows")
    limiter = ThreadpoolController().limit(limits=2, user_api="blas")
    try:
        yield
    finally:
        _take_blas_control()  # the judging threads took it
        limiter.restore_original_limits()


def test_every_judging_thread_judges_on_one_blas_thread(two_blas_threads: None) -> None:
    before = _blas_threads()
    assert before and all(count == 2 for count in before)
    # the first thread to judge, then others that come in alone: each is limited, and BLAS
    # is back as it was between them
    for _ in range(3):
        assert _in_thread(None) == [1] * len(before)
        assert _blas_threads() == before


def test_overlapping_judges_keep_one_thread_until_the_last_is_out(
    two_blas_threads: None,
) -> None:
    before = _blas_threads()
    inside = threading.Event()
    leave = threading.Event()
    first_saw: list[int] = []

    def first() -> None:
        with ONE_BLAS_THREAD.held():
            first_saw.extend(_blas_threads())
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(10)
    # a second thread comes in while the first judges, and leaves first: still one
    assert _in_thread(None) == [1] * len(before)
    assert _blas_threads() == [1] * len(before)
    leave.set()
    thread.join()
    assert first_saw == [1] * len(before)
    assert _blas_threads() == before  # the last out restored it, whichever thread it was
