"""Each correct example is written once, and every drift is an edit of its example's code.

Correct code has two homes: the mutation bench's seed pages (``fixtures/mutants/``) and
``tests/implementations.py``, which reads the seeds' code it checks from the pages. A second
copy, even renamed or laid out anew, would let the engine tests and the bench drift apart, so
a program is compared by its syntax tree with every name numbered in order of appearance.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import implementations
from drifts import DRIFTS
from implementations import CORRECT, SEED_CODE, load_mutation_bench

SEED_PAGES = sorted(load_mutation_bench().SEED_FOLDER.glob("*.md"))


class _NumberedNames(ast.NodeTransformer):
    """Every name a program chooses (variables, arguments, functions, classes) made ``n0``,
    ``n1``, ... in order of first appearance; docstrings dropped. Attributes and keywords
    stay: they name the library's API, not the writer's choice."""

    def __init__(self) -> None:
        self.numbers: dict[str, str] = {}

    def _number(self, name: str) -> str:
        return self.numbers.setdefault(name, f"n{len(self.numbers)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._number(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._number(node.arg)
        return node

    def _definition(self, node: ast.FunctionDef | ast.ClassDef) -> ast.AST:
        node.name = self._number(node.name)
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            node.body = node.body[1:] or [ast.Pass()]
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._definition(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return self._definition(node)


def program(code: str) -> str:
    """``code``'s syntax tree, whatever its names, layout, comments and docstrings."""
    return ast.dump(_NumberedNames().visit(ast.parse(code)))


def test_no_correct_example_is_written_twice() -> None:
    written = {code: f"seed {name}" for name, code in SEED_CODE.items()}
    for case, (_, source, _) in CORRECT.items():
        written.setdefault(source, f"case {case}")  # a seed's code, or one shared by cases
    places = defaultdict(list)
    for code, where in written.items():
        places[program(code)].append(where)
    assert [found for found in places.values() if len(found) > 1] == []


def test_seed_code_is_written_in_one_page_and_read_everywhere_else() -> None:
    texts = [page.read_text(encoding="utf-8") for page in SEED_PAGES]
    texts.append(Path(implementations.__file__).read_text(encoding="utf-8"))
    for name, code in SEED_CODE.items():
        assert sum(code in text for text in texts) == 1, name


def test_every_drift_edits_its_examples_code_in_one_place() -> None:
    for name, (case, old, _, _) in DRIFTS.items():
        assert CORRECT[case][1].count(old) == 1, name
