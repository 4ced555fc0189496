"""``Name(args)``: inlined definitions, table functions, builtins and ``Concat`` of a family."""

from __future__ import annotations

from formula_check.latex.errors import NotExecutable
from formula_check.latex.indices import alias_names, assigned
from formula_check.latex.ir import Call, Concat, Map, Named, Op
from formula_check.latex.names import script_text
from formula_check.latex.nodes import Apply, Dots, Expr, Num, Script, Word
from formula_check.latex.scope import Definition, Locals, Lowering, Scope
from formula_check.latex.shapes import Type, base, concat_type, index_axis, is_index_axis

UNARY = {
    **{name: name for name in ("sqrt", "sin", "cos", "tan", "exp", "log", "tanh", "sigmoid")},
    "ln": "log",
    **dict.fromkeys(("softmax", "Softmax", "SoftMax"), "softmax"),
    **dict.fromkeys(("relu", "ReLU", "Relu", "ReLu"), "relu"),
}
"""Builtins by their exact spellings. Case is meaning here: ``LN`` is no ``ln`` and ``Exp``
no ``exp``, so a name is never matched by lowering its case."""
ROW_WISE = frozenset({"softmax"})
EXTREMA = frozenset({"max", "min"})
CONCAT = frozenset({"Concat", "concat", "CONCAT"})
LAYER_NORM = "LayerNorm"
TABLE_ALIASES = dict.fromkeys(
    ("LN", "LayerNorm", "Layernorm", "layernorm", "LayerNormalization"), LAYER_NORM
)
"""The spellings of the functions a symbol table may define, by the name it defines them
under: ``\\mathrm{LN}`` is layer normalisation where the oracle has one."""
UNSUPPORTED = {
    LAYER_NORM: "layer normalisation",
    "GELU": "the GELU activation",
    "gelu": "the GELU activation",
    "Dropout": "dropout",
    "dropout": "dropout",
}
"""Upright names whose meaning is known but not executable here: a formula calling one the
oracle does not define is not executable, never read as another function or a product."""


def call(lowerer: Lowering, node: Apply) -> Op:
    """The value of ``node``: the first of definition, table function, builtin that matches."""
    name = node.func.text
    scope = lowerer.scope
    definition = _definition(scope, name)
    if definition is not None:
        return inline(lowerer, definition, node)
    table_name = TABLE_ALIASES.get(name, name)
    if table_name in scope.table.functions:
        value = _single(lowerer, node)
        return Call(scope.table.functions[table_name], value, value.type)
    builtin = _builtin(lowerer, node)
    if builtin is not None:
        return builtin
    if not node.func.upright and len(node.args) == 1:  # x(W_1 + W_2): a product, not a call
        return lowerer.juxtapose(
            lowerer.name(node.func, None, None), lowerer.lower(node.args[0]), node.args[0].col
        )
    known = UNSUPPORTED.get(table_name)
    if known is not None and node.func.upright:
        raise NotExecutable(
            f"unknown function {name}: {known}, which this oracle's symbols do not define"
        )
    raise lowerer.fail(f"unknown function {name!r}: define it in an earlier block", node.col)


def _builtin(lowerer: Lowering, node: Apply) -> Op | None:
    """A builtin function's value, or None when ``node`` calls no builtin."""
    name = node.func.text
    if name in UNARY and (node.func.upright or name not in lowerer.vocabulary()):
        return _unary(lowerer, UNARY[name], node)
    if name in EXTREMA:
        return _extremum(lowerer, name, node)
    if name in CONCAT:
        return concat(lowerer, node)
    if name == "\\sigma" and name not in lowerer.vocabulary():  # applied, undeclared: sigmoid
        return _unary(lowerer, "sigmoid", node)
    return None


def _definition(scope: Scope, name: str) -> Definition | None:
    r"""The page's definition of ``name``; ``\textrm{sublayer}`` calls a ``Sublayer``, but a
    short name must match exactly (``LN`` is not an ``Ln``) and a builtin is never redefined
    by case alone."""
    if name in scope.definitions:
        return scope.definitions[name]
    if len(name) <= 2 or name in UNARY or name in EXTREMA:
        return None
    matches = [d for key, d in scope.definitions.items() if key.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


def _single(lowerer: Lowering, node: Apply) -> Op:
    if len(node.args) != 1:
        raise lowerer.fail(f"{node.func.text} takes one argument", node.col)
    return lowerer.lower(node.args[0])


def _unary(lowerer: Lowering, fn: str, node: Apply) -> Op:
    value = _single(lowerer, node)
    if node.sub is not None:
        return Map(fn, value, value.type, _along(lowerer, node, value))
    if fn in ROW_WISE and value.type.core == 0:
        raise lowerer.fail(f"{fn} needs a vector or a matrix, got {value.type}", node.col)
    return Map(fn, value, value.type)


def _along(lowerer: Lowering, node: Apply, value: Op) -> str:
    r"""The axis ``\mathrm{softmax}_k(x)`` runs along: the axis of index ``k``, of dim ``k``
    (an alias too), or the rows of a declared matrix ``K`` (``softmax_k`` over the keys)."""
    letter = script_text(node.sub)
    table = lowerer.scope.table
    dims = value.type.dims
    if letter is not None and index_axis(letter) in dims:
        return index_axis(letter)
    by_name = [d for d in dims if letter is not None and base(d) == table.dim_of(letter)]
    matrix = table.symbols.get((letter or "").upper())
    rows = matrix.dims[-2] if matrix is not None and matrix.core == 2 else None
    by_rows = [d for d in dims if rows is not None and base(d) == base(rows)]
    found = by_name or by_rows
    if letter is None or len(found) != 1:
        raise NotExecutable(
            f"{node.func.text}_{letter or '…'}: the subscript names no index or axis of "
            f'{value.type}; declare which dim it is, e.g. symbols="{letter or "k"} = m"'
        )
    return found[0]


def _extremum(lowerer: Lowering, fn: str, node: Apply) -> Op:
    if len(node.args) != 2:
        raise NotExecutable(
            f"\\{fn} over a set; \\{fn}(a, b) and \\{fn}_j over an index are executable"
        )
    left, right = (lowerer.lower(arg) for arg in node.args)
    return lowerer.elementwise(fn, left, right, node.col)


def inline(lowerer: Lowering, definition: Definition, node: Apply) -> Op:
    """``definition``'s body with its parameters bound to the arguments' values and dims."""
    if len(node.args) != len(definition.params):
        count = len(definition.params)
        raise lowerer.fail(f"{definition.name} takes {count} arguments", node.col)
    values = tuple(lowerer.lower(arg) for arg in node.args)
    renames: dict[str, str] = {}
    for param, value, arg in zip(definition.params, values, node.args, strict=True):
        if any(is_index_axis(d) for d in value.type.dims):
            raise lowerer.fail(f"pass {definition.name} whole tensors, not elements", arg.col)
        declared = definition.table.symbols[param]
        expected = Type(declared.dims, declared.core)
        if value.type.core != declared.core:
            raise lowerer.fail(
                f"{param} of {definition.name} is a {expected}, got {value.type}", arg.col
            )
        for mine, theirs in zip(expected.core_dims, value.type.core_dims, strict=True):
            if renames.setdefault(mine, base(theirs)) != base(theirs):
                message = f"{definition.name} needs {mine} to be both {renames[mine]} and {theirs}"
                raise lowerer.fail(message, arg.col)
    assignments = {local.name: local for local in definition.where}
    roots = iter((definition.body, *(local.rhs for local in definition.where)))
    taken = definition.table.names | set(definition.table.indices) | set(assignments)
    inner = Scope(
        source=definition.source,
        table=definition.table,
        definitions=lowerer.scope.definitions,
        params=dict(zip(definition.params, values, strict=True)),
        renames=renames,
        caller=lowerer.scope.caller or lowerer.scope.table,
        label=f"in {definition.name}: ",
        locals=Locals(assignments),
        aliases=lowerer.scope.aliases,
        alias_names=alias_names(roots, taken | set(definition.params)),
    )
    inner_lowerer = lowerer.nested(inner)
    body = inner_lowerer.lower(definition.body)
    body = assigned(inner_lowerer, body, definition.indices, definition.body.col)
    return Named(definition.name, body, values, body.type)


def _member(node: Expr) -> tuple[str, Expr] | None:
    if isinstance(node, Script) and isinstance(node.base, Word) and node.sub is not None:
        return node.base.text, node.sub
    return None


def concat(lowerer: Lowering, node: Apply) -> Op:
    r"""``Concat(head_1, \dots, head_h)``: the family ``head_i`` side by side, head 1 first."""
    args = node.args
    first, last = (_member(args[0]), _member(args[-1])) if len(args) == 3 else (None, None)
    if first is None or last is None or not isinstance(args[1], Dots) or first[0] != last[0]:
        raise NotExecutable("Concat is executable as Concat(head_1, \\dots, head_h)")
    scope = lowerer.scope
    index = next((i for i in scope.table.indices if f"{first[0]}_{i}" in scope.families), None)
    if index is None:
        raise lowerer.fail(f"{first[0]}_i is not defined in this formula", args[0].col)
    count = scope.table.indices[index]
    if not (isinstance(first[1], Num) and first[1].value == 1):
        raise lowerer.fail(f"the first member must be {first[0]}_1", first[1].col)
    if script_text(last[1]) != count:
        raise lowerer.fail(f"the last member must be {first[0]}_{count}", last[1].col)
    family = scope.families[f"{first[0]}_{index}"]
    inner = base(family.type.dims[-1]) if family.type.dims else ""
    merged = scope.table.products.get(f"{count}*{inner}", f"{count}*{inner}")
    return Concat(family, index, lowerer.typed(concat_type, node.col, family.type, index, merged))
