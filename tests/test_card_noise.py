"""A verified card says only what its reader can use: each tolerance line names its outputs, a
"cannot be told apart" note appears only where the block could give the sizes apart, and
"cached" is the author's word (``mkdocs serve``, the report), never a published page's.
Also what lets a narrow card show every column: each verdict cell names its column. Pure: no
TensorFlow."""

from __future__ import annotations

import re
from typing import Any

from formula_check.checking.result_notes import blind_spots, tolerance_notes
from formula_check.model import CheckSpec, Location, Status, frozen_map
from formula_check.planning.plan import plan_check
from formula_check.render import Figure, labels_for, render_card, report_markdown
from formula_check.render.card import READABLE_PX
from formula_check.render.picture import SMALLEST_TEXT
from formula_check.results import CheckResult, Verdict
from formula_check.snippets import inline_snippet

EN = labels_for("en")
DERIVED = "derived: 64 × float32 rounding (1.1e-08 to 2.1e-07, its least) + float32 ulp"
OTHER = "derived: 64 × float32 rounding (1.4e-09 to 6.1e-08, its least) + float32 ulp"


def _verdict(name: str, tolerance: str, regime: str = "") -> Verdict:
    return Verdict(
        name, True, ("n",), (4,), (4,), 1e-7, 1e-7, n_total=4, atol=1e-5, used=0.2,
        tolerance=tolerance, regime=regime,
    )  # fmt: skip


def test_each_tolerance_line_names_the_outputs_it_is_for() -> None:
    two_ways = [
        _verdict("output", DERIVED),
        _verdict("weights", OTHER),
        _verdict("weights", "derived: something else", regime="large logits"),
    ]
    assert tolerance_notes(two_ways) == [
        f"tolerance of output: {DERIVED}",
        f"tolerance of weights: {OTHER}",
    ]
    # One way for every output: one line, which plainly is for all of them.
    assert tolerance_notes([_verdict("output", DERIVED), _verdict("weights", DERIVED)]) == [
        f"tolerance: {DERIVED}"
    ]
    assert tolerance_notes([_verdict("a", DERIVED), _verdict("b", OTHER), _verdict("c", DERIVED)])[
        0
    ] == (f"tolerance of a, c: {DERIVED}")


def _blind_spots(oracle: str, dims: str, **fields: Any) -> list[str]:
    where = Location("docs/page.md", 3)
    sizes = frozen_map({name: int(size) for name, size in (p.split("=") for p in dims.split())})
    spec = CheckSpec(
        "b", where, oracle, inline_snippet("def f(): pass\n", where), dims=sizes, **fields
    )
    return blind_spots(plan_check(spec, "."))


def test_told_apart_only_where_the_block_could_give_the_sizes_apart() -> None:
    layer = frozen_map({"d_model": "d_model", "num_heads": "h"})
    # A standard layer makes depth d_model/h (and depth_v depth) itself: nothing to act on.
    assert _blind_spots("multihead", "b=2 n=5 m=7 d_model=24 h=4", init=layer) == []
    assert _blind_spots("multihead", "b=2 n=5 m=7 d_model=24 h=4", preset="keras-mha") == []
    # A function given its weights takes its sizes from them: stating depth would tell them
    # apart, so the note stays.
    function = _blind_spots("multihead", "b=2 n=5 m=7 d_model=24 h=4")
    assert any(note.startswith("depth = depth_v = 6:") for note in function), function
    assert any(note.startswith("d_model = h*depth") for note in function), function
    # Sizes the block gives itself are still said, layer or not.
    stated = _blind_spots("multihead", "b=2 n=5 m=5 d_model=24 h=4", init=layer)
    assert stated == [
        "n = m = 5: code that mixes up n and m cannot be told apart at these sizes; "
        "give them different sizes"
    ]


def _cached() -> CheckResult:
    return CheckResult(
        "sdpa",
        Location("docs/attention.md", 42),
        "attention",
        Status.VERIFIED,
        verdicts=(_verdict("output", DERIVED),),
        cached=True,
    )


def _no_image(figure: Figure) -> str:
    raise AssertionError("no figure expected")


def test_cached_is_said_while_serving_and_in_the_report_never_on_a_published_card() -> None:
    published = render_card(_cached(), labels=EN, image_url=_no_image)
    served = render_card(_cached(), labels=EN, image_url=_no_image, served=True)
    assert "fc-cached" not in published and ">cached<" not in published
    assert '<span class="fc-cached">cached</span>' in served
    fresh = render_card(
        CheckResult("sdpa", Location("docs/attention.md", 42), "attention", Status.VERIFIED),
        labels=EN,
        image_url=_no_image,
        served=True,
    )
    assert "fc-cached" not in fresh
    report = report_markdown([_cached()], EN, lambda result: "#")
    assert '<small class="fc-cached">cached</small>' in report


def test_every_verdict_cell_names_its_column() -> None:
    """A card too narrow for the table stacks its rows, each value shown beside its column's
    name: the name must be on the cell."""
    card = render_card(_cached(), labels=EN, image_url=_no_image)
    cells = re.findall(r"<td[^>]*>", card.split('class="fc-verdicts"')[1].split("</table>")[0])
    labels = [re.search(r'data-label="([^"]*)"', cell) for cell in cells]
    assert [label.group(1) if label else None for label in labels] == [
        "Output",
        "max |Δ|",
        "Tolerance",
        "Worst at",
        "Out of tolerance",
    ]


def test_a_figure_shrinks_only_while_its_text_stays_readable() -> None:
    figure = Figure("weights", "Weights", "the weights", b"<svg/>", 720, 300)
    card = render_card(
        _cached(),
        labels=EN,
        image_url=lambda f: "w.svg",
        make_figures=lambda *args, **kwargs: [figure],
    )
    width = int(re.search(r'style="min-width: (\d+)px"', card).group(1))  # type: ignore[union-attr]
    assert SMALLEST_TEXT * width / figure.width >= READABLE_PX
    assert width <= figure.width
