"""Reads TensorFlow makes in C++, told to Python's audit hook as the reads they are.

``tf.io.gfile`` (and whatever reads through it: ``GFile``, ``listdir``, ``glob``, ``walk``)
opens and lists files in C++, where Python raises no audit event: each call is told to the
hook as the ``open`` or the ``os.listdir`` it amounts to, so that the cache keys a result on
those files and folders as on any other (:mod:`.project_reads`). What TensorFlow's ops read
when they run (``tf.io.read_file``, the ``tf.data`` file datasets, ``list_files``) and what
its file system reads from a URL (``gs://``, ``s3://``) cannot be followed from here: each
is told as a read no key follows (:data:`.outside_reads.UNSEEN_EVENT`), so its result is
never cached.

Only audit events are added: what each call does and returns is TensorFlow's own.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops, readers
from tensorflow.python.lib.io import file_io
from tensorflow.python.ops import io_ops

from formula_check.execution.outside_reads import UNSEEN_EVENT

_OPS = "it read files with a TensorFlow op (tf.io.read_file, tf.data)"
_URL = "it read a URL through TensorFlow's file system"
_GLOB = "it matched a pattern with wildcards in its folders through TensorFlow's glob"
_watched = False


def watch() -> None:
    """Tell the audit hook of TensorFlow's reads from now on, in this process (once)."""
    global _watched  # noqa: PLW0603  (this process's own, set once)
    if _watched:
        return
    _watched = True
    native = file_io._pywrap_file_io  # what every gfile read goes through
    _wrap(native, "BufferedInputStream", _opened)
    _wrap(native, "GetChildren", _listed)
    _wrap(native, "GetMatchingFiles", _matched)
    for dataset in (
        readers.TextLineDatasetV2,
        readers.TFRecordDatasetV2,
        readers.FixedLengthRecordDatasetV2,
    ):
        _wrap(dataset, "__init__", _unseen(_OPS))
    _wrap(dataset_ops.DatasetV2, "list_files", _unseen(_OPS), static=True)
    read_file = _told(io_ops.read_file, _unseen(_OPS))
    io_ops.read_file = read_file
    tf.io.read_file = read_file


def _wrap(owner: Any, name: str, tell: Callable[..., None], *, static: bool = False) -> None:
    told = _told(getattr(owner, name), tell)
    setattr(owner, name, staticmethod(told) if static else told)


def _told(original: Callable[..., Any], tell: Callable[..., None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def told(*args: Any, **kwargs: Any) -> Any:
        tell(*args, **kwargs)
        return original(*args, **kwargs)

    return told


def _unseen(why: str) -> Callable[..., None]:
    def tell(*_: Any, **__: Any) -> None:
        sys.audit(UNSEEN_EVENT, why)

    return tell


def _path(name: Any) -> str | None:
    """``name`` as a local path; None (and said) for a URL."""
    path = os.fsdecode(name) if isinstance(name, bytes | str) else None
    if path is not None and "://" in path and not path.startswith("file://"):
        sys.audit(UNSEEN_EVENT, _URL)
        return None
    return path.removeprefix("file://") if path is not None else None


def _opened(name: Any, *_: Any) -> None:
    path = _path(name)
    if path is not None:
        sys.audit("open", path, "r", 0)


def _listed(name: Any, *_: Any) -> None:
    path = _path(name)
    if path is not None:
        sys.audit("os.listdir", path)


def _matched(pattern: Any, *_: Any) -> None:
    """A glob lists the folder of its last part; one with wildcards above is not followed."""
    path = _path(pattern)
    if path is None:
        return
    folder = os.path.dirname(path) or "."
    if any(mark in folder for mark in "*?["):
        sys.audit(UNSEEN_EVENT, _GLOB)
    else:
        sys.audit("os.listdir", folder)
