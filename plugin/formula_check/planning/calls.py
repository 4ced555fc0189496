"""How a check calls the code: ``call=``'s words (or the oracle's inputs, sizes and weights
in order) as the positional and keyword arguments a worker passes, and a constructor's
``init=`` with dim names replaced by their sizes. Pure: no TensorFlow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formula_check.errors import SpecError
from formula_check.messages import Argument, Call, Calls
from formula_check.model import CheckSpec, Scalar, frozen_map
from formula_check.oracles import Oracle, get_oracle
from formula_check.planning.option_values import spoken_call

_LITERALS: dict[str, Scalar] = {"true": True, "false": False, "none": "__none__"}


def resolve_init(init: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    """Constructor arguments; a value that names a dim (``d_model``) becomes its size, in a
    list or tuple too (``[d_model, d_ff]``)."""

    def resolved(value: Any) -> Any:
        if isinstance(value, list | tuple):
            return type(value)(resolved(item) for item in value)
        return sizes[value] if isinstance(value, str) and value in sizes else value

    return {key: resolved(value) for key, value in init.items()}


def call_plans(
    spec: CheckSpec, oracle: Oracle, sizes: Mapping[str, int], *, has_mask: bool
) -> Calls:
    """How to call a function entry and a layer entry: positional and keyword references."""
    names = {t.name for t in oracle.inputs} | {t.name for t in oracle.weights} | set(sizes)
    if spec.call is not None:
        plan = _parse_call(spec, names | ({"mask"} if has_mask else set()), sizes)
        return Calls(plan, plan)
    mask_kw = frozen_map({"mask": Argument(array="in/mask")} if has_mask else {})
    inputs = [Argument(array=f"in/{t.name}") for t in oracle.inputs]
    size_args = [Argument(value=sizes[s]) for s in oracle.size_args]
    weights = [Argument(array=f"wt/{t.name}") for t in oracle.weights]
    return Calls(
        Call((*inputs, *size_args, *weights), mask_kw), Call((*inputs, *size_args), mask_kw)
    )


def _parse_call(spec: CheckSpec, names: set[str], sizes: Mapping[str, int]) -> Call:
    """``call=``'s words as a call; ``[...]`` and ``(...)`` (checked balanced when the header
    was read) become lists and tuples of arguments."""
    tokens = list(spec.call or ())
    at = 0

    def item() -> Argument:
        nonlocal at
        word = tokens[at]
        at += 1
        if word not in ("[", "("):
            return _reference(word, names, sizes, spec)
        items: list[Argument] = []
        while tokens[at] not in ("]", ")"):
            items.append(item())
        at += 1
        return Argument(items=tuple(items), sequence="list" if word == "[" else "tuple")

    args: list[Argument] = []
    kwargs: dict[str, Argument] = {}
    while at < len(tokens):
        token = tokens[at]
        key, sep, value = token.partition("=")
        if sep and not value:  # key=[...]: the bracket follows
            at += 1
            kwargs[key] = item()
        elif sep:
            at += 1
            kwargs[key] = _reference(value, names, sizes, spec)
        elif kwargs:
            raise SpecError(
                f"call: positional {spoken_call(_one_item(tokens, at))!r} after keyword arguments",
                spec.location,
            )
        else:
            args.append(item())
    return Call(tuple(args), frozen_map(kwargs))


def _one_item(tokens: list[str], at: int) -> list[str]:
    """The words of the argument that starts at ``at``: one word, or a bracket and its
    contents."""
    depth, end = 0, at
    for end in range(at, len(tokens)):
        depth += tokens[end] in ("[", "(")
        depth -= tokens[end] in ("]", ")")
        if depth == 0:
            break
    return tokens[at : end + 1]


def call_names(call: tuple[str, ...]) -> set[str]:
    """The names a ``call=`` passes, at any depth: ``x [memory mask]`` -> x, memory, mask."""
    words = (token.partition("=")[2] or token for token in call)
    return {word for word in words if word and word not in ("[", "]", "(", ")")}


def _reference(token: str, names: set[str], sizes: Mapping[str, int], spec: CheckSpec) -> Argument:
    if token in sizes:
        return Argument(value=sizes[token])
    if token == "mask":  # noqa: S105  (a call token, not a password)
        # the block's mask; None without one, as Keras' attention_mask=None means "no mask"
        return Argument(array="in/mask") if "mask" in names else Argument(value=None)
    if token in names:
        oracle = get_oracle(spec.oracle)
        is_weight = any(t.name == token for t in oracle.weights)
        return Argument(array=f"{'wt' if is_weight else 'in'}/{token}")
    if token.lower() in _LITERALS:
        value = _LITERALS[token.lower()]
        return Argument(value=None if value == "__none__" else value)
    try:
        return Argument(value=int(token))
    except ValueError:
        pass
    try:
        return Argument(value=float(token))
    except ValueError:
        known = ", ".join(sorted(names))
        raise SpecError(f"call: unknown name {token!r}; known: {known}", spec.location) from None
