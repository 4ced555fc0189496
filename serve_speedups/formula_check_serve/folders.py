"""A folder's state, read by the kept theme file list and by :class:`.rebuild.FolderKeeper`.

Speeds up nothing itself and relies on no private part: one ``os.stat`` of the folder, whose
answer for a folder that is gone is empty rather than an error.
"""

from __future__ import annotations

import os


def folder_state(folder: str) -> tuple[int, ...]:
    """What changes when a folder's entries do: its modification time, and its change time,
    which also moves when a tool (``rsync -a``, ``tar x``) sets the modification time back;
    the inode and device, for a folder replaced by another. Empty when there is none."""
    try:
        info = os.stat(folder)
    except OSError:
        return ()
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


def folder_identity(folder: str) -> tuple[int, ...]:
    """The folder's inode and device (:func:`folder_state` without its times, which move with
    every file added); empty when it is gone."""
    return folder_state(folder)[2:]
