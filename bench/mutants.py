"""Mutation suite: how much wrong code the checker catches, and whether it ever rejects right code.

Seeds are correct formula blocks, in the pages of ``fixtures/mutants/`` (a page: the formula
fences and the one Python fence they are checked against). The test suite's correct code of
the same forms is read from these pages (``tests/implementations.py``), so that its drifts are
edits of the very code mutated here. Each seed is rewritten through its syntax tree, one small
edit at a time, into *mutants*: a swapped operator or operand, another axis, a dropped transpose,
bias, square root or statement, a changed constant (the mask's -1e9, ε), ε moved out of its
square root, another activation, a shifted slice, arguments in the wrong order. It is also
rewritten into correct *variants*: ``einsum`` or ``tensordot`` for ``matmul``, ``rsqrt``,
float64 code, ``tf.function``, the mask in another encoding.

Whether a rewrite still computes its seed's function is decided apart from the checker:
seed and rewrite run side by side in a TensorFlow process of their own, in float64, on the
same inputs in wide regimes (standard normal, x10, x100, x10 with opposite offsets, rows of
near-zero variance, weights x10), and agree to 1e-9 relative or not. "Equivalent" therefore
means equivalent at the block's sizes over those regimes. Equivalent mutants are listed with
the checker's verdict and left out of the kill ratio; a variant that is not equivalent is a
bug of this script, listed and left out.

Every block is then checked by ``formula-check check --json`` in one temporary project: the
mutants with the first seed value, the seeds and variants with every seed value (the
``seed=`` header option). A non-equivalent mutant that comes out verified *survived*; a seed,
variant or equivalent mutant that does not is a *false alarm*.

    python bench/mutants.py                      # seed values 0..9, every mutant: a few minutes
    python bench/mutants.py --quick              # a sample, seed values 0..2
    python bench/mutants.py --seeds 0..4 --json mutants.json

The *trust corpus* (``--trust``) asks the converse of the kill ratio: not whether a random
edit is caught, but whether the wrongs that look right to a reader are. Each file of
``fixtures/trust/`` is one case: a front matter naming its ``section`` (1: a weight, the first
call or a regime's outputs; 2: only under ``tf.function``; 5: a formula behind presentation
tokens) and its ``kind``, then blocks, each a formula fence and its Python fence preceded by
the verdict it must get::

    <!-- expect: mismatch -->
    ```formula oracle="ffn" kind="layer" ...

``verified`` (correct code and formula), ``mismatch`` (the code is wrong), ``formula-mismatch``
(the code is right, the formula is not), ``not-checked`` (the formula cannot be compiled, and
the block must say so rather than pass in silence) or ``error`` (the block cannot be checked as
written, and must say why rather than pass). A case is usually a wrong block and its
correct twin, written alike but for the one slip. Headers are ``key="value"`` pairs without
``id`` (the corpus names each block ``<case>-<n>``). Every block of every case is checked by
one ``formula-check check --json`` run, at the blocks' own seed. A wrong block that passes (a
``verified`` result, or a formula left unchecked) is a *false pass*; a correct block that
fails is a *false alarm*; anything else other than stated (a wrong block caught for another
reason, a correct formula left unchecked) is listed as *other*.

    python bench/mutants.py --trust              # the corpus alone: about a minute
    python bench/mutants.py --trust --seeds 0..2 --json trust.json

Each block runs at its own seed (0 unless its header says otherwise); ``--seeds`` runs every
block at each of the values given instead, where ``where`` then names the seed as well.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEED_FOLDER = ROOT / "fixtures" / "mutants"
TRUST_FOLDER = ROOT / "fixtures" / "trust"

# -- seeds ------------------------------------------------------------------------------------

_FORMULA = re.compile(
    r"^```formula (?P<header>[^\n]*)\n(?P<latex>.*?)\n```$", re.DOTALL | re.MULTILINE
)
_PYTHON = re.compile(r"^```python\n(?P<code>.*?)^```$", re.DOTALL | re.MULTILINE)
_OPTION = re.compile(r'([A-Za-z_][\w-]*)="([^"]*)"')


@dataclass(frozen=True)
class Seed:
    """A correct block: its header options (without ``id`` and ``seed``), LaTeX and code."""

    name: str
    options: Mapping[str, str]
    latex: str
    code: str


def parse_options(header: str) -> dict[str, str]:
    """``oracle="ffn" dims="b=2"`` -> ``{"oracle": "ffn", "dims": "b=2"}`` (double quotes only,
    which is how every seed is written; anything else in the header is an error here)."""
    if _OPTION.sub("", header).strip():
        raise ValueError(f'write seed headers as key="value" pairs only: {header!r}')
    return dict(_OPTION.findall(header))


def render_options(options: Mapping[str, str]) -> str:
    """The header text for ``options``."""
    return " ".join(f'{key}="{value}"' for key, value in options.items())


def load_seeds(folder: Path = SEED_FOLDER) -> list[Seed]:
    """The seeds of every ``*.md`` of ``folder``: a page holds one Python fence, the code, and
    the formula blocks it is checked against (each a seed). A page's only block is named by
    the page, each of several by its oracle (a layer's code and the formulas of its parts)."""
    seeds = []
    for path in sorted(folder.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        codes = [found["code"] for found in _PYTHON.finditer(text)]
        blocks = list(_FORMULA.finditer(text))
        if len(codes) != 1 or not blocks:
            raise ValueError(
                f"{path}: expected formula blocks and one Python fence, "
                f"found {len(blocks)} and {len(codes)}"
            )
        for block in blocks:
            options = parse_options(block["header"])
            if {"id", "seed"} & set(options):
                raise ValueError(f"{path}: id and seed are set by the suite, not by a seed")
            name = path.stem if len(blocks) == 1 else options["oracle"]
            seeds.append(Seed(name, options, block["latex"], codes[0]))
    names = Counter(seed.name for seed in seeds)
    if twice := sorted(name for name, count in names.items() if count > 1):
        raise ValueError(f"{folder}: seeds named twice: {', '.join(twice)}")
    return seeds


# -- mutation operators ------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    """One edit of a seed: which operator made it, what it changed, where, and the new code."""

    seed: str
    operator: str
    description: str
    line: int
    column: int
    source_line: str
    code: str

    @property
    def where(self) -> str:
        """``ffn_function, code 5:14``: the seed, and the edited spot in its Python fence (a
        page may hold several seeds over one fence, so the page is not named)."""
        return f"{self.seed}, code {self.line}:{self.column}"


@dataclass(frozen=True)
class Context:
    """What an operator may look at besides its node: the seed's text and every node's parent."""

    source: str
    parents: Mapping[int, ast.AST]

    def text(self, node: ast.AST) -> str:
        """``node`` as written in the seed (or unparsed, for a node made by an operator)."""
        return ast.get_source_segment(self.source, node) or ast.unparse(node)

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))


Site = tuple[str, ast.AST]
"""(what changes, the node that replaces the visited one)."""
Operator = Callable[[ast.AST, Context], Iterator[Site]]


def expression(text: str) -> ast.expr:
    """A new expression node from Python text."""
    return ast.parse(text, mode="eval").body


def function_name(node: ast.AST) -> str | None:
    """``relu`` for a call of ``tf.nn.relu`` (the last name of the called path), else None."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else None


def short(text: str, width: int = 40) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def number_text(value: float) -> str:
    return format(value, ".6g") if isinstance(value, float) else str(value)


_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}
_SYMBOLS |= {ast.MatMult: "@", ast.Pow: "**"}


def arithmetic(node: ast.AST, context: Context) -> Iterator[Site]:
    """``+`` and ``-`` swapped, ``*`` and ``/`` swapped, ``//`` made ``/`` (also in ``x += y``)."""
    swaps = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
    swaps[ast.FloorDiv] = ast.Div
    if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in swaps:
        new = copy.deepcopy(node)
        new.op = swaps[type(node.op)]()
        yield f"{_SYMBOLS[type(node.op)]} → {_SYMBOLS[type(new.op)]}", new


def operands(node: ast.AST, context: Context) -> Iterator[Site]:
    """The operands of ``-``, ``/`` and ``@`` in the other order (``b @ a``: the order of a
    product)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub | ast.Div | ast.MatMult):
        symbol = _SYMBOLS[type(node.op)]
        yield f"a {symbol} b → b {symbol} a", ast.BinOp(node.right, node.op, node.left)


def drop_term(node: ast.AST, context: Context) -> Iterator[Site]:
    """A term dropped: ``a + b`` -> ``a`` or ``b`` (a bias, the residual, ε, the mask),
    ``a - b``, ``a * b`` and ``a / b`` -> ``a`` (a mean, a gain, a scale)."""
    if not isinstance(node, ast.BinOp) or isinstance(node.op, ast.MatMult | ast.Pow):
        return
    yield f"drop {_SYMBOLS[type(node.op)]} {short(context.text(node.right))}", node.left
    if isinstance(node.op, ast.Add | ast.Mult):
        yield f"drop {short(context.text(node.left))} {_SYMBOLS[type(node.op)]}", node.right


def _base_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Subscript | ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def drop_statement(node: ast.AST, context: Context) -> Iterator[Site]:
    """A statement that updates a value in place dropped: ``logits += mask * -1e9``,
    ``scores = scores / s``, ``angles[:, 0::2] = np.sin(angles[:, 0::2])``."""
    if isinstance(node, ast.AugAssign):
        yield f"drop `{short(context.text(node))}`", ast.Pass()
    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
        name = _base_name(node.targets[0])
        used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        if name is not None and name in used:
            yield f"drop `{short(context.text(node))}`", ast.Pass()


def scale(node: ast.AST, context: Context) -> Iterator[Site]:
    """A square root dropped (``sqrt(d_k)`` -> ``d_k``) or inverted (``rsqrt`` -> ``sqrt``)."""
    name = function_name(node)
    if name in {"sqrt", "rsqrt"} and isinstance(node, ast.Call) and len(node.args) == 1:
        argument = context.text(node.args[0])
        yield f"{name}(·) → · (no square root)", node.args[0]
        if name == "rsqrt":
            yield "rsqrt → sqrt", expression(f"tf.sqrt({argument})")


def epsilon(node: ast.AST, context: Context) -> Iterator[Site]:
    """ε out of its square root, subtracted, or dropped: ``sqrt(variance + ε)``."""
    name = function_name(node)
    if name not in {"sqrt", "rsqrt"} or not isinstance(node, ast.Call) or len(node.args) != 1:
        return
    inside = node.args[0]
    if not isinstance(inside, ast.BinOp) or not isinstance(inside.op, ast.Add):
        return
    function = context.text(node.func)
    variance, eps = context.text(inside.left), context.text(inside.right)
    if name == "sqrt":
        yield "ε outside the square root", expression(f"({function}({variance}) + {eps})")
    else:
        yield "ε outside the square root", expression(f"(1.0 / (tf.sqrt({variance}) + {eps}))")
    yield "ε subtracted", expression(f"{function}({variance} - {eps})")
    yield "ε dropped", expression(f"{function}({variance})")


def axis(node: ast.AST, context: Context) -> Iterator[Site]:
    """A reduction, softmax or stacking axis changed: ``axis=-1`` -> ``-2`` or ``1``; also the
    single axis of ``axes=[-1]``."""
    if not isinstance(node, ast.Call):
        return
    for index, item in enumerate(node.keywords):
        value = item.value
        listed = isinstance(value, ast.List | ast.Tuple) and len(value.elts) == 1
        current = _number(value.elts[0] if listed else value)
        if item.arg not in {"axis", "axes"} or not isinstance(current, int):
            continue
        for other in [c for c in (-1, -2, 1) if c != current][:2]:
            new = copy.deepcopy(node)
            new.keywords[index].value = expression(f"[{other}]" if listed else str(other))
            yield f"{item.arg}={current} → {other}", new


def keyword(node: ast.AST, context: Context) -> Iterator[Site]:
    """A keyword argument dropped (``transpose_b=True``, ``keepdims=True``, ``epsilon=…``,
    ``activation=…``), and ``transpose_b`` made ``transpose_a``."""
    if not isinstance(node, ast.Call):
        return
    for index, item in enumerate(node.keywords):
        if item.arg is None:
            continue
        new = copy.deepcopy(node)
        del new.keywords[index]
        yield f"drop {item.arg}={short(context.text(item.value), 24)}", new
        if item.arg == "transpose_b":
            new = copy.deepcopy(node)
            new.keywords[index].arg = "transpose_a"
            yield "transpose_b → transpose_a", new


def transpose(node: ast.AST, context: Context) -> Iterator[Site]:
    """A transpose dropped: ``tf.transpose(x, perm)`` -> ``x``."""
    if function_name(node) == "transpose" and isinstance(node, ast.Call) and node.args:
        yield "drop tf.transpose", node.args[0]


_RELU_TO = {
    "relu6": "tf.nn.relu6({0})",
    "clip at 6": "tf.clip_by_value({0}, 0.0, 6.0)",
    "gelu": "tf.nn.gelu({0})",
    "sigmoid": "tf.nn.sigmoid({0})",
    "leaky_relu": "tf.nn.leaky_relu({0})",
}
_RELU_NAMED = {
    "relu6": "'relu6'",
    "clip at 6": "lambda t: tf.clip_by_value(t, 0.0, 6.0)",
    "gelu": "'gelu'",
    "sigmoid": "'sigmoid'",
    "leaky_relu": "'leaky_relu'",
}


def activation(node: ast.AST, context: Context) -> Iterator[Site]:
    """ReLU replaced by its look-alikes: relu6, a clip at 6, GELU, sigmoid, leaky ReLU; in
    ``tf.nn.relu(x)``, ``tf.maximum(x, 0.0)`` and Keras' ``activation="relu"``."""
    name = function_name(node)
    if isinstance(node, ast.Call) and (
        (name == "relu" and len(node.args) == 1)
        or (name == "maximum" and len(node.args) == 2 and _is_zero(node.args[1]))
    ):
        argument = context.text(node.args[0])
        for label, template in _RELU_TO.items():
            yield f"relu → {label}", expression(template.format(argument))
    parent = context.parent(node)
    if (
        isinstance(node, ast.Constant)
        and node.value == "relu"
        and isinstance(parent, ast.keyword)
        and parent.arg == "activation"
    ):
        for label, text in _RELU_NAMED.items():
            yield f"relu → {label}", expression(text)


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and type(node.value) is not bool


_NAMED_CONSTANTS: Mapping[float, tuple[float, ...]] = {
    -1e9: (-1e4, -100.0, 1e9),  # the mask: weakened, or with the wrong sign
    1e-6: (1e-9, 1e-3),  # ε
    10000.0: (1000.0,),  # the positional encoding's base
}


def constant(node: ast.AST, context: Context) -> Iterator[Site]:
    """A number changed: the mask's -1e9 to -1e4, -100 or +1e9; ε 1e-6 to 1e-9 or 1e-3; the
    base 10000 to 1000; any other float negated or x10; an integer +1 (and -1 below zero)."""
    value = _number(node)
    if value is None or isinstance(context.parent(node), ast.UnaryOp):
        return  # -1e9 is UnaryOp(USub, 1e9): changed once, as a whole
    if float(value) in _NAMED_CONSTANTS:
        others: Sequence[float] = _NAMED_CONSTANTS[float(value)]
    elif isinstance(value, float):
        others = (1.0,) if value == 0 else (-value, value * 10)
    else:
        others = (value + 1, value - 1) if value < 0 else (value + 1,)
    for other in others:
        new = float(other) if isinstance(value, float) else other
        yield f"{context.text(node)} → {number_text(new)}", expression(repr(new))


def _number(node: ast.AST) -> float | int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) in {int, float}:
        return node.value
    return None


def slicing(node: ast.AST, context: Context) -> Iterator[Site]:
    """A slice shifted: ``0::2`` and ``1::2`` swapped; an end one short or one long
    (``[:, :n]`` -> ``[:, :n - 1]``)."""
    if not isinstance(node, ast.Slice):
        return
    if isinstance(node.step, ast.Constant) and node.step.value == 2:
        start = node.lower.value if isinstance(node.lower, ast.Constant) else 0
        if start in {0, 1}:
            new = copy.deepcopy(node)
            new.lower = ast.Constant(1 - start)
            yield f"{start}::2 → {1 - start}::2", new
    if node.upper is not None:
        upper = context.text(node.upper)
        for change in ("- 1", "+ 1"):
            new = copy.deepcopy(node)
            new.upper = expression(f"({upper}) {change}")
            yield f":{upper} → :{upper} {change}", new


def call_arguments(node: ast.AST, context: Context) -> Iterator[Site]:
    """Arguments in the wrong order: the first two positional ones swapped (``matmul(k, q)``),
    or the variables given to the first two keywords (``num_heads=key_dim, key_dim=num_heads``)."""
    if not isinstance(node, ast.Call):
        return
    args = node.args
    if (
        len(args) >= 2
        and not isinstance(args[0], ast.Starred | ast.Constant)
        and not isinstance(args[1], ast.Starred)
        and ast.dump(args[0]) != ast.dump(args[1])
    ):
        new = copy.deepcopy(node)
        new.args[0], new.args[1] = new.args[1], new.args[0]
        yield (
            f"arguments swapped: {short(context.text(args[0]), 16)} ↔ {short(context.text(args[1]), 16)}",
            new,
        )
    named = [k for k in node.keywords if k.arg is not None and isinstance(k.value, ast.Name)]
    if len(named) >= 2 and ast.dump(named[0].value) != ast.dump(named[1].value):
        new = copy.deepcopy(node)
        first, second = (k for k in new.keywords if k.arg in {named[0].arg, named[1].arg})
        first.value, second.value = second.value, first.value
        yield f"keyword values swapped: {named[0].arg} ↔ {named[1].arg}", new


_NEIGHBOURS = {
    "sin": "cos",
    "cos": "sin",
    "reduce_mean": "reduce_sum",
    "reduce_sum": "reduce_mean",
    "reduce_max": "reduce_min",
    "maximum": "minimum",
    "softmax": "log_softmax",
}


def function_swap(node: ast.AST, context: Context) -> Iterator[Site]:
    """A function replaced by its neighbour: sin and cos, mean and sum, max and min,
    softmax and log-softmax."""
    name = function_name(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and name in _NEIGHBOURS:
        new = copy.deepcopy(node)
        new.func.attr = _NEIGHBOURS[name]
        yield f"{name} → {_NEIGHBOURS[name]}", new


_FLIPS = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_FLIPS |= {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


def comparison(node: ast.AST, context: Context) -> Iterator[Site]:
    """A comparison flipped: ``is not None`` -> ``is None``, ``==`` -> ``!=``, ``<`` -> ``<=``."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIPS:
        new = copy.deepcopy(node)
        new.ops = [_FLIPS[type(node.ops[0])]()]
        yield f"`{short(context.text(node))}` flipped", new


def keras_no_bias(node: ast.AST, context: Context) -> Iterator[Site]:
    """A Keras layer built without its bias (``use_bias=False``), or a LayerNormalization
    without its shift or its gain (``center=False``, ``scale=False``)."""
    name = function_name(node)
    if not isinstance(node, ast.Call):
        return
    given = {k.arg for k in node.keywords}
    switches = {"Dense": ("use_bias",), "MultiHeadAttention": ("use_bias",)}
    switches["LayerNormalization"] = ("center", "scale")
    for switch in switches.get(name or "", ()):
        if switch not in given:
            new = copy.deepcopy(node)
            new.keywords.append(ast.keyword(arg=switch, value=ast.Constant(value=False)))
            yield f"{name}({switch}=False)", new


OPERATORS: Mapping[str, Operator] = {
    # The specific operators come first: a rewrite two operators make is named after the first.
    "epsilon": epsilon,
    "activation": activation,
    "constant": constant,
    "scale": scale,
    "transpose": transpose,
    "axis": axis,
    "slice": slicing,
    "keras-bias": keras_no_bias,
    "function": function_swap,
    "arithmetic": arithmetic,
    "operands": operands,
    "drop-term": drop_term,
    "drop-statement": drop_statement,
    "arguments": call_arguments,
    "keyword": keyword,
    "comparison": comparison,
}


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _replace(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            return
        if isinstance(value, list) and any(item is old for item in value):
            value[[id(item) for item in value].index(id(old))] = new
            return
    raise LookupError(f"{type(old).__name__} is not a child of {type(parent).__name__}")


def replaced(tree: ast.Module, index: int, replacement: ast.AST) -> ast.Module:
    """A copy of ``tree`` whose ``index``-th node (in ``ast.walk`` order) is ``replacement``."""
    clone = copy.deepcopy(tree)
    target = next(node for i, node in enumerate(ast.walk(clone)) if i == index)
    parent = _parents(clone)[id(target)]
    _replace(parent, target, copy.deepcopy(replacement))
    return ast.fix_missing_locations(clone)


def mutants_of(seed: Seed, operators: Mapping[str, Operator] = OPERATORS) -> list[Mutant]:
    """Every single-edit rewrite of ``seed`` that is new code (the same code reached twice is
    kept once, under the first operator that made it)."""
    tree = ast.parse(seed.code)
    context = Context(seed.code, _parents(tree))
    lines = seed.code.splitlines()
    seen = {ast.unparse(tree)}
    found = []
    for index, node in enumerate(ast.walk(tree)):
        for name, operator in operators.items():
            for description, replacement in operator(node, context):
                code = ast.unparse(replaced(tree, index, replacement)) + "\n"
                if code in seen:
                    continue
                seen.add(code)
                line = getattr(node, "lineno", 1)
                column = getattr(node, "col_offset", 0) + 1
                where = lines[line - 1].strip()
                found.append(Mutant(seed.name, name, description, line, column, where, code))
    return sorted(found, key=lambda mutant: (mutant.line, mutant.column))


KNOWN_SURVIVORS: tuple[tuple[str, str, str], ...] = (
    ("ffn_function", "activation", "relu → relu6"),
    ("ffn_function", "activation", "relu → clip at 6"),
    ("ffn_sequential", "activation", "relu → relu6"),
    ("ffn_sequential", "activation", "relu → clip at 6"),
    ("sublayer_post", "activation", "relu → relu6"),
    ("attention_additive", "constant", "-1e9 → -100"),
    ("attention_keep", "constant", "-1e9 → -100"),
    ("multihead_layer", "constant", "-1e9 → -100"),
    ("layer_norm", "epsilon", "ε outside the square root"),
    ("layer_norm", "epsilon", "ε subtracted"),
    ("layer_norm", "epsilon", "ε dropped"),
    ("layer_norm", "constant", "1e-6 → 1e-09"),
    ("layer_norm_layer", "epsilon", "ε outside the square root"),
    ("layer_norm_layer", "constant", "1e-6 → 1e-09"),
    ("layer_norm_keras", "constant", "1e-6 → 1e-09"),
    ("sublayer_post", "epsilon", "ε outside the square root"),
    ("sublayer_pre", "constant", "1e-6 → 1e-09"),
    ("add_norm", "epsilon", "ε outside the square root"),
    ("add_norm", "constant", "1e-6 → 1e-09"),
)
"""(seed, operator, description) of the mutant classes the issue names as surviving: ReLU made
relu6 or clipped at 6, the mask constant weakened to -100, ε moved, dropped, subtracted or made
1e-9 (by hand and through the ``keras-layer-norm`` preset)."""


def known_survivors(mutants: Sequence[Mutant]) -> list[Mutant]:
    """The mutants of :data:`KNOWN_SURVIVORS`, in its order; a class not generated is an error."""
    by_key = {(m.seed, m.operator, m.description): m for m in mutants}
    missing = [key for key in KNOWN_SURVIVORS if key not in by_key]
    if missing:
        raise LookupError(f"known survivor classes not generated: {missing}")
    return [by_key[key] for key in KNOWN_SURVIVORS]


# -- correct variants -------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """A correct rewrite of a seed, checked like the seed itself."""

    seed: str
    name: str
    options: Mapping[str, str]
    code: str


class _CallRewrite(ast.NodeTransformer):
    """Every call for which ``rewrite`` returns new text is replaced by that text."""

    def __init__(self, rewrite: Callable[[ast.Call], str | None]) -> None:
        self.rewrite = rewrite
        self.count = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        text = self.rewrite(node)
        if text is None:
            return node
        self.count += 1
        return expression(text)


def _rewrite_calls(seed: Seed, rewrite: Callable[[ast.Call], str | None]) -> str | None:
    tree = ast.parse(seed.code)
    transformer = _CallRewrite(rewrite)
    tree = transformer.visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" if transformer.count else None


def _matmul_parts(call: ast.Call) -> tuple[str, str, bool] | None:
    """(a, b, transpose_b) of ``tf.matmul(a, b[, transpose_b=True])``, else None."""
    keywords = {k.arg: k.value for k in call.keywords}
    if function_name(call) != "matmul" or len(call.args) != 2 or set(keywords) - {"transpose_b"}:
        return None
    flag = keywords.get("transpose_b")
    transposed = isinstance(flag, ast.Constant) and flag.value is True
    return ast.unparse(call.args[0]), ast.unparse(call.args[1]), transposed


def _einsum(call: ast.Call) -> str | None:
    parts = _matmul_parts(call)
    if parts is None:
        return None
    a, b, transposed = parts
    subscripts = "...ij,...kj->...ik" if transposed else "...ij,...jk->...ik"
    return f"tf.einsum({subscripts!r}, {a}, {b})"


def _tensordot(call: ast.Call) -> str | None:
    parts = _matmul_parts(call)
    weight = call.args[1] if parts else None
    if parts is None or parts[2] or not isinstance(weight, ast.Name) or weight.id[0] not in "Ww":
        return None  # only a batch of vectors times one weight matrix is a tensordot
    return f"tf.tensordot({parts[0]}, {parts[1]}, axes=1)"


def _relu_maximum(call: ast.Call) -> str | None:
    name = function_name(call)
    if name == "relu" and len(call.args) == 1:
        return f"tf.maximum({ast.unparse(call.args[0])}, 0.0)"
    if name == "maximum" and len(call.args) == 2 and _is_zero(call.args[1]):
        return f"tf.nn.relu({ast.unparse(call.args[0])})"
    return None


def _logsumexp(call: ast.Call) -> str | None:
    keywords = {k.arg: k.value for k in call.keywords}
    if function_name(call) != "softmax" or len(call.args) != 1 or set(keywords) - {"axis"}:
        return None
    if not isinstance(call.func, ast.Attribute) or ast.unparse(call.func) != "tf.nn.softmax":
        return None
    z = ast.unparse(call.args[0])
    axis_text = ast.unparse(keywords["axis"]) if "axis" in keywords else "-1"
    return f"tf.exp({z} - tf.reduce_logsumexp({z}, axis={axis_text}, keepdims=True))"


class _RsqrtRewrite(ast.NodeTransformer):
    """``a / tf.sqrt(b)`` -> ``a * tf.math.rsqrt(b)``."""

    count = 0

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Div) and function_name(node.right) == "sqrt":
            argument = ast.unparse(node.right.args[0])
            self.count += 1
            return expression(f"{ast.unparse(node.left)} * tf.math.rsqrt({argument})")
        return node


def _rsqrt(seed: Seed) -> str | None:
    transformer = _RsqrtRewrite()
    tree = transformer.visit(ast.parse(seed.code))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" if transformer.count else None


def _entry_function(seed: Seed, tree: ast.Module) -> ast.FunctionDef | None:
    """The seed's entry when the checker calls it as a plain function, else None."""
    if {"kind", "preset", "init"} & set(seed.options):
        return None
    defined = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    last = defined[-1] if defined else None
    if not isinstance(last, ast.FunctionDef):
        return None
    required = len(last.args.args) - len(last.args.defaults)
    return last if required > 0 else None


_AS_FLOAT64 = """
def _as_float64(value):
    dtype = getattr(value, "dtype", None)
    if dtype is not None and tf.as_dtype(dtype).is_floating:
        return tf.cast(value, tf.float64)
    return value
"""


def _float64(seed: Seed) -> str | None:
    """The function computes in float64: float tensors cast on entry, every float32 made 64."""
    text = re.sub(r"\b(tf|np)\.float32\b", r"\1.float64", seed.code)
    tree = ast.parse(text)
    function = _entry_function(seed, tree)
    if function is None:
        return None
    casts = [f"{a.arg} = _as_float64({a.arg})" for a in function.args.args]
    function.body[:0] = ast.parse("\n".join(casts)).body
    helper = ast.parse(_AS_FLOAT64).body
    imports = sum(isinstance(n, ast.Import | ast.ImportFrom) for n in tree.body)
    tree.body[imports:imports] = helper
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _tf_function(seed: Seed) -> str | None:
    """The function compiled with ``@tf.function``."""
    tree = ast.parse(seed.code)
    function = _entry_function(seed, tree)
    if function is None:
        return None
    function.decorator_list.append(expression("tf.function"))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


_MASK_CONVERSIONS: Mapping[tuple[str, str], str] = {
    # (the convention the variant is given, the one the seed's code expects): conversion
    ("keep", "additive"): "tf.cast(tf.logical_not(mask), tf.float32)",
    ("keep-float", "additive"): "1.0 - mask",
    ("additive", "keep"): "tf.equal(mask, 0.0)",
    ("keep-float", "keep"): "tf.cast(mask, tf.bool)",
    ("additive", "keep-float"): "1.0 - mask",
    ("keep", "keep-float"): "tf.cast(mask, tf.float32)",
}


def _mask_variants(seed: Seed) -> Iterator[Variant]:
    """The mask in each other encoding, converted back to the seed's on entry."""
    if "mask" not in seed.options or "preset" in seed.options:
        return
    expected = seed.options.get("mask_convention", "additive")
    for given in ("additive", "keep", "keep-float"):
        if given == expected:
            continue
        tree = ast.parse(seed.code)
        takes_mask = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and "mask" in {a.arg for a in n.args.args}
        ]
        conversion = _MASK_CONVERSIONS[given, expected]
        for function in takes_mask:
            function.body[:0] = ast.parse(f"if mask is not None:\n    mask = {conversion}").body
        code = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
        options = {**seed.options, "mask_convention": given}
        yield Variant(seed.name, f"mask-{given}", options, code)


VARIANT_REWRITES: Mapping[str, Callable[[Seed], str | None]] = {
    "einsum": lambda seed: _rewrite_calls(seed, _einsum),
    "tensordot": lambda seed: _rewrite_calls(seed, _tensordot),
    "relu-maximum": lambda seed: _rewrite_calls(seed, _relu_maximum),
    "logsumexp": lambda seed: _rewrite_calls(seed, _logsumexp),
    "rsqrt": _rsqrt,
    "float64": _float64,
    "tf-function": _tf_function,
}


def variants_of(seed: Seed) -> list[Variant]:
    """Every correct variant that applies to ``seed``."""
    found = []
    for name, rewrite in VARIANT_REWRITES.items():
        code = rewrite(seed)
        if code is not None:
            found.append(Variant(seed.name, name, dict(seed.options), code))
    return [*found, *_mask_variants(seed)]


# -- equivalence: seed and rewrite side by side in float64, in a TensorFlow process -------------

REGIMES = (
    "standard normal",
    "x10",
    "x100",
    "x10, opposite offsets",
    "near-zero variance rows",
    "weights x10",
)
"""Inputs as drawn; scaled; scaled and offset by +30 and -30 in turn (attention logits all far
below zero, where a mask value of -100 stops hiding); rows of variance 1e-8 (where ε
matters); then the weights scaled instead (a pre-LN block's FFN sees large values only so)."""
RELATIVE = 1e-9


def _scaled(arrays: Mapping[str, Any], regime: str) -> dict[str, Any]:
    """The inputs of ``regime``; tied inputs (self-attention's q = k = v) stay tied, except
    under opposite offsets, which both sides of a comparison get alike all the same."""
    result = {}
    for index, (name, array) in enumerate(arrays.items()):
        if regime == "x10, opposite offsets":
            result[name] = 10.0 * array + (30.0 if index % 2 == 0 else -30.0)
        elif regime == "x10":
            result[name] = array * 10.0
        elif regime == "x100":
            result[name] = array * 100.0
        elif regime == "near-zero variance rows":
            levels = np.random.default_rng(7).standard_normal((*array.shape[:-1], 1))
            result[name] = levels + 1e-4 * array
        else:
            result[name] = array
    return result


def _weight_spread(regime: str) -> float:
    return 10.0 if regime == "weights x10" else 1.0


def _keep_mask(kind: str, b: int, n: int, m: int) -> Any:
    keep = np.ones((b, n, m), dtype=bool)
    if kind in {"padding", "both"}:
        for row in range(b):
            keep[row, :, max(1, m - 1 - row % max(1, m // 2)) :] = False
    if kind in {"causal", "both"}:
        keep &= np.tril(np.ones((n, m), dtype=bool), k=max(0, m - n))[None]
    return keep


class Program:
    """One block made ready to run in float64: its entry, arguments, and how to call it."""

    def __init__(self, options: Mapping[str, str], code: str) -> None:
        from formula_check.oracles import get_oracle
        from formula_check.planning import option_values
        from formula_check.planning.presets import PRESETS

        self.oracle = get_oracle(options["oracle"])
        preset = PRESETS.get(options.get("preset", ""), {})
        given = option_values.assignments(options["params"]) if "params" in options else {}
        self.params = {**self.oracle.params, **preset.get("params", {}), **given}
        dims = option_values.sizes(options["dims"]) if "dims" in options else {}
        self.sizes = self.oracle.resolve_dims(dims, self.params)
        own_init = option_values.assignments(options["init"]) if "init" in options else {}
        init = {**preset.get("init", {}), **own_init}
        self.init = {k: self.sizes.get(v, v) if isinstance(v, str) else v for k, v in init.items()}
        call = options.get("call")
        self.call = tuple(call.split()) if call else preset.get("call")
        self.kind = options.get("kind", preset.get("kind", "auto"))
        self.mask_kind = options.get("mask", "none")
        self.convention = options.get("mask_convention", preset.get("mask_convention", "additive"))
        mask_dims = options.get("mask_dims") or self.params.get("mask_dims")
        self.mask_dims = tuple(mask_dims.split()) if mask_dims else self.oracle.mask_dims
        self.source = re.sub(r"\b(tf|np)\.float32\b", r"\1.float64", code)
        self.source = self.source.replace("'float32'", "'float64'").replace(
            '"float32"', '"float64"'
        )
        self.entry_name = options.get("entry") or _last_definition(code)

    def mask(self) -> Any:
        if self.mask_kind == "none":
            return None
        named = [d for d in self.mask_dims if not d.isdigit()]
        b, n, m = (self.sizes[d] for d in named)
        keep = _keep_mask(self.mask_kind, b, n, m)
        keep = keep.reshape([1 if d.isdigit() else self.sizes[d] for d in self.mask_dims])
        if self.convention == "keep":
            return keep
        return (keep if self.convention == "keep-float" else ~keep).astype(np.float64)

    def arrays(self, regime: str) -> dict[str, Any]:
        rng = np.random.default_rng(20240)
        inputs = self.oracle.make_inputs(self.sizes, rng, self.params)
        weights = self.oracle.make_weights(self.sizes, rng)
        spread = _weight_spread(regime)
        return {**_scaled(inputs, regime), **{k: v * spread for k, v in weights.items()}}

    def outputs(self, regimes: Sequence[str]) -> dict[str, list[Any] | str]:
        """The block's returned values in each regime, as float64 arrays, or why it raised.

        The code is executed once and a layer built once, its weights set to seeded values
        (biases and gains away from zero and one), then called on every regime's inputs."""
        try:
            call = self._callable(regimes[0])
        except Exception as exc:  # the rewrite's own failure is the answer here
            return dict.fromkeys(regimes, _raised(exc))
        found: dict[str, list[Any] | str] = {}
        for regime in regimes:
            try:
                found[regime] = call(regime)
            except Exception as exc:
                found[regime] = _raised(exc)
        return found

    def _callable(self, first_regime: str) -> Callable[[str], list[Any]]:
        import inspect

        import tensorflow as tf

        tf.keras.utils.set_random_seed(1)
        namespace: dict[str, Any] = {"__name__": "formula_block"}
        exec(compile(self.source, "<formula block>", "exec"), namespace)
        entry = namespace[self.entry_name]
        kind = self.kind
        if kind == "auto":
            kind = "layer" if inspect.isclass(entry) else _function_kind(entry, self.init)
        mask = self.mask()
        mask = None if mask is None else tf.constant(mask)

        def arguments(regime: str) -> tuple[list[Any], dict[str, Any]]:
            arrays = {k: tf.constant(v, tf.float64) for k, v in self.arrays(regime).items()}
            return self._arguments(kind, arrays, mask)

        if kind == "function":
            return lambda regime: _flatten(_call(entry, *arguments(regime)))
        layer = entry(**self.init)
        _call(layer, *arguments(first_regime))  # builds the weights

        def run_layer(regime: str) -> list[Any]:
            rng = np.random.default_rng(99)
            for variable in layer.trainable_variables:
                shape = tuple(variable.shape)
                spread = 1.0 / np.sqrt(shape[0]) if len(shape) >= 2 else 0.5
                variable.assign(rng.standard_normal(shape) * spread * _weight_spread(regime))
            return _flatten(_call(layer, *arguments(regime)))

        return run_layer

    def _arguments(
        self, kind: str, arrays: Mapping[str, Any], mask: Any
    ) -> tuple[list[Any], dict[str, Any]]:
        if self.call is not None:
            args, kwargs = [], {}
            for word in self.call:
                key, sep, value = word.partition("=")
                if sep:
                    kwargs[key] = self._word(value, arrays, mask)
                else:
                    args.append(self._word(word, arrays, mask))
            return args, kwargs
        args = [arrays[spec.name] for spec in self.oracle.inputs]
        if kind == "function":
            args += [self.sizes[name] for name in self.oracle.size_args]
            args += [arrays[spec.name] for spec in self.oracle.weights]
        return args, ({} if mask is None else {"mask": mask})

    def _word(self, word: str, arrays: Mapping[str, Any], mask: Any) -> Any:
        literals = {"true": True, "false": False, "none": None}
        if word in arrays:
            return arrays[word]
        if word in self.sizes:
            return self.sizes[word]
        if word == "mask":
            return mask
        if word.lower() in literals:
            return literals[word.lower()]
        return int(word) if word.lstrip("-").isdigit() else float(word)


def _call(function: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``function(*args, **kwargs)``, stopped after 60 s (a rewrite may loop)."""
    import signal

    def too_long(signum: int, frame: Any) -> None:
        raise TimeoutError("ran over 60 s")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(60)
    try:
        return function(*args, **kwargs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _raised(exc: BaseException) -> str:
    return f"raises {type(exc).__name__}: {short(str(exc), 80)}"


def _last_definition(code: str) -> str:
    names = [
        n.name
        for n in ast.parse(code).body
        if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
    ]
    if not names:
        raise ValueError("the snippet defines no function or class: give entry=")
    return names[-1]


def _function_kind(entry: Callable[..., Any], init: Mapping[str, Any]) -> str:
    import inspect

    if init:
        return "factory"
    parameters = inspect.signature(entry).parameters.values()
    required = [
        p
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind in {inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD}
    ]
    return "function" if required else "factory"


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return [array for key in sorted(value) for array in _flatten(value[key])]
    if isinstance(value, list | tuple):
        return [array for item in value for array in _flatten(item)]
    return [np.asarray(value, dtype=np.float64)]


def disagreement(expected: Sequence[Any], actual: Sequence[Any]) -> str | None:
    """Why ``actual`` is not ``expected`` to 1e-9 relative (NaN and Inf where they are), or None."""
    if len(expected) != len(actual):
        return f"returns {len(actual)} values instead of {len(expected)}"
    for index, (a, b) in enumerate(zip(expected, actual, strict=True)):
        if a.shape != b.shape:
            return f"value {index}: shape {b.shape} instead of {a.shape}"
        special_a, special_b = ~np.isfinite(a), ~np.isfinite(b)
        same_special = np.array_equal(special_a, special_b) and np.array_equal(
            a[special_a], b[special_b], equal_nan=True
        )
        if not same_special:
            return f"value {index}: NaN or Inf elsewhere"
        finite = np.isfinite(a)
        gap = np.max(np.abs(a[finite] - b[finite]), initial=0.0)
        allowed = RELATIVE * (1.0 + np.max(np.abs(a[finite]), initial=0.0))
        if gap > allowed:
            return f"value {index}: differs by {gap:.3g}"
    return None


def judge_equivalence(job: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """For each program of ``job``: is it equivalent to its seed, and if not, why."""

    def outputs(options: Mapping[str, str], code: str) -> dict[str, list[Any] | str]:
        program = Program(options, code)
        unvaried = not program.oracle.inputs and not program.oracle.weights
        return program.outputs(REGIMES[:1] if unvaried else REGIMES)

    references = {
        name: outputs(seed["options"], seed["code"]) for name, seed in job["seeds"].items()
    }
    verdicts = {}
    for key, program in job["programs"].items():
        reference = references[program["seed"]]
        broken = [r for r, value in reference.items() if isinstance(value, str)]
        if broken:
            verdicts[key] = {"equivalent": None, "reason": f"the seed {reference[broken[0]]}"}
            continue
        verdicts[key] = {"equivalent": True, "reason": ""}
        for regime, value in outputs(program["options"], program["code"]).items():
            reason = value if isinstance(value, str) else disagreement(reference[regime], value)
            if reason is not None:
                verdicts[key] = {"equivalent": False, "reason": f"{regime}: {reason}"}
                break
    return verdicts


def start_equivalence(job: Mapping[str, Any], folder: Path) -> subprocess.Popen[bytes]:
    """:func:`judge_equivalence` in a process of its own (TensorFlow in float64 mode)."""
    (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, __file__, "--equivalence", str(folder)]
    with (folder / "equivalence.log").open("w", encoding="utf-8") as log:
        # A file, not a pipe: nobody reads a pipe while the checker runs, and a full one stalls.
        return subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)


def _equivalence_main(folder: Path) -> int:
    import tensorflow as tf

    tf.keras.backend.set_floatx("float64")
    tf.get_logger().setLevel("ERROR")  # AutoGraph cannot read exec'd source: it says so, often
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    verdicts = judge_equivalence(job)
    (folder / "equivalence.json").write_text(json.dumps(verdicts), encoding="utf-8")
    return 0


# -- the checker: every block in one temporary project, one `formula-check check` --------------


@dataclass(frozen=True)
class Block:
    """A formula block on a page of the temporary project."""

    block_id: str
    page: str
    options: Mapping[str, str]
    latex: str
    code: str

    def markdown(self) -> str:
        header = render_options({**self.options, "id": self.block_id})
        return f"```formula {header}\n{self.latex}\n```\n\n```python\n{self.code.rstrip()}\n```\n"


_SITE = """site_name: mutation suite
plugins:
  - formula-check:
      timeout: 60
"""
_PAGE_DEFAULTS = "---\nformula_check:\n  timing: off\n  heatmaps: none\n---\n\n"


@dataclass(frozen=True)
class Verdict:
    """What the checker said about one block."""

    status: str
    detail: str
    formula: str | None = None
    """The formula's state (``agrees``, ``differs``, ...), or None where it was not compiled."""
    code_failed: bool = False
    """Whether an output the code returned was out of tolerance (on any input, in any mode)."""


def _verdict(block: Mapping[str, Any]) -> Verdict:
    formula = block.get("formula")
    state = None if formula is None else str(formula["state"])
    failed = any(not compared["ok"] for compared in block.get("verdicts", ()))
    return Verdict(block["status"], block["detail"], state, failed)


def start_checker(blocks: Sequence[Block], folder: Path, workers: int) -> subprocess.Popen[str]:
    """``formula-check check --json`` on a project holding ``blocks``, started in the background."""
    (folder / "mkdocs.yml").write_text(_SITE, encoding="utf-8")
    pages: dict[str, list[str]] = {}
    for block in blocks:
        pages.setdefault(block.page, []).append(block.markdown())
    for page, texts in pages.items():
        path = folder / "docs" / page
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_PAGE_DEFAULTS + "\n".join(texts), encoding="utf-8")
    command = [sys.executable, "-m", "formula_check.faces.cli", "check", str(folder / "mkdocs.yml")]
    command += ["--no-timing", "--no-cache", "--keep-alive", "0", "--workers", str(workers)]
    command += ["--json", str(folder / "report.json")]
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen(
        command,
        cwd=folder,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_checker(process: subprocess.Popen[str], folder: Path) -> dict[str, Verdict]:
    """Each block's verdict, by id, once the run has ended; a run that could not happen raises."""
    output, _ = process.communicate()
    if process.returncode not in {0, 1} or not (folder / "report.json").is_file():
        tail = "\n".join(output.splitlines()[-20:])
        raise RuntimeError(f"formula-check exited with {process.returncode}:\n{tail}")
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    return {b["id"]: _verdict(b) for b in report["blocks"]}


# -- the suite ----------------------------------------------------------------------------------


@dataclass
class Suite:
    """What one run checks: the mutants (at one seed value) and the correct blocks (at all)."""

    seeds: list[Seed]
    mutants: list[Mutant]
    variants: list[Variant]
    seed_values: list[int]
    blocks: list[Block] = field(default_factory=list)
    mutant_ids: dict[str, Mutant] = field(default_factory=dict)
    correct_ids: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    """block id -> (seed, variant name or "seed", seed value)."""

    def __post_init__(self) -> None:
        by_name = {seed.name: seed for seed in self.seeds}
        first = self.seed_values[0]
        for number, mutant in enumerate(self.mutants):
            block_id = f"m{number:04d}"
            seed = by_name[mutant.seed]
            options = {**seed.options, "seed": str(first)}
            page = f"mutants/{mutant.seed}.md"
            self.blocks.append(Block(block_id, page, options, seed.latex, mutant.code))
            self.mutant_ids[block_id] = mutant
        for value in self.seed_values:
            for seed in self.seeds:
                self._correct(seed, "seed", seed.options, seed.code, value)
            for variant in self.variants:
                seed = by_name[variant.seed]
                self._correct(seed, variant.name, variant.options, variant.code, value)

    def _correct(
        self, seed: Seed, name: str, options: Mapping[str, str], code: str, value: int
    ) -> None:
        block_id = f"c{value}-{seed.name}-{name}"
        page = f"correct/seed-{value}.md"
        self.blocks.append(Block(block_id, page, {**options, "seed": str(value)}, seed.latex, code))
        self.correct_ids[block_id] = (seed.name, name, value)

    def equivalence_job(self) -> dict[str, Any]:
        seeds = {s.name: {"options": dict(s.options), "code": s.code} for s in self.seeds}
        programs = {
            block_id: {"seed": m.seed, "options": seeds[m.seed]["options"], "code": m.code}
            for block_id, m in self.mutant_ids.items()
        }
        for variant in self.variants:
            key = f"variant:{variant.seed}:{variant.name}"
            programs[key] = {"seed": variant.seed, "options": variant.options, "code": variant.code}
        return {"seeds": seeds, "programs": programs}


def run_suite(suite: Suite, workers: int = 2) -> dict[str, Any]:
    """Check every block and judge every rewrite (both at once); the findings as one document."""
    with tempfile.TemporaryDirectory(prefix="formula-mutants-") as temporary:
        folder = Path(temporary)
        (folder / "project").mkdir()
        started = time.perf_counter()
        judging = start_equivalence(suite.equivalence_job(), folder)
        try:
            checking = start_checker(suite.blocks, folder / "project", workers)
            verdicts = read_checker(checking, folder / "project")
            judging.wait()
        finally:
            if judging.poll() is None:
                judging.kill()
                judging.wait()
        if judging.returncode != 0:
            log = (folder / "equivalence.log").read_text(encoding="utf-8", errors="replace")
            raise RuntimeError(f"the equivalence process failed:\n{log[-3000:]}")
        equivalence = json.loads((folder / "equivalence.json").read_text(encoding="utf-8"))
        seconds = time.perf_counter() - started
    return findings(suite, verdicts, equivalence, seconds)


def findings(
    suite: Suite,
    verdicts: Mapping[str, Verdict],
    equivalence: Mapping[str, Mapping[str, Any]],
    seconds: float,
) -> dict[str, Any]:
    """Every mutant and correct block with its verdicts, and the counts the summary prints."""
    mutants = []
    for block_id, mutant in suite.mutant_ids.items():
        verdict = verdicts.get(block_id, Verdict("missing", "not in the report"))
        judged = equivalence.get(block_id, {"equivalent": None, "reason": "not judged"})
        mutants.append(
            {
                "id": block_id,
                **asdict(mutant),
                "where": mutant.where,
                "equivalent": judged["equivalent"],
                "equivalence_reason": judged["reason"],
                "status": verdict.status,
                "detail": verdict.detail,
            }
        )
    bad_variants = {
        (key.split(":")[1], key.split(":")[2]): judged["reason"]
        for key, judged in equivalence.items()
        if key.startswith("variant:") and judged["equivalent"] is not True
    }
    correct = []
    for block_id, (seed, name, value) in suite.correct_ids.items():
        verdict = verdicts.get(block_id, Verdict("missing", "not in the report"))
        correct.append(
            {
                "id": block_id,
                "seed": seed,
                "variant": name,
                "seed_value": value,
                "status": verdict.status,
                "detail": verdict.detail,
                "not_equivalent": bad_variants.get((seed, name)),
            }
        )
    return {
        "seed_values": suite.seed_values,
        "seconds": round(seconds, 1),
        "summary": summarise(mutants, correct),
        "mutants": mutants,
        "correct": correct,
    }


def summarise(mutants: Sequence[Mapping[str, Any]], correct: Sequence[Mapping[str, Any]]) -> dict:
    """The counts: equivalent, killed (by status), survived, the ratio, and false alarms."""
    judged = [m for m in mutants if m["equivalent"] is not None]
    different = [m for m in judged if not m["equivalent"]]
    killed = Counter(m["status"] for m in different if m["status"] != "verified")
    valid = [c for c in correct if c["not_equivalent"] is None]
    return {
        "mutants": len(mutants),
        "unjudged": len(mutants) - len(judged),
        "equivalent": len(judged) - len(different),
        "killed": sum(killed.values()),
        "killed_by_status": dict(sorted(killed.items())),
        "survived": sum(m["status"] == "verified" for m in different),
        "kill_ratio": sum(killed.values()) / len(different) if different else None,
        "correct_blocks": len(valid),
        "false_alarms": sum(c["status"] != "verified" for c in valid),
        "equivalent_rejected": sum(m["equivalent"] and m["status"] != "verified" for m in judged),
        "variants_not_equivalent": len(correct) - len(valid),
    }


def _false_alarms(correct: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per correct seed or variant the checker rejected, with the seed values."""
    failed: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for block in correct:
        if block["not_equivalent"] is None and block["status"] != "verified":
            failed.setdefault((block["seed"], block["variant"]), []).append(block)
    lines = []
    for (seed, variant), blocks in failed.items():
        values = ",".join(str(b["seed_value"]) for b in blocks)
        first = blocks[0]
        lines.append(
            f"  {seed + ' ' + variant:<40} seed={values:<12} {first['status']}: "
            f"{short(first['detail'], 100)}"
        )
    return lines


def print_findings(report: Mapping[str, Any], out: Any = sys.stdout) -> None:
    """The counts and the ratio, then every survivor, equivalent mutant and false alarm."""
    summary, mutants = report["summary"], report["mutants"]
    values = ", ".join(map(str, report["seed_values"]))

    def say(text: str) -> None:
        print(text, file=out)

    def mutant_line(m: Mapping[str, Any], tail: str) -> str:
        return f"  {m['where']:<36} {m['operator']:<14} {m['description']:<30} {tail}"

    say(f"mutants at seed={report['seed_values'][0]}; seeds and variants at seed={values}")
    say(f"  mutants:      {summary['mutants']} ({report['seconds']} s)")
    say(f"  equivalent:   {summary['equivalent']} (left out of the ratio)")
    statuses = ", ".join(f"{s} {n}" for s, n in summary["killed_by_status"].items())
    say(f"  killed:       {summary['killed']} ({statuses})")
    say(f"  survived:     {summary['survived']}")
    if summary["kill_ratio"] is not None:
        denominator = summary["killed"] + summary["survived"]
        say(f"  kill ratio:   {summary['killed']}/{denominator} = {summary['kill_ratio']:.1%}")
    if summary["unjudged"]:
        say(f"  not judged:   {summary['unjudged']} (their seed did not run in float64)")
    say(f"  false alarms: {summary['false_alarms']} of {summary['correct_blocks']} correct blocks")
    survivors = [m for m in mutants if m["equivalent"] is False and m["status"] == "verified"]
    say(f"survivors ({len(survivors)}):")
    for m in survivors:
        say(mutant_line(m, f"`{short(m['source_line'], 56)}`"))
    equivalents = [m for m in mutants if m["equivalent"]]
    say(f"equivalent mutants ({len(equivalents)}; the checker's verdict on each):")
    for m in equivalents:
        say(
            mutant_line(
                m,
                m["status"] + ("" if m["status"] == "verified" else ": " + short(m["detail"], 70)),
            )
        )
    alarms = _false_alarms(report["correct"])
    say(f"false alarms on correct seeds and variants ({len(alarms)} kinds):")
    for line in alarms:
        say(line)
    broken = {(c["seed"], c["variant"]): c["not_equivalent"] for c in report["correct"]}
    broken = {key: reason for key, reason in broken.items() if reason}
    if broken:
        say(f"variants this script got wrong, left out ({len(broken)}):")
        for (seed, variant), reason in broken.items():
            say(f"  {seed} {variant}: {reason}")
    errors = Counter(
        re.split(r"[ :(]", m["detail"], maxsplit=1)[0] for m in mutants if m["status"] == "error"
    )
    if errors:
        kinds = ", ".join(f"{kind} {count}" for kind, count in errors.most_common())
        say(f"mutants killed by an error, by exception: {kinds}")


# -- the trust corpus: wrongs that look right, each beside its correct twin -----------------------

TRUST_VERDICTS = ("verified", "mismatch", "formula-mismatch", "not-checked", "error")
_WRONG = frozenset({"mismatch", "formula-mismatch", "error"})
_PASSING = frozenset({"verified", "not-checked"})
"""What a build with default settings lets through: a formula left unchecked passes too."""
_TRUST_BLOCK = re.compile(
    r"^<!-- expect: (?P<expect>[\w-]+) -->\n+"
    r"```formula (?P<header>[^\n]*)\n(?P<latex>.*?)\n```\n.*?^```python\n(?P<code>.*?)^```$",
    re.DOTALL | re.MULTILINE,
)
_FRONT_MATTER = re.compile(r"\A---\n(?P<body>.*?)\n---\n", re.DOTALL)


@dataclass(frozen=True)
class TrustBlock:
    """One block of the trust corpus: its case, what kind of slip it shows, the verdict it
    must get, and the block as the temporary project holds it."""

    case: str
    section: str
    kind: str
    expect: str
    line: int
    block: Block

    @property
    def where(self) -> str:
        """``s1_frozen_layer_ffn.md:13``: the block's formula fence in ``fixtures/trust/``, and
        ``seed=1`` where a seed value was given to it."""
        seed = self.block.options.get("seed")
        return f"{self.case}.md:{self.line}" + ("" if seed is None else f" seed={seed}")


def _front_matter(path: Path, text: str) -> dict[str, str]:
    found = _FRONT_MATTER.match(text)
    if found is None:
        raise ValueError(f"{path}: a trust case starts with a front matter (section, kind)")
    pairs = (line.partition(":") for line in found["body"].splitlines())
    fields = {key.strip(): value.strip() for key, _, value in pairs}
    if not {"section", "kind"} <= set(fields):
        raise ValueError(f"{path}: the front matter names the case's section and kind")
    return fields


def load_trust(folder: Path = TRUST_FOLDER) -> list[TrustBlock]:
    """Every block of every case in ``folder``, in file order; a formula fence without its
    stated verdict, or a verdict this script does not know, is an error."""
    blocks = []
    for path in sorted(folder.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        fields = _front_matter(path, text)
        found = list(_TRUST_BLOCK.finditer(text))
        if not found or len(found) != text.count("```formula "):
            raise ValueError(f"{path}: every formula block states its verdict just above it")
        for number, match in enumerate(found, start=1):
            if match["expect"] not in TRUST_VERDICTS:
                raise ValueError(f"{path}: unknown verdict {match['expect']!r}")
            options = parse_options(match["header"])
            if "id" in options:
                raise ValueError(f"{path}: block ids are set by the corpus, not by a case")
            line = text.count("\n", 0, match.start("header")) + 1
            block_id = f"{path.stem}-{number}"
            page = f"trust/{path.stem}.md"
            block = Block(block_id, page, options, match["latex"], match["code"])
            section, kind = fields["section"], fields["kind"]
            blocks.append(TrustBlock(path.stem, section, kind, match["expect"], line, block))
    return blocks


def observed(verdict: Verdict) -> str:
    """The checker's verdict in the corpus' words: a failing output is the code's mismatch; a
    formula that differs or does not compile, or that could not be checked where its block
    requires it (``formula="required"``), is the formula's; a formula the checker could not
    check on a block that passed is ``not-checked``."""
    if verdict.status in {"error", "timeout", "skipped", "missing"}:
        return verdict.status
    if verdict.code_failed:
        return "mismatch"
    if verdict.formula in {"differs", "invalid"}:
        return "formula-mismatch"
    if verdict.formula not in {None, "agrees"}:
        return "not-checked" if verdict.status == "verified" else "formula-mismatch"
    return "mismatch" if verdict.status == "mismatch" else "verified"


def trust_outcome(expect: str, got: str) -> str:
    """``right``; a ``false pass`` (a wrong block a default build lets through); a ``false
    alarm`` (a correct block that fails); or ``other`` (caught for another reason, or a
    correct formula left unchecked)."""
    if got == expect:
        return "right"
    if expect in _WRONG and got in _PASSING:
        return "false pass"
    if expect in _PASSING and got not in _PASSING:
        return "false alarm"
    return "other"


def run_trust(blocks: Sequence[TrustBlock], workers: int = 2) -> dict[str, Any]:
    """Check every block of ``blocks`` in one temporary project; each with its outcome."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="formula-trust-") as temporary:
        folder = Path(temporary)
        verdicts = read_checker(start_checker([b.block for b in blocks], folder, workers), folder)
    records = []
    for case in blocks:
        verdict = verdicts.get(case.block.block_id, Verdict("missing", "not in the report"))
        got = observed(verdict)
        records.append(
            {
                "id": case.block.block_id,
                "where": case.where,
                "section": case.section,
                "kind": case.kind,
                "expect": case.expect,
                "got": got,
                "outcome": trust_outcome(case.expect, got),
                "status": verdict.status,
                "formula": verdict.formula,
                "detail": verdict.detail,
            }
        )
    seconds = round(time.perf_counter() - started, 1)
    return {"seconds": seconds, "summary": trust_summary(records), "blocks": records}


def trust_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The counts: blocks, wrong blocks and correct ones, and each outcome, by section too."""
    outcomes = Counter(r["outcome"] for r in records)
    by_section: dict[str, Counter[str]] = {}
    for record in records:
        by_section.setdefault(record["section"], Counter())[record["outcome"]] += 1
    return {
        "blocks": len(records),
        "wrong": sum(r["expect"] in _WRONG for r in records),
        "correct": sum(r["expect"] in _PASSING for r in records),
        "right": outcomes["right"],
        "false_passes": outcomes["false pass"],
        "false_alarms": outcomes["false alarm"],
        "other": outcomes["other"],
        "by_section": {key: dict(sorted(c.items())) for key, c in sorted(by_section.items())},
    }


def print_trust(report: Mapping[str, Any], out: Any = sys.stdout) -> None:
    """The counts, the corpus by kind, then every block that did not get its verdict."""
    summary, records = report["summary"], report["blocks"]

    def say(text: str) -> None:
        print(text, file=out)

    say(f"trust corpus: {summary['blocks']} blocks ({report['seconds']} s)")
    say(f"  wrong blocks:   {summary['wrong']}, correct blocks: {summary['correct']}")
    say(f"  right:          {summary['right']}")
    say(f"  false passes:   {summary['false_passes']}")
    say(f"  false alarms:   {summary['false_alarms']}")
    say(f"  other:          {summary['other']}")
    kinds = Counter((r["section"], r["kind"]) for r in records)
    say("by kind (section kind: blocks):")
    for (section, kind), count in sorted(kinds.items()):
        say(f"  §{section} {kind:<34} {count}")
    missed = [r for r in records if r["outcome"] != "right"]
    say(f"not as stated ({len(missed)}):")
    for r in missed:
        say(
            f"  {r['outcome']:<11} §{r['section']} {r['where']:<36} expected {r['expect']}, "
            f"got {r['got']}: {short(r['detail'], 90)}"
        )


# -- command line ------------------------------------------------------------------------------


def seed_values(text: str) -> list[int]:
    """``0..9`` (inclusive) or ``0,3,7`` -> a list of seed values."""
    first, sep, last = text.partition("..")
    values = list(range(int(first), int(last) + 1)) if sep else [int(v) for v in text.split(",")]
    if not values:
        raise argparse.ArgumentTypeError(f"no seed values in {text!r}")
    return values


def quick_sample(mutants: Sequence[Mutant], stride: int = 5) -> list[Mutant]:
    """Every ``stride``-th mutant, plus every known survivor class."""
    chosen = {id(m) for m in mutants[::stride]} | {id(m) for m in known_survivors(mutants)}
    return [m for m in mutants if id(m) in chosen]


def build_suite(values: Sequence[int], quick: bool = False) -> Suite:
    """The seeds of ``fixtures/mutants``, their mutants and variants, ready to run."""
    seeds = load_seeds()
    mutants = [m for seed in seeds for m in mutants_of(seed)]
    variants = [v for seed in seeds for v in variants_of(seed)]
    if quick:
        mutants = quick_sample(mutants)
    return Suite(seeds, mutants, variants, list(values))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_values, default=None, help="e.g. 0..9 or 0,4")
    parser.add_argument("--quick", action="store_true", help="a sample of mutants, seeds 0..2")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every finding as JSON")
    parser.add_argument("--workers", type=int, default=2, help="checker worker processes")
    parser.add_argument("--trust", action="store_true", help="the trust corpus alone")
    parser.add_argument("--equivalence", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.equivalence is not None:
        return _equivalence_main(args.equivalence)
    if args.trust:
        return _trust_main(args.json, args.workers, args.seeds)
    values = args.seeds or (seed_values("0..2") if args.quick else seed_values("0..9"))
    suite = build_suite(values, quick=args.quick)
    print(
        f"{len(suite.seeds)} seeds, {len(suite.mutants)} mutants, {len(suite.variants)} variants: "
        f"{len(suite.blocks)} blocks to check",
        file=sys.stderr,
    )
    report = run_suite(suite, args.workers)
    if args.json is not None:
        args.json.write_text(
            json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    print_findings(report)
    return 0


def at_seeds(blocks: Sequence[TrustBlock], values: Sequence[int]) -> list[TrustBlock]:
    """Each block at each seed value (the ``seed=`` header option): ``<case>-<n>-s<value>``."""
    seeded = []
    for value in values:
        for case in blocks:
            block = case.block
            options = {**block.options, "seed": str(value)}
            block_id = f"{block.block_id}-s{value}"
            again = Block(block_id, block.page, options, block.latex, block.code)
            seeded.append(replace(case, block=again))
    return seeded


def _trust_main(json_path: Path | None, workers: int, values: Sequence[int] | None) -> int:
    blocks = load_trust()
    if values is not None:
        blocks = at_seeds(blocks, values)
    print(f"{len(blocks)} blocks of {len({b.case for b in blocks})} cases", file=sys.stderr)
    report = run_trust(blocks, workers)
    if json_path is not None:
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        json_path.write_text(text, encoding="utf-8")
    print_trust(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
