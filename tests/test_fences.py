"""Header tokenising, option validators, page scanning and spec building (pure: no TF)."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown import Markdown
from mkdocs.utils.meta import get_data

from formula_check.errors import SnippetError, SpecError
from formula_check.faces import cli
from formula_check.model import Location, Status
from formula_check.pages import fences
from formula_check.pages.blocks import (
    PageBlock,
    Settings,
    build_spec,
    default_id,
    front_matter_lines,
    page_blocks,
    source_blocks,
)
from formula_check.pages.fence_scan import find_formulas, scan_fences
from formula_check.planning import option_values
from formula_check.results import CheckResult, SnippetFailure
from formula_check.session.options import Options

HERE = Location("docs/page.md", 7)


# -- parse_header ------------------------------------------------------------------------------


def test_header_accepts_double_single_and_bare_values() -> None:
    header = """ id="sdpa" oracle='attention'  seed=3 dims="b=2 n=5" """
    assert fences.parse_header(header, HERE) == {
        "id": "sdpa",
        "oracle": "attention",
        "seed": "3",
        "dims": "b=2 n=5",
    }


def test_header_empty_is_no_options() -> None:
    assert fences.parse_header("   ", HERE) == {}


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ('id="sdpa" oracle="attention', "malformed formula header near 'oracle=\"attention'"),
        ("perturb", "malformed formula header near 'perturb'"),
        ('id="a" id="b"', "option 'id' is given twice"),
    ],
)
def test_header_errors_name_the_line(header: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        fences.parse_header(header, HERE)
    assert caught.value.message.startswith(message)
    assert str(caught.value).startswith("docs/page.md:7: ")


# -- validators --------------------------------------------------------------------------------


def test_sizes() -> None:
    assert option_values.sizes("b=2 n=5, d_k=16") == {"b": 2, "n": 5, "d_k": 16}
    with pytest.raises(ValueError, match="size of n must be a positive whole number, got '0'"):
        option_values.sizes("n=0")
    with pytest.raises(ValueError, match="expected name=value pairs separated by spaces, got 'b'"):
        option_values.sizes("b")
    with pytest.raises(ValueError, match="b given twice"):
        option_values.sizes("b=1 b=2")


def test_assignments_type_their_values() -> None:
    assert option_values.assignments("d_model=d_model num_heads=4 rate=0.1 use_bias=false") == {
        "d_model": "d_model",
        "num_heads": 4,
        "rate": 0.1,
        "use_bias": False,
    }


def test_weight_map() -> None:
    assert option_values.weight_map("W_q=wq.kernel b=layers[0].bias") == {
        "W_q": "wq.kernel",
        "b": "layers[0].bias",
    }
    with pytest.raises(ValueError, match=r"weight path 'wq\.\.kernel' must look like"):
        option_values.weight_map("W_q=wq..kernel")


def test_words_and_returns() -> None:
    assert option_values.words("q k v mask=mask") == ("q", "k", "v", "mask=mask")
    assert option_values.returns("output _") == ("output", "_")
    with pytest.raises(ValueError, match="'2x' is not an output name"):
        option_values.returns("output 2x")
    with pytest.raises(ValueError, match="expected at least one word"):
        option_values.words(" ")


def test_numbers_and_booleans() -> None:
    assert option_values.number("1e-5") == 1e-5
    assert option_values.integer("3") == 3
    assert option_values.boolean("off") is False
    assert option_values.boolean("Yes") is True
    with pytest.raises(ValueError, match="expected a number such as 1e-5"):
        option_values.number("tiny")
    with pytest.raises(ValueError, match="expected a number >= 0"):
        option_values.number("-1")
    with pytest.raises(ValueError, match="expected a positive number"):
        option_values.number("0", positive=True)
    with pytest.raises(ValueError, match="expected a whole number >= 0"):
        option_values.integer("-2")
    with pytest.raises(ValueError, match="expected true or false"):
        option_values.boolean("maybe")


def test_choice_suggests_the_near_miss() -> None:
    validate = option_values.choice("none", "padding", "causal", "both")
    assert validate("causal") == "causal"
    with pytest.raises(
        ValueError, match="expected one of none, padding, causal, both; did you mean 'causal'"
    ):
        validate("casual")


def test_heatmaps_timing_sweep() -> None:
    assert option_values.heatmaps("none") == ()
    assert option_values.heatmaps("weights hidden") == ("weights", "hidden")
    with pytest.raises(ValueError, match="unknown heatmap 'weight'; did you mean 'weights'"):
        option_values.heatmaps("weight")
    assert option_values.timing("off") == (False, 1, 0)  # 0: no repeats stated
    assert option_values.timing("warmup=2") == (True, 2, 0)
    assert option_values.timing("repeats=7 warmup=2") == (True, 2, 7)
    with pytest.raises(ValueError, match="unknown timing setting 'repeat'"):
        option_values.timing("repeat=7")
    assert option_values.sweep("64 128 256") == (64, 128, 256)
    with pytest.raises(ValueError, match="expected positive whole numbers"):
        option_values.sweep("64 big")


def test_ids_and_names() -> None:
    assert option_values.block_id("sdpa-2.b") == "sdpa-2.b"
    assert option_values.block_id("注意力") == "注意力"
    with pytest.raises(ValueError, match="expected letters, digits"):
        option_values.block_id("a b")
    with pytest.raises(ValueError, match="expected a name"):
        option_values.name("2x")


def test_oracle_name_knows_the_catalog() -> None:
    assert option_values.oracle_name("attention") == "attention"
    with pytest.raises(ValueError, match="unknown oracle 'atention'; did you mean 'attention'"):
        option_values.oracle_name("atention")


# -- parse_options and page defaults -----------------------------------------------------------


def test_parse_options_unknown_option_did_you_mean() -> None:
    with pytest.raises(SpecError) as caught:
        fences.parse_options({"oracel": "attention"}, HERE)
    assert str(caught.value) == "docs/page.md:7: unknown option 'oracel'; did you mean 'oracle'?"


def test_parse_options_bad_value_names_option_and_value() -> None:
    with pytest.raises(SpecError) as caught:
        fences.parse_options({"mask": "casual"}, HERE)
    assert caught.value.message.startswith("option mask='casual': expected one of")


def test_page_defaults_turn_yaml_into_header_text() -> None:
    meta = {"formula_check": {"timing": False, "dims": {"b": 2, "n": 5}, "sweep": [64, 128]}}
    assert fences.page_defaults(meta, HERE) == {
        "timing": "false",
        "dims": "b=2 n=5",
        "sweep": "64 128",
    }
    assert fences.page_defaults({"title": "x"}, HERE) == {}
    with pytest.raises(SpecError, match="must be a mapping"):
        fences.page_defaults({"formula_check": "atol=1"}, HERE)
    with pytest.raises(SpecError, match="cannot set 'id'"):
        fences.page_defaults({"formula_check": {"id": "x"}}, HERE)


# -- scanning pages ----------------------------------------------------------------------------

PAGE = """\
# Title

```formula id="a" oracle="softmax"
x
```

````markdown
```formula oracle="softmax"
an example of the syntax, not a block
```
````

```python
def f(x):
    return x
```

!!! note
    ```formula oracle="attention"
    y
    ```

    ```py
    def g(q, k, v):
        return q
    ```

```formula oracle="softmax"
z
```
"""


def test_scan_skips_fences_inside_longer_fences() -> None:
    fences = scan_fences(PAGE.split("\n"))
    assert [f.info.strip() for f in fences] == [
        'formula id="a" oracle="softmax"',
        "markdown",
        "python",
        'formula oracle="attention"',
        "py",
        'formula oracle="softmax"',
    ]


COMMENTED = """\
<!-- work in progress: not shown, so not checked
```formula id="hidden" oracle="softmax"
x
```

```python
def softmax(x):
    raise ValueError("never run")
```
-->

```formula id="shown" oracle="softmax"
x
```

A sentence <!-- that hides a fence
```python
def softmax(x):
    raise ValueError("never run either")
```
--> and goes on. A `<!--` in code, ``<!-- `x` -->`` too, and <!-- --> <!--> <!---> end.

```python
def softmax(x):
    return x
```

```markdown
<!-- an example of a comment, in a fence: opens nothing
```

```formula id="after" oracle="softmax"
x
```
"""


def test_fences_inside_an_html_comment_are_not_blocks() -> None:
    formulas = find_formulas(COMMENTED.split("\n"))
    assert [(f.header, f.line) for f in formulas] == [
        (' id="shown" oracle="softmax"', 12),
        (' id="after" oracle="softmax"', 32),
    ]
    assert formulas[0].snippet is not None
    assert formulas[0].snippet.body == "def softmax(x):\n    return x"
    # Long runs of backticks are read in one pass (a backreference took minutes on these).
    for run in ("a" + "`" * 100_000, "`x" * 50_000):
        lines = [run + " <!--", "```formula", "x", "```", "-->", "```formula", "y", "```"]
        assert [f.latex for f in find_formulas(lines)] == ["y"]


def test_find_formulas_pairs_snippets_and_counts_lines() -> None:
    formulas = find_formulas(PAGE.split("\n"), line_offset=10)
    assert [(f.line, f.index, f.latex) for f in formulas] == [
        (13, 1, "x"),
        (29, 2, "y"),
        (38, 3, "z"),
    ]
    assert formulas[0].snippet is not None
    assert formulas[0].snippet.body == "def f(x):\n    return x"
    assert formulas[1].snippet is not None
    assert formulas[1].snippet.body == "def g(q, k, v):\n    return q"  # dedented out of the note
    assert formulas[2].snippet is None


def test_page_blocks_specs_and_errors(tmp_path: Path) -> None:
    blocks = page_blocks(PAGE.split("\n"), page="docs/p.md", settings=Settings(tmp_path))
    first, second, third = blocks
    assert first.spec is not None
    assert first.spec.block_id == "a"
    assert first.spec.snippet.location == Location("docs/p.md", 13)
    assert first.spec.snippet.line_offset == 13
    assert second.spec is not None
    assert second.block_id == "p-2"
    assert third.spec is None
    assert third.error is not None
    assert third.error.message.startswith("no ```python fence follows this formula block")
    result = third.error_result()
    assert result.headline().startswith("docs/p.md:28 [p-3]: error: SpecError: no ```python fence")


def test_duplicate_ids_are_errors(tmp_path: Path) -> None:
    text = '```formula id="x" oracle="softmax"\na\n```\n```python\nf=1\n```\n' * 2
    blocks = page_blocks(text.split("\n"), page="docs/d.md", settings=Settings(tmp_path))
    assert blocks[0].spec is not None
    assert blocks[1].error is not None
    assert blocks[1].error.message == "duplicate id 'x' (first used at line 1)"


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ('id="soft<max>" oracle="softmax"', "d-1"),  # invalid: the default, not a piece
        ('id="sm" oracle="nope"', "sm"),  # valid, in a broken header: kept
        ("id=sm oracle=nope", "sm"),
        ("id='sm.2' seed=x oracle=softmax", "sm.2"),
    ],
)
def test_a_broken_block_keeps_only_a_valid_id(tmp_path: Path, header: str, shown: str) -> None:
    text = f"```formula {header}\na\n```\n```python\nf=1\n```"
    (block,) = page_blocks(text.split("\n"), page="docs/d.md", settings=Settings(tmp_path))
    assert block.error is not None
    assert block.block_id == shown


def test_front_matter_defaults_apply_and_block_wins(tmp_path: Path) -> None:
    text = '```formula oracle="softmax" seed=4\na\n```\n```python\nf=1\n```'
    meta = {"formula_check": {"seed": 9, "atol": "1e-4", "timing": "off"}}
    (block,) = page_blocks(
        text.split("\n"), page="docs/d.md", meta=meta, settings=Settings(tmp_path)
    )
    assert block.spec is not None
    assert (block.spec.seed, block.spec.atol, block.spec.timing.enabled) == (4, 1e-4, False)


def test_bad_front_matter_breaks_every_block_of_the_page(tmp_path: Path) -> None:
    text = '```formula oracle="softmax"\na\n```\n```python\nf=1\n```'
    meta = {"formula_check": {"mask": "casual"}}
    (block,) = page_blocks(
        text.split("\n"), page="docs/d.md", meta=meta, settings=Settings(tmp_path)
    )
    assert block.error is not None
    assert block.error.message.startswith("front matter formula_check: option mask='casual'")


def test_missing_oracle_and_unclosed_fence(tmp_path: Path) -> None:
    blocks = page_blocks(
        ["```formula", "a", "```", "", "```formula oracle='softmax'", "b"],
        page="p.md",
        settings=Settings(tmp_path),
    )
    assert blocks[0].error is not None
    assert blocks[0].error.message == 'formula block needs an oracle, e.g. oracle="attention"'
    assert blocks[1].error is not None
    assert blocks[1].error.message == "this formula fence is never closed"


def test_code_option_resolves_files_inside_the_project_only(tmp_path: Path) -> None:
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "sm.py").write_text("def f(x):\n    return x\n")
    formula = find_formulas(['```formula oracle="softmax" code="snippets/sm.py:f"', "a", "```"])[0]
    spec = build_spec(formula, {}, page="docs/p.md", line_offset=0, settings=Settings(tmp_path))
    assert (spec.snippet.origin, spec.snippet.entry) == ("file", "f")
    outside = find_formulas(['```formula oracle="softmax" code="../x.py:f"', "a", "```"])[0]
    with pytest.raises(SnippetError, match="outside the project"):
        build_spec(outside, {}, page="docs/p.md", line_offset=0, settings=Settings(tmp_path))


def test_site_settings_give_defaults(tmp_path: Path) -> None:
    formula = find_formulas(['```formula oracle="softmax"', "a", "```", "```python", "f=1", "```"])[
        0
    ]
    settings = Settings(tmp_path, timeout=12.0, timing=False)
    spec = build_spec(formula, {}, page="docs/p.md", line_offset=0, settings=settings)
    assert (spec.timeout, spec.timing.enabled) == (12.0, False)


def test_default_id_and_front_matter_offset() -> None:
    assert default_id("docs/guide/Scaled Attention.md", 2) == "scaled-attention-2"
    assert default_id("docs/注意力.md", 1) == "注意力-1"
    raw = "---\ntitle: x\n---\n\n# Body\n"
    assert front_matter_lines(raw, "# Body\n") == 4
    assert front_matter_lines("# Body\n", "# Body\n") == 0


def test_skip_and_mask_dims_reach_the_spec(tmp_path: Path) -> None:
    text = (
        '```formula id="s" oracle="multihead" skip="needs a GPU" mask="causal" mask_dims="b 1 n m"\n'
        "x\n```\n```python\nf = 1\n```\n"
    )
    [block] = page_blocks(text.split("\n"), page="docs/p.md", settings=Settings(tmp_path))
    assert block.spec is not None
    assert block.spec.skip == "needs a GPU"
    assert block.spec.params["mask_dims"] == "b 1 n m"


@pytest.mark.parametrize("value", ["1 1", "b 2 n m", "b n m k", "b n-1"])
def test_mask_dims_needs_one_to_three_named_axes(value: str) -> None:
    with pytest.raises(SpecError, match="axis names"):
        fences.parse_options({"mask_dims": value}, HERE)


# -- names inside option values -----------------------------------------------------------


def one_block(tmp_path: Path, header: str, meta: dict[str, object] | None = None) -> PageBlock:
    text = f"```formula {header}\nx\n```\n```python\ndef f(q, k, v):\n    return q\n```"
    (block,) = page_blocks(
        text.split("\n"), page="docs/d.md", meta=meta, settings=Settings(tmp_path)
    )
    return block


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (
            'oracle="attention" dims="b=2 dk=16"',
            "dims: 'dk' is not a dim of oracle 'attention' (known: b, d_k, d_v, m, n); "
            "did you mean 'd_k'?",
        ),
        (
            'oracle="attention" timing_dims="zz=4 n=9"',
            "timing_dims: 'zz' is not a dim of oracle 'attention'",
        ),
        ('oracle="attention" sweep="8 16" sweep_dim="nn"', "sweep_dim: 'nn' is not a dim"),
        (
            'oracle="layer_norm" params="epsilon=1e-3 epsilonn=5"',
            "params: 'epsilonn' is not a parameter of oracle 'layer_norm' (known: epsilon); "
            "did you mean 'epsilon'?",
        ),
        ('oracle="attention" params="axis=1"', "params: 'axis' is not a parameter of oracle "),
        (
            'oracle="ffn" weights="W_1=inner.kernel W_9=x"',
            "weights: 'W_9' is not a weight or parameter of oracle 'ffn' (known: W_1, W_2, b_1, b_2)",
        ),
    ],
)
def test_a_misspelt_name_inside_an_option_is_an_error(
    tmp_path: Path, header: str, message: str
) -> None:
    """A dim, parameter or weight the block's oracle does not have would be dropped, and the
    block checked at sizes (or with weights) nobody asked for: an error, never a verdict."""
    block = one_block(tmp_path, header)
    assert block.spec is None and block.error is not None
    assert block.error.message.startswith(message), block.error.message
    assert block.error.location == Location("docs/d.md", 1)


def test_names_a_block_may_use(tmp_path: Path) -> None:
    header = (
        'oracle="multihead" dims="b=2 h=2 d_model=8" timing_dims="n=9" sweep="8" sweep_dim="n" '
        'params="variant=self" weights="W_q=wq.kernel b_q=wq.bias"'
    )
    assert one_block(tmp_path, header).spec is not None
    # a layer's scalar attribute read back for a parameter
    assert one_block(tmp_path, 'oracle="layer_norm" weights="epsilon=norm.epsilon"').spec


def test_page_defaults_may_name_any_oracles_dims_but_not_unknown_ones(tmp_path: Path) -> None:
    """A page's defaults serve blocks of several oracles: a dim of another oracle is fine
    (it does not apply here), a dim of none is a typo."""
    known = one_block(tmp_path, 'oracle="softmax"', {"formula_check": {"dims": {"d_ff": 4}}})
    assert known.spec is not None and "d_ff" in known.spec.dims
    typo = one_block(tmp_path, 'oracle="softmax"', {"formula_check": {"dims": {"nn": 4}}})
    assert typo.error is not None
    assert typo.error.message.startswith(
        "front matter formula_check: dims: 'nn' is not a dim of any oracle"
    ), typo.error.message


def test_an_unknown_oracle_is_reported_as_such_not_as_unknown_names(tmp_path: Path) -> None:
    block = one_block(tmp_path, 'oracle="attentoin" dims="dk=3"')
    assert block.error is not None and "attentoin" in block.error.message


@pytest.mark.parametrize("body", ["", "   ", "\t"])
def test_an_empty_formula_is_an_error(tmp_path: Path, body: str) -> None:
    """With no LaTeX there is nothing to check the code against."""
    text = f'```formula oracle="softmax"\n{body}\n```\n```python\ndef f(x):\n    return x\n```'
    lines = text.replace("\n\n```\n", "\n```\n").split("\n") if not body else text.split("\n")
    (block,) = page_blocks(lines, page="docs/d.md", settings=Settings(tmp_path))
    assert block.spec is None and block.error is not None
    assert block.error.message.startswith("the formula block is empty")


@pytest.mark.parametrize(
    "snippet",
    [
        "def f(x):\n\treturn x\n",  # a tab
        "def f(x):\n    y = x\n    \n    return y\n",  # a line of spaces inside the code
        "def f(x):\n  \t  return x\n",
    ],
)
def test_a_page_is_scanned_as_python_markdown_reads_it(tmp_path: Path, snippet: str) -> None:
    """The blocks planned from the file before the build are the ones the page renders with
    (after Python-Markdown expands tabs): otherwise the block is checked and reported twice."""
    raw = f'---\ntitle: t\n---\n\n```formula oracle="softmax"\nx\n```\n\n```python\n{snippet}```\n'
    (planned,) = source_blocks(raw, page="docs/t.md", settings=Settings(tmp_path))
    markdown = get_data(raw)[0]
    rendered_lines = Markdown().preprocessors["normalize_whitespace"].run(markdown.split("\n"))
    offset = front_matter_lines(raw, markdown)
    (rendered,) = page_blocks(
        rendered_lines, page="docs/t.md", line_offset=offset, settings=Settings(tmp_path)
    )
    assert planned.spec is not None and planned.spec == rendered.spec
    assert "\t" not in planned.spec.snippet.source
    assert planned.location == Location("docs/t.md", 5)


def test_front_matter_that_is_not_yaml_is_an_error_when_it_holds_defaults(tmp_path: Path) -> None:
    """MkDocs shows front matter it cannot read as page text, and says nothing: the page's
    defaults would be dropped without a word."""
    body = (
        '```formula id="kept" oracle="softmax"\nx\n```\n```python\ndef f(x):\n    return x\n```\n'
    )
    broken = "---\nformula_check:\n  timing: off\n   heatmaps: [none\n---\n" + body
    (block,) = source_blocks(broken, page="docs/b.md", settings=Settings(tmp_path))
    assert block.spec is None and block.error is not None and block.block_id == "kept"
    assert block.error.message.startswith(
        "front matter formula_check: not valid YAML at line 4 (mapping values are not allowed"
    ), block.error.message
    # broken YAML that sets no defaults of ours is the page's own business
    other = "---\ntitle: [oops\n---\n" + body
    assert source_blocks(other, page="docs/b.md", settings=Settings(tmp_path))[0].spec


def test_every_bad_option_of_a_header_is_reported_at_once() -> None:
    raw = fences.parse_header('atol="-1" rtol="abc" timeout="0" dimz="b=2" seed=3', HERE)
    with pytest.raises(SpecError) as caught:
        fences.parse_options(raw, HERE)
    assert caught.value.message == (
        "option atol='-1': expected a number >= 0; "
        "option rtol='abc': expected a number such as 1e-5; "
        "option timeout='0': expected a positive number; "
        "unknown option 'dimz'; did you mean 'dims'?"
    )
    assert caught.value.location == HERE


@pytest.mark.parametrize(
    "header", ['oracle="softmax" skip="to do"', 'oracle="softmax" formula="off"']
)
def test_an_empty_formula_is_fine_when_nothing_reads_it(tmp_path: Path, header: str) -> None:
    """A skipped block runs nothing; with ``formula="off"`` the LaTeX is not compared."""
    text = f"```formula {header}\n```\n```python\ndef f(x):\n    return x\n```"
    (block,) = page_blocks(text.split("\n"), page="docs/d.md", settings=Settings(tmp_path))
    assert block.spec is not None, block.error


def test_weights_from_the_page_are_told_from_the_block_s_own(tmp_path: Path) -> None:
    meta = {"formula_check": {"weights": {"W_1": "inner.kernel"}}}
    inherited = one_block(tmp_path, 'oracle="ffn"', meta)
    own = one_block(tmp_path, 'oracle="ffn" weights="W_1=a.kernel"', meta)
    assert inherited.spec is not None and inherited.spec.stated == ("oracle",)
    assert not inherited.spec.states("weights")
    assert own.spec is not None and own.spec.states("weights")


def test_front_matter_indented_with_a_tab_is_reported(tmp_path: Path) -> None:
    """YAML refuses tabs, so MkDocs drops such front matter; Markdown then expands the tab,
    and the expanded copy would read as valid YAML: the page's text is judged, not that."""
    body = '```formula oracle="softmax"\nx\n```\n```python\ndef f(x):\n    return x\n```\n'
    raw = "---\nformula_check:\n\ttiming: off\n---\n" + body
    (block,) = source_blocks(raw, page="docs/b.md", settings=Settings(tmp_path))
    assert block.error is not None, block.spec
    assert "not valid YAML at line 3" in block.error.message


def test_rules_around_prose_are_not_front_matter(tmp_path: Path) -> None:
    """A page may open with a horizontal rule; prose that mentions formula_check between two
    rules is not a broken front matter."""
    body = '```formula oracle="softmax"\nx\n```\n```python\ndef f(x):\n    return x\n```\n'
    raw = "---\nThis page uses `formula_check`: see below.\n---\n" + body
    (block,) = source_blocks(raw, page="docs/b.md", settings=Settings(tmp_path))
    assert block.spec is not None, block.error


def test_an_error_in_another_file_names_that_file_not_just_a_line() -> None:
    """A bare ``(line 5)`` reads as the page's line 5: an error raised in a ``code=`` file
    names the file, one in the page's own snippet only its line."""
    page = Location("docs/err.md", 12)

    def headline(failed_at: Location) -> str:
        failure = SnippetFailure("InvalidArgumentError", "shapes differ", failed_at)
        return CheckResult("b", page, "attention", Status.ERROR, failure=failure).headline()

    assert headline(Location("mymodel/broken.py", 5)) == (
        "docs/err.md:12 [b]: error: InvalidArgumentError (mymodel/broken.py:5): shapes differ"
    )
    assert headline(Location("docs/err.md", 17)) == (
        "docs/err.md:12 [b]: error: InvalidArgumentError (line 17): shapes differ"
    )


def test_a_weight_map_names_a_composites_part_weights() -> None:
    """A composite's weights are its parts' under a prefix (``attn.W_q``): a layer's map
    names them as they are; a name that is not a dotted identifier is still refused."""
    assert option_values.weight_map("attn.W_q=att.query_dense.kernel norm1.gamma=ln1.gamma") == {
        "attn.W_q": "att.query_dense.kernel",
        "norm1.gamma": "ln1.gamma",
    }
    for bad in ("attn..W_q=x", ".W_q=x", "attn.=x", "1attn.W=x"):
        with pytest.raises(ValueError, match="name=value pairs"):
            option_values.weight_map(bad)


def test_a_timeout_is_at_most_the_longest_wait_there_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 1e300 seconds used to reach the check process and overflow its clock there.
    longest = option_values.LONGEST_WAIT
    raw = fences.parse_header('timeout="1e300"', HERE)
    with pytest.raises(SpecError) as caught:
        fences.parse_options(raw, HERE)
    assert caught.value.message == (
        f"option timeout='1e300': expected at most {longest:.3g} seconds, the longest wait there is"
    )
    assert fences.parse_options(fences.parse_header(f'timeout="{longest}"', HERE), HERE)
    assert Options(timeout=1e300).problem() == (
        f"option 'timeout' has a bad value 1e+300 (seconds, more than 0 and at most {longest:.3g})"
    )
    assert Options(timeout=longest).problem() == ""
    with pytest.raises(SystemExit):
        cli.main(["check", "--timeout", "1e300", "nowhere"])
    assert "--timeout: expected at most" in capsys.readouterr().err


def test_regimes_names_the_oracles_regimes_or_none(tmp_path: Path) -> None:
    def block_of(header: str) -> PageBlock:
        text = (
            f'```formula oracle="softmax" {header}\nx\n```\n```python\ndef f(x):\n    return x\n```'
        )
        [block] = page_blocks(text.split("\n"), page="docs/r.md", settings=Settings(tmp_path))
        return block

    chosen = {
        header: spec.regimes
        for header in ("", 'regimes="none"', "regimes='large  values'")
        if (spec := block_of(header).spec) is not None
    }
    assert chosen == {"": None, 'regimes="none"': (), "regimes='large  values'": ("large values",)}
    error = block_of('regimes="large value"').error
    assert isinstance(error, SpecError) and error.location == Location("docs/r.md", 1)
    assert error.message == (
        "regimes: oracle 'softmax' has no regime 'large value'; did you mean 'large values'? "
        "(its regimes: large values)"
    )
    for bad, said in [("a,,b", "names separated by commas"), ("x, x", "'x' is named twice")]:
        with pytest.raises(ValueError, match=said):
            option_values.regime_names(bad)
