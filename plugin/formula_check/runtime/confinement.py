"""What a check's process may still reach once it is confined (Linux's Landlock).

A check's process confines itself right after its fork, before it starts a thread (a
Landlock domain holds for the thread that makes it and for every thread and process made
after), with :func:`confine`:

- it may write, create, rename and remove files only inside its own temporary folder, and
  open the few devices that Python and TensorFlow write to (:data:`WRITABLE_DEVICES`);
- it may not signal, nor connect to an abstract Unix socket of, any process outside its
  domain (ABI 6): it cannot kill the warm worker, the zygote or the build, so the subreapers
  above it (:mod:`.reaping`) live to end whatever it started;
- it may read anything but the ``/proc`` entries of other processes (their ``environ``,
  ``cmdline``, ``maps``, descriptors...): ``/proc`` is readable only in its own entry and in
  the entries that are no process's (``/proc/cpuinfo``, ``/proc/sys``...). A process it
  starts can therefore not read its own entry either. Nor can it read a file under the
  folders its request withholds (``unreadable``: the cache), whose ancestors are granted
  entry by entry and may be listed;
- it may not trace a process outside its domain, nor open such a process's ``/proc/<pid>/mem``
  (Landlock refuses those to every domain, root's included, which ``PR_SET_DUMPABLE`` alone
  does not).

The folder ``/`` itself cannot be listed (its entries are granted one by one). Where the
kernel lacks Landlock (before 5.13, switched off, or hidden by a seccomp filter),
:func:`confine` does nothing, and the check runs with the user's rights; where it offers
Landlock and refuses the ruleset, :func:`confine` raises, and the check runs no code
(:mod:`.isolation`).

The ruleset is described (:func:`ruleset_for`) apart from the system calls that apply it,
so that what it allows can be told without a kernel that has it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
"""``landlock_create_ruleset``, ``landlock_add_rule``, ``landlock_restrict_self``: the same
numbers on both, from the generic table."""
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights, by the ABI version that introduced them (linux/landlock.h).
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_HANDLED_BY_ABI = (
    (1, READ_FILE | READ_DIR | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR),
    (1, MAKE_REG | MAKE_SOCK),
    (1, MAKE_FIFO | MAKE_BLOCK | MAKE_SYM),
    (2, REFER),
    (3, TRUNCATE),
)
_FILE_RIGHTS = READ_FILE | WRITE_FILE | TRUNCATE
"""The handled rights a rule on a file (not a folder) may grant."""
_READS = READ_FILE | READ_DIR

WRITABLE_DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
)
"""Devices a check may open for writing, with every ``/dev/nvidiaN``: the sinks Python and
its libraries write to, and what CUDA opens. Not ``/dev/shm``: a file there would outlive
the check and be seen by the next."""


@dataclass(frozen=True)
class Ruleset:
    """What a confined check may do: the rights Landlock handles (all refused but where a
    rule grants them), each path's granted rights, and the scopes (ABI 6)."""

    abi: int
    handled: int
    rules: tuple[tuple[str, int], ...]
    scoped: int


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 where it offers none."""
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(numbers[0], None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def ruleset_for(
    folder: str,
    abi: int,
    pid: int,
    listing: Listing | None = None,
    unreadable: tuple[str, ...] = (),
) -> Ruleset:
    """The ruleset confining the check whose process is ``pid`` and whose temporary folder
    is ``folder``, for ``abi``, reading no file under the ``unreadable`` folders (absolute
    and resolved). ``listing`` gives a folder's entries and tells a folder from a file (by
    default, this machine's)."""
    handled = 0
    for since, rights in _HANDLED_BY_ABI:
        if abi >= since:
            handled |= rights
    files = handled & _FILE_RIGHTS
    listing = listing or _listing
    rules: list[tuple[str, int]] = [(folder, handled)]
    hidden = frozenset(os.path.realpath(path) for path in unreadable)
    withheld = Withheld(hidden, str(pid), files)
    rules += _readable("/", listing, withheld)
    devices = [f"/dev/{name}" for name, _ in listing("/dev") if _writable_device(name)]
    rules += [(device, files & (WRITE_FILE | TRUNCATE)) for device in devices]
    scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0
    return Ruleset(abi, handled, tuple(rules), scoped)


Listing = Callable[[str], list[tuple[str, bool]]]
"""A folder's entries: each name, and whether it is a folder."""


@dataclass(frozen=True)
class Withheld:
    """What a check may not read below ``/``: the ``/proc`` entries of processes but its own
    (``pid``), and the files under the ``unreadable`` folders; ``files``: the read rights a
    rule on a file may hold."""

    unreadable: frozenset[str]
    pid: str
    files: int

    def below(self, path: str) -> bool:
        """Whether something withheld lies below ``path``: it is granted entry by entry."""
        return path == "/proc" or any(f.startswith(path + "/") for f in self.unreadable)


def _readable(parent: str, listing: Listing, withheld: Withheld) -> list[tuple[str, int]]:
    """Read rights on each entry of ``parent`` but those ``withheld``; an entry above one is
    granted entry by entry instead, and may itself be listed (its files' names are read, not
    their contents), but ``/`` and ``/proc``."""
    rules = []
    in_proc = parent == "/proc"
    for name, is_folder in listing(parent):
        path = f"{parent.rstrip('/')}/{name}"
        real = path if in_proc else os.path.realpath(path)  # a rule holds where a link leads
        if real in withheld.unreadable or (in_proc and name.isdigit() and name != withheld.pid):
            continue
        if is_folder and withheld.below(real):
            rules += [(path, READ_DIR)] if path != "/proc" else []
            rules += _readable(path, listing, withheld)
            continue
        rules.append((path, _READS if is_folder else withheld.files & _READS))
    return rules


def granted_by_entry(unreadable: tuple[str, ...]) -> tuple[int, ...]:
    """When the folders above the ``unreadable`` ones last gained or lost an entry: their
    entries are granted one by one as a check's process is confined, so one made after that
    is not readable in it, and a process confined before such a change is forked again."""
    stamps = []
    for path in sorted({os.path.realpath(p) for p in unreadable}):
        for above in Path(path).parents:
            with contextlib.suppress(OSError):
                stamps.append(os.stat(above).st_mtime_ns)
    return tuple(stamps)


def _writable_device(name: str) -> bool:
    return f"/dev/{name}" in WRITABLE_DEVICES or (name.startswith("nvidia") and name[6:].isdigit())


def _listing(folder: str) -> list[tuple[str, bool]]:
    """The entries of ``folder`` that can be opened (a dangling link cannot)."""
    found = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                found.append((entry.name, entry.is_dir()))
    return sorted(found)


def confine(folder: str, unreadable: tuple[str, ...] = ()) -> str:
    """Confine this process, and all it starts, to :func:`ruleset_for` ``folder`` and
    ``unreadable``; call before any thread starts. Returns what confines it, in words
    (``""`` where nothing does: no Landlock here). Raises :class:`OSError` where the kernel
    offers it and refuses."""
    abi = abi_version()
    if abi == 0:
        return ""
    ruleset = ruleset_for(folder, abi, os.getpid(), unreadable=unreadable)
    libc = ctypes.CDLL(None, use_errno=True)
    create, add_rule, restrict = _SYSCALLS[platform.machine()]
    attr = _RulesetAttr(ruleset.handled, 0, ruleset.scoped)
    size = ctypes.sizeof(_RulesetAttr) if ruleset.scoped else _RULESET_ATTR_V1_SIZE
    fd = _checked(libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), 0))
    try:
        for path, rights in ruleset.rules:
            with _opened(path) as parent:
                if parent < 0:  # gone since it was listed
                    continue
                beneath = _PathBeneathAttr(rights, parent)
                _checked(libc.syscall(add_rule, fd, _RULE_PATH_BENEATH, ctypes.byref(beneath), 0))
        _checked(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        _checked(libc.syscall(restrict, fd, 0))
    finally:
        os.close(fd)
    return f"Landlock ABI {abi}"


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


_RULESET_ATTR_V1_SIZE = 8
"""Only ``handled_access_fs``: what a kernel before ABI 4 accepts."""


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header
    _fields_ = (
        ("allowed_access", ctypes.c_uint64),
        ("parent_fd", ctypes.c_int32),
    )


def _checked(result: int) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


@contextlib.contextmanager
def _opened(path: str) -> Iterator[int]:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        yield -1
        return
    try:
        yield fd
    finally:
        os.close(fd)
