"""What every face says about the formula and the numbers, beyond the card: ``formula-check
check`` and ``show``, the build log, the JUnit report and pytest. No TensorFlow: results are
made here, and the faces that would check blocks are given an engine that hands them back."""

from __future__ import annotations

import dataclasses
import logging
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from fakes import FakeMaker
from formula_check.faces import cli, mkdocs_plugin
from formula_check.model import CheckSpec, Location, Status
from formula_check.project import ci_formats
from formula_check.results import CheckResult, FormulaVerdict, Verdict

pytest_plugins = ["pytester"]

WHERE = Location("docs/page.md", 3)
REASON = "a sum over an index (\\sum_j) is outside the executable subset"
NOT_EXECUTABLE = FormulaVerdict("not_executable", message=REASON)
DIFFERS = FormulaVerdict(
    "differs",
    compiled="MultiHead = matmul(concat(head_i), W_o)\nwhere head_i = attention(Q W_q_i, K, V)",
    max_abs=0.25,
    message="the formula as written differs from the oracle: output max |Δ| = 0.25 at (0, 1, 2); "
    "it computes MultiHead = matmul(concat(head_i), W_o)\n"
    "where head_i = attention(Q W_q_i, K, V)",
)
NOTE = f"docs/page.md:3 [softmax]: formula not checked: {REASON}"


def _verdict(**changes: object) -> Verdict:
    fields: dict[str, object] = {
        "name": "output",
        "ok": True,
        "dims": ("b", "n"),
        "expected_shape": (2, 5),
        "actual_shape": (2, 5),
        "max_abs": 1e-7,
        "n_total": 10,
        "atol": 1e-5,
        "rtol": 1e-5,
    }
    return Verdict(**{**fields, **changes})  # type: ignore[arg-type]


def _result(
    formula: FormulaVerdict | None = NOT_EXECUTABLE,
    *,
    status: Status = Status.VERIFIED,
    verdicts: Sequence[Verdict] = (),
    where: Location = WHERE,
    block_id: str = "softmax",
) -> CheckResult:
    return CheckResult(
        block_id=block_id,
        location=where,
        oracle="softmax",
        status=status,
        verdicts=tuple(verdicts) or (_verdict(),),
        formula=formula,
    )


# One result, as text -----------------------------------------------------------------------


def test_show_prints_the_formula_whole_with_its_compiled_form() -> None:
    text = ci_formats.text_card(_result(DIFFERS, status=Status.MISMATCH), Path())
    section = text.split("formula:\n", 1)[1].splitlines()
    assert section[:5] == [
        "  formula ≠ oracle  max |Δ| = 0.25",
        "  compiled as: MultiHead = matmul(concat(head_i), W_o)",
        "               where head_i = attention(Q W_q_i, K, V)",
        "  the formula as written differs from the oracle: output max |Δ| = 0.25 at (0, 1, 2); "
        "it computes MultiHead = matmul(concat(head_i), W_o)",
        "  where head_i = attention(Q W_q_i, K, V)",
    ]


def test_show_says_a_formula_was_not_executable_and_why() -> None:
    text = ci_formats.text_card(_result(), Path())
    assert (
        f"formula:\n  formula not checked — only the code was compared with the oracle\n  {REASON}"
    ) in text


def test_show_says_an_agreeing_formula_and_its_difference() -> None:
    agrees = FormulaVerdict("agrees", compiled="softmax(x)", max_abs=2.2e-16)
    text = ci_formats.text_card(_result(agrees), Path())
    assert "formula:\n  formula ≈ oracle  max |Δ| = 2.2e-16\n  compiled as: softmax(x)" in text


def test_a_relative_error_against_an_expected_zero_is_not_a_number_to_show() -> None:
    zero = _verdict(ok=False, max_abs=1.0, max_rel=4.49e307, n_bad=1, worst_expected=0.0)
    text = ci_formats.text_card(_result(None, status=Status.MISMATCH, verdicts=[zero]), Path())
    assert "max rel = n/a (expected 0)" in text
    assert "e+307" not in text
    real = _verdict(ok=False, max_abs=0.47, max_rel=14.0, n_bad=1)
    text = ci_formats.text_card(_result(None, status=Status.MISMATCH, verdicts=[real]), Path())
    assert "max rel = 14" in text


def test_a_failed_test_keeps_the_formula_lines_its_headline_cuts() -> None:
    result = _result(DIFFERS, status=Status.MISMATCH)
    assert "where head_i" not in result.headline()
    report = ci_formats.failure_report(result, Path())
    assert "  where head_i = attention(Q W_q_i, K, V)" in report.splitlines()
    assert "    compiled as: MultiHead = matmul(concat(head_i), W_o)" not in report  # indented once
    assert "  compiled as: MultiHead = matmul(concat(head_i), W_o)" in report.splitlines()


def test_junit_failure_text_keeps_the_whole_formula() -> None:
    xml = ci_formats.junit_xml([_result(DIFFERS, status=Status.MISMATCH)], lambda _: True)
    failure = ET.fromstring(xml).find("testcase/failure")
    assert failure is not None and failure.text is not None
    assert failure.text.endswith("  where head_i = attention(Q W_q_i, K, V)")


def test_the_note_names_the_block_and_the_reason() -> None:
    assert ci_formats.formula_note(_result()) == NOTE
    assert ci_formats.formula_note(_result(DIFFERS, status=Status.MISMATCH)) is None
    assert ci_formats.formula_note(_result(None)) is None


# The build log -----------------------------------------------------------------------------


def test_the_build_log_says_a_formula_was_not_executable_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger=mkdocs_plugin.log.name):
        mkdocs_plugin._log_result(_result(), frozenset({"mismatch"}))
    said = [(record.levelno, record.getMessage()) for record in caplog.records]
    assert (logging.INFO, NOTE) in said
    assert not any(level >= logging.WARNING for level, _ in said)  # --strict still passes


# The command line --------------------------------------------------------------------------

PAGE = """\
# Softmax

```formula id="softmax" oracle="softmax" timing="off"
\\text{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis=-1)
```
"""


def _handing_back(answer: CheckResult) -> FakeMaker:
    """Engines that check nothing: each block gets ``answer``, at its own place."""

    def answered(spec: CheckSpec) -> CheckResult:
        return _result(
            answer.formula,
            status=answer.status,
            verdicts=answer.verdicts,
            where=spec.location,
            block_id=spec.block_id,
        )

    return FakeMaker(answered)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nplugins:\n  - formula-check\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(PAGE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_check_closes_with_the_blocks_whose_formula_was_not_executable(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    maker = _handing_back(_result())
    assert cli.main(["check"], make_engine=maker) == cli.EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        "formulas not checked, only their code compared with the oracle (1):",
        f"  docs/page.md:3 [softmax]: {REASON}",
    ]


def test_check_says_nothing_of_formulas_that_agree(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    maker = _handing_back(_result(FormulaVerdict("agrees", "softmax(x)", 1e-16)))
    assert cli.main(["check"], make_engine=maker) == cli.EXIT_OK
    assert "not checked" not in capsys.readouterr().out


def test_show_on_the_command_line_prints_the_formula_section(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    maker = _handing_back(_result(DIFFERS, status=Status.MISMATCH))
    assert cli.main(["show", "docs/page.md:3"], make_engine=maker) == cli.EXIT_FAILED
    out = capsys.readouterr().out
    assert "formula:\n  formula ≠ oracle  max |Δ| = 0.25\n" in out
    assert "\n  where head_i = attention(Q W_q_i, K, V)\n" in out


# pytest ------------------------------------------------------------------------------------

_ENGINE_HANDS_BACK = """
import sys

sys.path.insert(0, {tests!r})

import pytest
from fakes import FakeMaker

from formula_check.faces import pytest_plugin
from formula_check.model import Status
from formula_check.results import CheckResult, FormulaVerdict, Verdict
from formula_check.session import Engines

{answer}

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.stash[pytest_plugin.RUN].engines = Engines(FakeMaker(answer))
"""

NOT_EXECUTABLE_ANSWER = """
def answer(s):
    formula = FormulaVerdict("not_executable", message={message!r})
    verdict = Verdict("output", True, ("n",), (5,), (5,), n_total=5, atol=1e-5)
    return CheckResult(s.block_id, s.location, s.oracle, Status.VERIFIED,
                       verdicts=(verdict,), formula=formula)
"""

DIFFERS_ANSWER = """
def answer(s):
    formula = FormulaVerdict("differs", "f(x)\\nwhere head_i = g(x)", 0.5,
                             "the formula differs\\nwhere head_i = g(x)")
    return CheckResult(s.block_id, s.location, s.oracle, Status.MISMATCH, formula=formula)
"""


def _conftest(answer: str) -> str:
    return _ENGINE_HANDS_BACK.format(tests=str(Path(__file__).parent), answer=answer)


def test_pytest_names_a_passing_block_whose_formula_was_not_executable(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(_conftest(NOT_EXECUTABLE_ANSWER.format(message=NOT_EXECUTABLE.message)))
    pytester.mkdir("docs").joinpath("page.md").write_text(PAGE, encoding="utf-8")
    report = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--formula-check", "docs", "-p", "no:cacheprovider", "-rP", f"--junitxml={report}"
    )
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    summary = text.split("formula-check: formulas not checked", 1)[1]
    assert NOTE in summary.splitlines()[1]
    assert "formula not checked — only the code was compared with the oracle\n" in text  # -rP
    properties = {
        prop.get("name"): prop.get("value") for prop in ET.parse(report).getroot().iter("property")
    }
    assert properties["formula_check_formula"] == "not_executable"
    assert properties["formula_check_note"] == NOTE


def test_pytest_failure_shows_the_formula_lines_past_the_first(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_conftest(DIFFERS_ANSWER))
    pytester.mkdir("docs").joinpath("page.md").write_text(PAGE, encoding="utf-8")
    result = pytester.runpytest_subprocess("--formula-check", "docs", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    lines = result.stdout.str().splitlines()
    assert "docs/page.md:3 [softmax]: mismatch: formula: the formula differs" in lines
    assert "  where head_i = g(x)" in lines


# Presets and construction ------------------------------------------------------------------

MAKE_MHA = """
import tensorflow as tf


def make_layer(d_model, num_heads):
    return tf.keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=d_model // num_heads)
"""


_ORACLES = {"keras-mha": "multihead", "keras-layer-norm": "layer_norm"}


def _preset_spec(preset: str, source: str, **fields: object) -> CheckSpec:
    """A block checking a factory of Keras' layer with ``preset``."""
    from support import spec_for

    return spec_for(_ORACLES[preset], source, preset=preset, kind="factory", **fields)


def test_the_layer_norm_preset_reads_epsilon_to_check_it() -> None:
    from formula_check.planning.presets import apply_preset

    spec = apply_preset(_preset_spec("keras-layer-norm", "def make(): pass"))
    assert dict(spec.weights) == {"gamma": "gamma", "beta": "beta", "epsilon": "epsilon"}


def test_init_sources_say_init_preset_and_dims() -> None:
    from formula_check.planning.presets import init_sources

    spec = _preset_spec("keras-mha", MAKE_MHA, init={"d_model": "d_model", "dropout": 0.5})
    assert init_sources(spec, {"b", "n", "m", "d_model", "h", "depth"}) == {
        "num_heads": {"origin": "preset", "said": "preset keras-mha; h from dims"},
        "key_dim": {"origin": "preset", "said": "preset keras-mha; depth from dims"},
        "d_model": {"origin": "init", "said": "init=; d_model from dims"},
        "dropout": {"origin": "init", "said": "init="},
    }
    mine = _preset_spec("keras-mha", MAKE_MHA, init={"key_dim": 3})
    assert init_sources(mine, {"depth"})["key_dim"] == {"origin": "init", "said": "init="}


SOURCES = {
    "num_heads": {"origin": "preset", "said": "preset keras-mha; h from dims"},
    "key_dim": {"origin": "preset", "said": "preset keras-mha; depth from dims"},
    "d_model": {"origin": "init", "said": "init=; d_model from dims"},
}


def make_layer(d_model: int, num_heads: int) -> tuple[int, int]:
    return d_model, num_heads


@pytest.mark.tf
def test_a_factory_is_given_only_the_preset_keywords_it_takes() -> None:
    from formula_check.execution.entry_call import construct

    init = {"num_heads": 4, "key_dim": 8, "d_model": 32}
    assert construct(make_layer, init, SOURCES) == (32, 4)


@pytest.mark.tf
def test_a_parameter_no_option_gives_is_an_error_naming_the_sources() -> None:
    from formula_check.execution.entry_call import construct

    with pytest.raises(TypeError) as raised:
        construct(make_layer, {"num_heads": 4, "key_dim": 8}, SOURCES)
    assert str(raised.value) == (
        'make_layer() needs d_model, which no option gives: add init="d_model=..." '
        "(keywords given: num_heads=4 (preset keras-mha; h from dims); not given, as "
        "make_layer() does not take them: key_dim (preset keras-mha; depth from dims))"
    )


def make_broken(d_model: int, num_heads: int) -> None:
    raise TypeError(f"unsupported operand type(s) for //: 'int' and '{type(num_heads).__name__}'")


@pytest.mark.tf
def test_a_type_error_while_constructing_names_where_each_keyword_came_from() -> None:
    from formula_check.execution.entry_call import construct

    sources = {**SOURCES, "units": {"origin": "init", "said": "init="}}
    with pytest.raises(TypeError) as raised:
        construct(make_layer, {"num_heads": 4, "d_model": 32, "units": 2}, sources)
    assert str(raised.value) == (
        "make_layer() got an unexpected keyword argument 'units' (keywords given: num_heads=4 "
        "(preset keras-mha; h from dims); d_model=32 (init=; d_model from dims); units=2 "
        "(init=))"
    )
    with pytest.raises(TypeError) as raised:
        construct(make_broken, {"num_heads": "h", "d_model": 32}, {})
    assert str(raised.value) == (
        "unsupported operand type(s) for //: 'int' and 'str' "
        "(keywords given: num_heads='h'; d_model=32)"
    )
    frames = [frame.name for frame in traceback.extract_tb(raised.value.__traceback__)]
    assert frames[-1] == "make_broken"  # the factory's own line is still where it failed


@pytest.mark.tf
def test_keras_mha_preset_with_a_factory_of_other_parameters_verifies() -> None:
    from formula_check.checking.judge import evaluate
    from formula_check.execution.one_check import check
    from formula_check.execution.snippet_module import WorkerState
    from formula_check.messages import CheckReply
    from formula_check.planning.plan import plan_check
    from formula_check.planning.presets import init_sources
    from formula_check.results import Environment
    from support import PROJECT

    spec = _preset_spec("keras-mha", MAKE_MHA, init={"d_model": "d_model"}, mask="causal")
    plan = plan_check(spec, str(PROJECT), with_timing=False)
    # the request, with where each constructor keyword came from (the block before its preset)
    sources = init_sources(spec, plan.sizes)
    request = dataclasses.replace(plan.request, init_sources=sources)
    reply, arrays = check(WorkerState(PROJECT), request, dict(plan.arrays))
    assert isinstance(reply, CheckReply), reply
    result = evaluate(plan, reply, arrays, Environment())
    assert result.status is Status.VERIFIED, result.headline()


@pytest.mark.tf
def test_a_layer_norm_built_with_another_epsilon_is_a_mismatch_that_says_so() -> None:
    from support import shared_engine

    source = "import tensorflow as tf\n\ndef make():\n    return tf.keras.layers.LayerNormalization(epsilon=1e-9)\n"
    result = shared_engine().check(_preset_spec("keras-layer-norm", source))
    assert result.status is Status.MISMATCH
    (epsilon,) = [v for v in result.verdicts if v.name == "epsilon"]
    assert (
        epsilon.problem
        == "the layer's epsilon is 1e-09, the formula's 1e-06 (the oracle's default)"
    )


@pytest.mark.tf
def test_a_layer_norm_without_beta_says_center_false() -> None:
    from formula_check.execution.layer_weights import read_weights
    from formula_check.execution.snippet_failure import SnippetRaised

    class LayerNormalization:
        gamma = np.ones(3)
        beta = None

    with pytest.raises(SnippetRaised) as raised:
        read_weights(LayerNormalization(), {"gamma": "gamma", "beta": "beta"})
    assert str(raised.value.error) == (
        "beta is None (a LayerNormalization built with center=False has no beta)"
    )


@pytest.mark.tf
def test_a_factory_under_the_multihead_preset_verifies_through_the_engine() -> None:
    """The planner says where each constructor keyword came from, so the preset's key_dim
    is not forced on a factory that does not take it."""
    from support import run

    result = run(
        "multihead",
        MAKE_MHA,
        preset="keras-mha",
        kind="factory",
        init={"d_model": "d_model", "num_heads": "h"},
    )
    assert result.status is Status.VERIFIED, result.headline()
