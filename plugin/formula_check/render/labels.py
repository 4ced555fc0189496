"""Every word a card, a figure or the report shows, in English and Chinese."""

from __future__ import annotations

from dataclasses import dataclass

from formula_check.model import Status
from formula_check.results import CheckResult

OUTCOME_KEYS = (
    "verified",
    "mismatch",
    "error",
    "timeout",
    "skipped",
    "expected_failure",
    "unexpected_pass",
)
"""The badges a card can show: the five statuses plus the two expected-failure outcomes."""


@dataclass(frozen=True)
class Labels:
    """The UI strings of one language. Format fields are named (``{line}``, ``{count}``)."""

    language: str
    separator: str
    colon: str
    verified: str
    mismatch: str
    error: str
    timeout: str
    skipped: str
    expected_failure: str
    unexpected_pass: str
    expected_other: str
    any_failure: str
    nonfinite: str
    cached: str
    checked_code: str
    full_message: str
    """The section holding an error's message as TensorFlow wrote it, wrapping and all."""
    """Before the code a card checked, when it is not the page's own fence."""
    compared: str
    shapes: str
    timings: str
    error_heading: str
    where_they_differ: str
    scaling: str
    figures: str
    notes: str
    printed_output: str
    traceback: str
    inputs: str
    weights: str
    outputs: str
    output_column: str
    max_abs_column: str
    tolerance_column: str
    worst_column: str
    bad_column: str
    expected_got: str
    relative_part: str
    """The relative part of a tolerance, under its atol: ``+ {rtol} × |expected|``."""
    derived_tolerance: str
    """A tolerance derived per element from float32 rounding: ``up to {largest}``."""
    artifact_tolerance: str
    """The same, plus what an artifact's own rounding explains (int8, float16 outputs)."""
    share_used: str
    """How much of its tolerance the code used at most: ``{share} used``."""
    largest_at: str
    """Where the largest difference is, when another element is the worst: ``at {index}``."""
    timed_out: str
    """A timeout card's message: ``{seconds}`` is the block's timeout."""
    ok_mark: str
    line: str
    repeats: str
    first_call: str
    timing_names: tuple[tuple[str, str], ...]
    timing_of_run: str
    """A timing row of a run other than the check's own: ``{name}`` timed in ``{run}``."""
    environment: str
    device: str
    threads: str
    attention_weights: str
    positional_encoding: str
    ffn_hidden: str
    abs_difference: str
    scaling_plot: str
    batch: str
    heads: str
    worst: str
    size: str
    median_time: str
    report_title: str
    open_notebook: str
    open_notebook_title: str
    report_disabled: str
    summary: str
    tally: str
    blocks: str
    page: str
    oracle: str
    status: str
    block: str
    formula_agrees: str = "formula ≈ oracle"
    formula_differs: str = "formula ≠ oracle"
    formula_invalid: str = "formula does not compile"
    formula_not_executable: str = "formula not checked — only the code was compared with the oracle"
    formula_compiled: str = "compiled as"
    formula_required: str = "formula: required — a formula that is not checked fails its block"
    head_title: str = "head {index}"
    sweep_axis: str = "size {dim}"
    legend_guide: str = "O(n²) guide"
    delta_title: str = "|Δ|; worst ({index})"
    delta_title_at: str = "|Δ| at {fixed}; worst ({index})"
    code_side: str = "code"
    oracle_side: str = "oracle"
    side_title: str = "{name} — {side}"
    """A heatmap's title says whose values it shows: ``{side}`` is :attr:`code_side` or
    :attr:`oracle_side` (or both, when the two are drawn side by side)."""
    nonfinite_cells: str = "NaN/Inf"
    """The legend of the hatched cells of a heatmap: values that are not finite numbers."""
    report_show: str = "Show"
    """The report page's status filter."""
    report_all: str = "all ({count})"
    report_failing: str = "failing ({count})"
    report_option: str = "{name} ({count})"
    """One outcome in the report's status filter, with how many blocks have it."""
    report_search: str = "Search"
    report_search_hint: str = "page, block or oracle"
    report_shown: str = "{shown} of {count} blocks shown"
    report_no_match: str = "No block matches the filter and the search."
    report_unchecked: str = "{count} formulas not checked"
    report_unchecked_one: str = "1 formula not checked"
    report_detail: str = "max |Δ| and message"
    """The report's column holding the largest error and, for a block that is not clean,
    what happened."""

    def outcome(self, key: str) -> str:
        """The badge text for one of :data:`OUTCOME_KEYS`."""
        if key not in OUTCOME_KEYS:
            raise KeyError(key)
        text: str = getattr(self, key)
        return text

    def timing_name(self, label: str) -> str:
        """``eager``/``function``/``trace``/``oracle`` in words, with the run that timed them
        (``eager (timing)``: the timing run at realistic sizes); other labels pass through."""
        words = dict(self.timing_names)
        if label in words:
            return words[label]
        name, opened, rest = label.partition(" (")
        if opened and rest.endswith(")"):
            run = rest[:-1]
            return self.timing_of_run.format(name=words.get(name, name), run=words.get(run, run))
        return label


ENGLISH = Labels(
    language="en",
    separator=", ",
    colon=": ",
    verified="verified",
    mismatch="mismatch",
    error="error",
    timeout="timeout",
    skipped="skipped",
    expected_failure="expected failure",
    unexpected_pass="unexpected pass",  # noqa: S106  (a badge, not a password)
    expected_other="expected {expect}",
    any_failure="failure",
    nonfinite="{count} non-finite",
    cached="cached",
    checked_code="code",
    full_message="Full message",
    compared="Compared outputs",
    shapes="Shapes",
    timings="Timings",
    error_heading="Error",
    where_they_differ="Where they differ",
    scaling="Scaling",
    figures="Heatmaps",
    notes="Notes",
    printed_output="Printed output",
    traceback="Traceback",
    inputs="Inputs",
    weights="Weights",
    outputs="Outputs",
    output_column="Output",
    max_abs_column="max |Δ|",
    tolerance_column="Tolerance",
    worst_column="Worst at",
    bad_column="Out of tolerance",
    expected_got="expected {expected}, got {actual}",
    relative_part="+ {rtol} × |expected|",
    derived_tolerance="float32 rounding, up to {largest}",
    artifact_tolerance="float32 and the artifact's own rounding, up to {largest}",
    share_used="{share} of it used",
    largest_at="at {index}",
    timed_out="No answer within {seconds} s: the worker was stopped, and a fresh one takes the "
    "next block.",
    ok_mark="✓",
    line="line {line}",
    repeats="{count} runs",
    first_call="first call {time}",
    timing_names=(
        ("eager", "eager"),
        ("function", "tf.function"),
        ("tf.function", "tf.function"),
        ("trace", "trace (first call)"),
        ("oracle", "NumPy oracle"),
        ("oracle (NumPy float64)", "NumPy oracle (float64)"),
        ("timing", "timing run"),
    ),
    timing_of_run="{name} ({run})",
    environment="Environment",
    device="device",
    threads="{count} threads",
    attention_weights="Attention weights",
    positional_encoding="Positional encoding",
    ffn_hidden="Feed-forward hidden activations",
    abs_difference="|actual − expected|",
    scaling_plot="Median time against size (log-log) with an O(n²) guide",
    batch="batch {index}",
    heads="{count} heads",
    worst="worst at ({index})",
    size="size",
    median_time="Median time",
    report_title="Formula check report",
    open_notebook="Open as notebook",
    open_notebook_title="This page as a Jupyter notebook: each block's code in a %%formula cell "
    "that runs the same check (run it from the project's folder)",
    report_disabled="Formula checks were turned off for this build (`enabled: false`): the "
    "formulas are shown, but none was checked against its code.",
    summary="{count} blocks",
    tally="{count} {name}",
    blocks="Blocks",
    page="Page",
    oracle="Oracle",
    status="Status",
    block="Block",
)
"""The default language."""

CHINESE = Labels(
    language="zh",
    separator="，",
    colon="：",
    verified="已验证",
    mismatch="不一致",
    error="错误",
    timeout="超时",
    skipped="已跳过",
    expected_failure="预期失败",
    unexpected_pass="意外通过",  # noqa: S106  (a badge, not a password)
    expected_other="预期结果：{expect}",
    any_failure="失败",
    nonfinite="{count} 个非有限值",
    cached="缓存结果",
    checked_code="代码",
    full_message="完整信息",
    compared="比较的输出",
    shapes="张量形状",
    timings="运行耗时",
    error_heading="错误",
    where_they_differ="差异位置",
    scaling="耗时随规模变化",
    figures="热力图",
    notes="备注",
    printed_output="打印输出",
    traceback="调用栈",
    inputs="输入",
    weights="权重",
    outputs="输出",
    output_column="输出",
    max_abs_column="最大 |Δ|",
    tolerance_column="容差",
    worst_column="最大误差位置",
    bad_column="超出容差",
    expected_got="预期 {expected}，实际 {actual}",
    relative_part="+ {rtol} × |预期值|",
    derived_tolerance="按 float32 舍入误差推导，最大 {largest}",
    artifact_tolerance="按 float32 与工件自身的舍入推导，最大 {largest}",
    share_used="已用 {share}",
    largest_at="位于 {index}",
    timed_out="{seconds} 秒内没有结果：工作进程已被终止，下一个代码块由新的工作进程检查。",
    ok_mark="✓",
    line="第 {line} 行",
    repeats="{count} 次运行",
    first_call="首次调用 {time}",
    timing_names=(
        ("eager", "即时执行（eager）"),
        ("function", "tf.function"),
        ("tf.function", "tf.function"),
        ("trace", "图追踪（首次调用）"),
        ("oracle", "NumPy 参考实现"),
        ("oracle (NumPy float64)", "NumPy 参考实现（float64）"),
        ("timing", "计时运行"),
    ),
    timing_of_run="{name}，{run}",
    environment="运行环境",
    device="设备",
    threads="{count} 个线程",
    attention_weights="注意力权重",
    positional_encoding="位置编码",
    ffn_hidden="前馈网络隐藏层激活",
    abs_difference="|实际值 − 预期值|",
    scaling_plot="中位耗时与规模的关系（双对数坐标），附 O(n²) 参考线",
    batch="批次 {index}",
    heads="{count} 个注意力头",
    worst="最大误差位于 ({index})",
    size="规模",
    median_time="中位耗时",
    report_title="公式检查报告",
    open_notebook="以 Notebook 打开",
    open_notebook_title="本页的 Jupyter Notebook 版本：每个公式块的代码放在一个 %%formula "
    "单元格里，运行时做同样的检查（请在项目目录下运行）",
    report_disabled="本次构建关闭了公式检查（`enabled: false`）："
    "页面照常显示公式，但没有任何公式与代码核对过。",
    summary="共 {count} 个公式块",
    tally="{name} {count}",
    blocks="公式块",
    page="页面",
    oracle="参考实现",
    status="状态",
    block="块",
    formula_agrees="公式 ≈ 参考实现",
    formula_differs="公式 ≠ 参考实现",
    formula_invalid="公式无法编译",
    formula_not_executable="公式未检查——仅将代码与参考实现比对",
    formula_compiled="编译结果",
    formula_required="formula: required——未检查的公式会使所在的块失败",
    head_title="头 {index}",
    sweep_axis="规模 {dim}",
    legend_guide="O(n²) 参考线",
    delta_title="|Δ|；最大误差 ({index})",
    delta_title_at="|Δ|（{fixed}）；最大误差 ({index})",
    code_side="代码",
    oracle_side="参考实现",
    side_title="{name}——{side}",
    nonfinite_cells="NaN/Inf（非有限值）",
    report_show="显示",
    report_all="全部（{count}）",
    report_failing="失败（{count}）",
    report_option="{name}（{count}）",
    report_search="搜索",
    report_search_hint="页面、块或参考实现",
    report_shown="显示 {shown} / {count} 个公式块",
    report_no_match="没有符合筛选和搜索条件的公式块。",
    report_unchecked="{count} 个公式未检查",
    report_unchecked_one="1 个公式未检查",
    report_detail="最大 |Δ| 与信息",
)
"""Simplified Chinese; also used for ``zh-TW`` until a Traditional table exists."""

_BY_LANGUAGE = {"en": ENGLISH, "zh": CHINESE}


def labels_for(language: str | None) -> Labels:
    """The labels for a Material-style language code (``zh``, ``zh-CN``, ``zh_TW``, ``en``).

    Only the primary subtag counts; an unknown language gets English, because a theme's
    language setting covers far more languages than we translate and must not fail a build.
    """
    primary = (language or "en").replace("_", "-").split("-", 1)[0].strip().lower()
    return _BY_LANGUAGE.get(primary, ENGLISH)


def outcome_key(result: CheckResult) -> str:
    """Which of :data:`OUTCOME_KEYS` a result shows as its badge.

    A block marked as expected to fail shows ``expected_failure`` when it failed as promised
    and ``unexpected_pass`` when it verified; any other surprise shows the real status.
    """
    if result.expected_failure:
        if result.outcome_ok:
            return "expected_failure"
        if result.status is Status.VERIFIED:
            return "unexpected_pass"
    return result.status.value
