r"""Index notation over named axes: ``x_i``, ``W_{ij}``, ``\sum_j``, ``\max_j``, ``y_i = …``.

An index is an axis of its own (``#i``), so values broadcast by index as ``einsum`` does:
``x_i`` renames x's last axis to ``#i`` (the last axes first: ``W_{ij}`` is row ``i``,
column ``j``), a sum over ``j`` reduces axis ``#j``, and ``y_i = …`` gives ``#i`` back the
dim it ranged over. An index ranges over the dim it is first used with, or that its sum's
upper limit names; using it over another dim is an error. An upper limit that names nothing
declared (the ``d`` of ``\sum_{i=1}^{d}``) is that dim's size for the whole formula.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from formula_check.latex.errors import NotExecutable
from formula_check.latex.ir import Op, Reduce, Relabel, Size
from formula_check.latex.limits import children
from formula_check.latex.nodes import BigOp, Binary, Expr, Num, Tuple, Word
from formula_check.latex.scope import Binding, Lowering
from formula_check.latex.shapes import Type, base, fresh, index_axis, is_index_axis

ALIAS = "@"
"""The prefix of a size named by an upper limit alone (``@d``); no declared dim has it."""


def index_letters(sub: Expr, taken: Collection[str]) -> tuple[Word, ...] | None:
    """``x_i``, ``x_{ij}``, ``x_{i,j}``: one index per letter, or None when ``sub`` is not
    made of fresh italic letters (``W_1``, ``d_{model}``, ``PE_{(pos, 2i)}``)."""
    words = sub.items if isinstance(sub, Tuple) else (sub,)
    letters: list[Word] = []
    for word in words:
        if not isinstance(word, Word) or word.upright or not word.text.isascii():
            return None
        if not word.text.isalpha() or (isinstance(sub, Tuple) and len(word.text) > 1):
            return None
        letters += [Word(char, word.col + at) for at, char in enumerate(word.text)]
    return None if any(letter.text in taken for letter in letters) else tuple(letters)


def alias_names(roots: Iterator[Expr], taken: Collection[str]) -> frozenset[str]:
    r"""The upper limits that name nothing declared: ``d`` in ``\sum_{i=1}^{d}``."""
    found: set[str] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if isinstance(node, BigOp):
            top = _top(node)
            if isinstance(top, Word) and not top.upright and top.text not in taken:
                found.add(top.text)
        stack.extend(children(node))
    return frozenset(found)


def _top(node: BigOp) -> Expr | None:
    """The dim's size in the upper limit: ``m`` of ``^{m}``, or of ``_{j=0}^{m-1}``."""
    upper = node.upper
    counts_from_zero = isinstance(node.lower, Num) and node.lower.value == 0
    if counts_from_zero and isinstance(upper, Binary) and upper.op == "-":
        right = upper.right
        return upper.left if isinstance(right, Num) and right.value == 1 else upper
    return upper


def _written(letters: tuple[Word, ...]) -> str:
    return "".join(letter.text for letter in letters)


def _bind(lowerer: Lowering, letter: Word, dim: str) -> None:
    binding = lowerer.bindings.get(letter.text, letter.col)
    if binding.dim is None:
        binding.dim, binding.col = dim, letter.col
    elif base(binding.dim) != base(dim):
        where = "its sum's upper limit" if binding.limit else f"column {binding.col + 1}"
        message = f"index {letter.text} ranges over {dim} here but over {binding.dim} at {where}"
        raise lowerer.fail(message, letter.col)


def element(lowerer: Lowering, value: Op, letters: tuple[Word, ...], col: int) -> Op:
    """``value_{ij}``: its last dims become the axes of ``i`` and ``j``, in that order."""
    seen: set[str] = set()
    for letter in letters:
        if letter.text in seen or index_axis(letter.text) in value.type.dims:
            raise lowerer.fail(f"index {letter.text} indexes this value twice", letter.col)
        seen.add(letter.text)
    plain = [d for d in value.type.dims if not is_index_axis(d)]
    if len(letters) > len(plain):
        count = f"{len(letters)} indices"
        raise lowerer.fail(f"{count} for a {value.type}: it has {len(plain)} dims to index", col)
    renames: dict[str, str] = {}
    for letter, dim in zip(letters, plain[len(plain) - len(letters) :], strict=True):
        _bind(lowerer, letter, dim)
        renames[dim] = index_axis(letter.text)
    dims = tuple(renames.get(d, d) for d in value.type.dims)
    return Relabel(value, tuple(_written(letters)), dims, Type(dims, 0), element=True)


def reduction(lowerer: Lowering, node: BigOp) -> Op:
    r"""``\sum_j body``: the body with the axis of ``j`` summed away (or multiplied, or its
    largest or smallest kept); a ``j`` the body does not use repeats it ``m`` times, which
    needs the limit ``\sum_{j=1}^{m}`` to say how many."""
    limit = _limit(lowerer, node)
    if limit is not None and len(node.indices) > 1:
        raise lowerer.fail(f"\\{node.op} over several indices takes no limits", node.col)
    expected = None if limit is None else lowerer.scope.aliases.get(limit.dim, limit.dim)
    expected = None if expected is None or expected.startswith(ALIAS) else expected
    pushed: list[Binding] = []
    for letter in node.indices:
        if letter.text in lowerer.taken():
            raise lowerer.fail(f"{letter.text} is a declared name, not a free index", letter.col)
        if sum(w.text == letter.text for w in node.indices) > 1:
            raise lowerer.fail(f"\\{node.op} over {letter.text} twice", letter.col)
        pushed.append(Binding(expected, node.col, limit=expected is not None))
        lowerer.bindings.bound.setdefault(letter.text, []).append(pushed[-1])
    try:
        body = lowerer.lower(node.body)
    finally:
        for letter in node.indices:
            lowerer.bindings.bound[letter.text].pop()
    for letter, binding in reversed(list(zip(node.indices, pushed, strict=True))):
        body = _reduce_one(lowerer, node, letter, binding, body, limit)
    return body


def _limit(lowerer: Lowering, node: BigOp) -> Size | None:
    """The size the limits name, or None for none (the whole dim the index ranges over)."""
    if node.lower is None and node.upper is None:
        return None
    top = _top(node)
    from_one = isinstance(node.lower, Num) and node.lower.value == 1
    if node.lower is not None and not from_one and top is node.upper:
        raise NotExecutable(
            f"\\{node.op} over part of a dim (limits other than 1 .. m or 0 .. m-1) is "
            "outside the executable subset"
        )
    example = f"\\{node.op}_{{{node.indices[0].text}=1}}^{{m}}"
    if top is None:
        raise lowerer.fail(f"give the upper limit too, as in {example}", node.col)
    size = lowerer.lower(top)
    if not isinstance(size, Size):
        raise lowerer.fail(f"the upper limit names a dim's size, as in {example}", _col(top))
    return size


def _col(node: Expr) -> int:
    return node.col


def _reduce_one(
    lowerer: Lowering, node: BigOp, letter: Word, binding: Binding, body: Op, limit: Size | None
) -> Op:
    if limit is not None and limit.dim.startswith(ALIAS) and binding.dim is not None:
        size = lowerer.scope.aliases.setdefault(limit.dim, binding.dim)
        if base(size) != base(binding.dim):
            message = f"{limit.label} is the size of {size} in one sum and of {binding.dim} here"
            raise lowerer.fail(message, node.col)
    axis = index_axis(letter.text)
    if axis in body.type.dims:
        dims = tuple(d for d in body.type.dims if d != axis)
        return Reduce(node.op, body, letter.text, Type(dims, body.type.core))
    if limit is None or binding.dim is None:
        example = f"\\{node.op}_{{{letter.text}=1}}^{{m}}"
        message = f"{letter.text} does not occur in what \\{node.op} runs over"
        raise lowerer.fail(f"{message}, so its range is unknown: write {example}", letter.col)
    if node.op == "sum":
        return lowerer.elementwise("*", body, limit, node.col)
    if node.op == "prod":
        return lowerer.elementwise("^", body, limit, node.col)
    return body


def assigned(lowerer: Lowering, value: Op, letters: tuple[Word, ...] | None, col: int) -> Op:
    """The right side of ``y_{ij} = value``: each index's axis takes back the dim it ranged
    over, last, in the left side's order; the last two dims are its matrix dims, as for a
    declared tensor. ``letters`` None (a definition or bare expression writes no index): the
    free indices, in the order they were first used; ``()``: none may be free."""
    axes = [d for d in value.type.dims if is_index_axis(d)]
    free = lowerer.bindings.free
    if letters is None:
        letters = tuple(Word(k, b.col) for k, b in free.items() if index_axis(k) in axes)
    written = _written(letters)
    for at, letter in enumerate(letters):
        if letter.text in written[:at]:
            raise lowerer.fail(f"index {letter.text} appears twice on the left", letter.col)
        if index_axis(letter.text) not in axes:
            message = f"index {letter.text} on the left does not occur on the right"
            raise lowerer.fail(f"{message}, so its range is unknown", letter.col)
    for axis in axes:
        index = axis.removeprefix("#")
        if index not in written:
            message = f"index {index} is free on the right: write it on the left or sum over it"
            raise lowerer.fail(message, free[index].col if index in free else col)
    if not letters:
        return value
    rest = [d for d in value.type.dims if not is_index_axis(d)]
    renames: dict[str, str] = {}
    for letter in letters:
        binding = free.get(letter.text)
        if binding is None or binding.dim is None:  # never: its axis exists, so a use bound it
            raise lowerer.fail(f"index {letter.text} has no known range", letter.col)
        renames[index_axis(letter.text)] = fresh(binding.dim, (*rest, *renames.values()))
    dims = tuple(renames.get(d, d) for d in value.type.dims)
    target = (*rest, *renames.values())  # a matrix or vector over its last dims, as declared
    return Relabel(value, tuple(written), dims, Type(target, min(2, len(target))), element=False)
