"""One result cache shared by CI runners: entries written by different machines, in
different checkouts, copied over one another, give only right hits."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from formula_check.model import Location, Status
from formula_check.project.loading import load_project, read_blocks
from formula_check.results import CheckResult, SnippetFailure
from formula_check.store.cache import PROJECT_FOLDER, ResultCache, cache_key
from formula_check.store.read_stamps import Inputs
from sites import softmax_site
from support import spec_for

TF = "tensorflow-cpu==2.21.0"
HELPER = "def scale(x):\n    return x\n"


def checkout(root: Path) -> Path:
    """A copy of one small project, as a runner checks it out: a page with a ``code=`` block
    and a helper module the snippet imports."""
    softmax_site(root, pages=1, blocks=2)
    (root / "snippets").mkdir()
    (root / "snippets" / "helper.py").write_text(HELPER, encoding="utf-8")
    (root / "docs" / "filed.md").write_text(
        '```formula id="filed" oracle="softmax" code="snippets/helper.py:scale"\n'
        "\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}\n```\n",
        encoding="utf-8",
    )
    return root


def keys(root: Path) -> list[str]:
    project = load_project(root / "mkdocs.yml")
    specs = [
        block.spec
        for page in sorted((root / "docs").glob("*.md"))
        for block in read_blocks(page, project, project.settings())
    ]
    assert all(spec is not None for spec in specs)
    return [cache_key(spec, TF) for spec in specs if spec is not None]


def failed(root: Path, block: str) -> CheckResult:
    """A failure whose texts name a file of the project by its absolute path, as a snippet's
    ``FileNotFoundError`` or its printed output do."""
    data = f"{root.resolve()}/data/weights.npy"
    return CheckResult(
        block,
        Location("docs/page000.md", 3),
        "softmax",
        Status.ERROR,
        failure=SnippetFailure("FileNotFoundError", f"No such file: '{data}'", None, ""),
        stdout=f"loading {data}\n",
    )


def test_a_block_has_the_same_key_in_every_checkout(tmp_path: Path) -> None:
    first, second = checkout(tmp_path / "runner-1" / "site"), checkout(tmp_path / "b" / "x")
    assert keys(first) == keys(second)
    assert len(set(keys(first))) == 3


def test_an_entry_written_in_another_checkout_is_a_hit_and_names_this_one(
    tmp_path: Path,
) -> None:
    first, second = checkout(tmp_path / "runner-1" / "site"), checkout(tmp_path / "b" / "x")
    spec = spec_for("softmax", "def f(x):\n    return x\n")
    ResultCache(first / ".cache", first).put(
        "ab" * 32, failed(first, "b"), Inputs(["snippets/helper.py"])
    )
    stored = next((first / ".cache").glob("*/*.fcr")).read_bytes()
    assert str(first).encode() not in stored
    assert json.dumps(f"{PROJECT_FOLDER}/data/weights.npy")[1:-1].encode() in stored
    shutil.copytree(first / ".cache", second / ".cache")
    hit = ResultCache(second / ".cache", second).get("ab" * 32, spec)
    assert hit is not None and hit.failure is not None
    assert hit.failure.message == f"No such file: '{second.resolve()}/data/weights.npy'"
    assert hit.stdout == f"loading {second.resolve()}/data/weights.npy\n"
    assert hit.imports == ("snippets/helper.py",)


def test_an_entry_whose_helper_differs_in_this_checkout_is_a_miss(tmp_path: Path) -> None:
    first, second = checkout(tmp_path / "one"), checkout(tmp_path / "two")
    (second / "snippets" / "helper.py").write_text(HELPER + "# edited\n", encoding="utf-8")
    spec = spec_for("softmax", "def f(x):\n    return x\n")
    ResultCache(first / ".cache", first).put(
        "ab" * 32, failed(first, "b"), Inputs(["snippets/helper.py"])
    )
    shutil.copytree(first / ".cache", second / ".cache")
    assert ResultCache(second / ".cache", second).get("ab" * 32, spec) is None


@pytest.mark.parametrize("order", ["first-over-second", "second-over-first"])
def test_caches_copied_over_one_another_give_only_right_hits(tmp_path: Path, order: str) -> None:
    """Two runners fill their own caches (one key in common, written by both); the CI merges
    them by copying one folder over the other. Every key then reads back as one of the
    results written for it, whichever copy won, and a file copied under another key's name
    is never served."""
    roots = [checkout(tmp_path / f"runner-{n}") for n in (1, 2)]
    spec = spec_for("softmax", "def f(x):\n    return x\n")
    written: dict[str, set[str]] = {}
    for n, root in enumerate(roots, 1):
        cache = ResultCache(root / ".cache", root)
        for key in (f"{n}{n}" * 32, "cc" * 32):
            result = failed(root, f"runner-{n}")
            cache.put(key, dataclasses.replace(result, elapsed=float(n)), Inputs())
            written.setdefault(key, set()).add(f"runner-{n}")
    source, target = roots if order == "first-over-second" else roots[::-1]
    shutil.copytree(source / ".cache", target / ".cache", dirs_exist_ok=True)
    cache = ResultCache(target / ".cache", target)
    for key, writers in written.items():
        hit = cache.get(key, spec)
        assert hit is not None and hit.failure is not None
        assert hit.failure.message.startswith(f"No such file: '{target.resolve()}/")
        assert hit.elapsed in {float(w[-1]) for w in writers}
    misplaced = target / ".cache" / "11" / f"{'11' * 32}.fcr"
    shutil.copyfile(target / ".cache" / "cc" / f"{'cc' * 32}.fcr", misplaced)
    assert ResultCache(target / ".cache", target).get("11" * 32, spec) is None
