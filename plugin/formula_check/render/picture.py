"""What a drawn picture is, and the two ways a page may refer to one: by content or inline."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

_SUFFIXES = {"image/svg+xml": ".svg", "image/png": ".png"}

SMALLEST_TEXT = 11.0
"""The smallest text any figure draws (its tick labels), in the figure's own pixels: a card
lets the page shrink a figure only as far as this stays readable."""


def data_uri(media_type: str, data: bytes) -> str:
    """``data`` as a base64 ``data:`` URI: a picture inlined in a page or in another picture."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


@dataclass(frozen=True)
class Figure:
    """One rendered picture: ``name`` is stable (file names), ``title`` and ``alt`` localized.

    ``data`` is the whole file; ``width`` and ``height`` are its size in CSS pixels (for an
    SVG, its ``width`` and ``height`` attributes).
    """

    name: str
    title: str
    alt: str
    data: bytes
    width: int
    height: int
    media_type: str = "image/svg+xml"

    def __post_init__(self) -> None:
        if self.media_type not in _SUFFIXES:
            raise ValueError(f"unsupported figure media type {self.media_type!r}")

    @property
    def suffix(self) -> str:
        """The file extension for :attr:`media_type`: ``.svg`` or ``.png``."""
        return _SUFFIXES[self.media_type]

    @property
    def file_name(self) -> str:
        """A content-addressed file name: the same picture always gets the same name."""
        return hashlib.sha256(self.data).hexdigest()[:20] + self.suffix

    @property
    def data_uri(self) -> str:
        """The whole file as a base64 ``data:`` URI."""
        return data_uri(self.media_type, self.data)
