"""Inside the worker: load a snippet, call its entry, read weights back, time it.

Requests are concrete: the parent has already generated every array and decided every
argument, so nothing here knows about oracles. Imported only by the worker processes (the
zygote and each worker); its modules import TensorFlow at the top:

- :mod:`.warm`: the warm worker made ready (:func:`begin`), and each check's process;
- :mod:`.run`: one check (:func:`check`), in its own process;
- :mod:`.modules`: the snippet's module loaded, and the project's forgotten after;
- :mod:`.construct`: the entry built and bound to the request's arguments;
- :mod:`.weights`: the layer's weights found, moved and read back;
- :mod:`.timing`: the timing runs, and what the entry returned;
- :mod:`.reads`: what the check read and wrote in the project;
- :mod:`.failure`: what the snippet raised, as a card shows it.
"""

from __future__ import annotations

from .construct import construct
from .failure import SnippetRaised
from .modules import Session
from .run import check, run_check
from .warm import begin, describe_environment, prepare_check_process, warm_up
from .weights import read_weights

__all__ = [
    "Session",
    "SnippetRaised",
    "begin",
    "check",
    "describe_environment",
    "prepare_check_process",
    "run_check",
    "warm_up",
]

# The names tests/test_messages.py reaches for, from before this package was split.
_construct = construct
_read_weights = read_weights
