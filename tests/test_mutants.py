"""The mutation suite of ``bench/mutants.py``: its generator, and what the checker says about
the mutant classes the issue names as surviving, a sample of generated mutants, and correct
code.

The generator tests are pure. The checker tests share one run, as the bench does it:
``formula-check check`` over a temporary project of all blocks, beside the float64 process that
decides which mutants still compute their seed's function.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from formula_check.oracles.catalog import BUILTINS
from implementations import load_mutation_bench

ROOT = Path(__file__).resolve().parent.parent
bench = load_mutation_bench()
SEEDS = bench.load_seeds()
GENERATED = [mutant for seed in SEEDS for mutant in bench.mutants_of(seed)]


def probe(operator: str, source: str) -> set[str]:
    """The code of every mutant ``operator`` makes of ``source``, as unparsed text."""
    seed = bench.Seed("probe", {"oracle": "ffn"}, "", source)
    return {m.code.strip() for m in bench.mutants_of(seed, {operator: bench.OPERATORS[operator]})}


# -- the seeds --------------------------------------------------------------------------------


def test_seeds_cover_every_builtin_oracle_and_preset() -> None:
    # The catalog's own list: other tests register oracles of their own in this process.
    builtin = {oracle.name for oracle in BUILTINS}
    assert len(SEEDS) >= 14
    assert {seed.options["oracle"] for seed in SEEDS} >= builtin
    presets = {seed.options.get("preset") for seed in SEEDS}
    assert presets >= {"keras-mha", "keras-layer-norm", "keras-dense"}


def test_seed_headers_leave_id_and_seed_to_the_suite() -> None:
    with pytest.raises(ValueError, match='key="value" pairs'):
        bench.parse_options("oracle='softmax'")
    assert bench.parse_options('oracle="ffn" dims="b=2 n=3"') == {
        "oracle": "ffn",
        "dims": "b=2 n=3",
    }
    for seed in SEEDS:
        assert not {"id", "seed"} & set(seed.options), seed.name


# -- each operator, on a line it applies to ---------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "source", "expected"),
    [
        ("arithmetic", "y = a + b", {"y = a - b"}),
        ("arithmetic", "s /= d", {"s *= d"}),
        ("operands", "y = a @ b", {"y = b @ a"}),
        ("drop-term", "y = x @ w + b", {"y = x @ w", "y = b"}),
        ("drop-statement", "s += m\ny = s", {"pass\ny = s"}),
        ("scale", "y = s / tf.sqrt(d)", {"y = s / d"}),
        ("scale", "y = tf.math.rsqrt(d)", {"y = d", "y = tf.sqrt(d)"}),
        (
            "epsilon",
            "y = tf.sqrt(v + 1e-06)",
            {"y = tf.sqrt(v) + 1e-06", "y = tf.sqrt(v - 1e-06)", "y = tf.sqrt(v)"},
        ),
        (
            "axis",
            "y = tf.nn.softmax(z, axis=-1)",
            {"y = tf.nn.softmax(z, axis=-2)", "y = tf.nn.softmax(z, axis=1)"},
        ),
        (
            "axis",
            "m = tf.nn.moments(x, axes=[-1])",
            {"m = tf.nn.moments(x, axes=[-2])", "m = tf.nn.moments(x, axes=[1])"},
        ),
        (
            "keyword",
            "y = tf.matmul(q, k, transpose_b=True)",
            {"y = tf.matmul(q, k)", "y = tf.matmul(q, k, transpose_a=True)"},
        ),
        ("transpose", "y = tf.transpose(x, perm=[0, 2, 1])", {"y = x"}),
        (
            "activation",
            "h = tf.nn.relu(z)",
            {
                "h = tf.nn.relu6(z)",
                "h = tf.clip_by_value(z, 0.0, 6.0)",
                "h = tf.nn.gelu(z)",
                "h = tf.nn.sigmoid(z)",
                "h = tf.nn.leaky_relu(z)",
            },
        ),
        (
            "constant",
            "s += m * -1e9",
            {"s += m * -10000.0", "s += m * -100.0", "s += m * 1000000000.0"},
        ),
        (
            "constant",
            "n = LayerNormalization(epsilon=1e-6)",
            {"n = LayerNormalization(epsilon=1e-09)", "n = LayerNormalization(epsilon=0.001)"},
        ),
        ("slice", "y = a[:, 0::2]", {"y = a[:, 1::2]"}),
        ("slice", "y = t[:, :n]", {"y = t[:, :n - 1]", "y = t[:, :n + 1]"}),
        ("arguments", "y = tf.matmul(q, k)", {"y = tf.matmul(k, q)"}),
        ("arguments", "m = MHA(num_heads=h, key_dim=d)", {"m = MHA(num_heads=d, key_dim=h)"}),
        ("function", "y = tf.sin(a)", {"y = tf.cos(a)"}),
        ("comparison", "if m is not None:\n    s += m", {"if m is None:\n    s += m"}),
        ("keras-bias", "d = Dense(4)", {"d = Dense(4, use_bias=False)"}),
    ],
)
def test_operator_rewrites_what_it_names(operator: str, source: str, expected: set[str]) -> None:
    assert probe(operator, source) == expected


def test_an_operator_leaves_code_it_does_not_apply_to_alone() -> None:
    assert probe("epsilon", "y = tf.sqrt(v)") == set()
    assert probe("slice", "y = a[0]") == set()
    assert probe("activation", "h = tf.nn.softmax(z)") == set()


@pytest.mark.parametrize("operator", sorted(bench.OPERATORS))
def test_every_operator_makes_valid_new_programs_from_the_seeds(operator: str) -> None:
    made = [m for m in GENERATED if m.operator == operator]
    assert made, f"{operator} made no mutant of any seed"
    seeds = {seed.name: ast.unparse(ast.parse(seed.code)) for seed in SEEDS}
    for mutant in made:
        tree = ast.parse(mutant.code)  # raises on invalid code
        assert ast.unparse(tree) != seeds[mutant.seed], mutant.where
        assert mutant.source_line in next(s.code for s in SEEDS if s.name == mutant.seed)


def test_no_two_mutants_of_a_seed_are_the_same_program() -> None:
    codes = [(m.seed, m.code) for m in GENERATED]
    assert len(codes) == len(set(codes))


def test_the_known_survivor_classes_are_generated() -> None:
    known = bench.known_survivors(GENERATED)
    assert [(m.seed, m.operator, m.description) for m in known] == list(bench.KNOWN_SURVIVORS)
    code = {(m.seed, m.description): m.code for m in known}
    assert "tf.nn.relu6(" in code["ffn_function", "relu → relu6"]
    assert "tf.clip_by_value(" in code["ffn_function", "relu → clip at 6"]
    assert "activation='relu6'" in code["ffn_sequential", "relu → relu6"]
    assert "mask * -100.0" in code["attention_additive", "-1e9 → -100"]
    assert "tf.sqrt(variance + 1e-06)" not in code["layer_norm", "ε outside the square root"]
    assert "tf.sqrt(variance) + 1e-06" in code["layer_norm", "ε outside the square root"]
    assert "LayerNormalization(epsilon=1e-09)" in code["layer_norm_keras", "1e-6 → 1e-09"]


# -- correct variants --------------------------------------------------------------------------


def test_variants_are_new_programs_and_the_kinds_asked_for_exist() -> None:
    variants = [v for seed in SEEDS for v in bench.variants_of(seed)]
    seeds = {seed.name: ast.unparse(ast.parse(seed.code)) for seed in SEEDS}
    for variant in variants:
        assert ast.unparse(ast.parse(variant.code)) != seeds[variant.seed], variant
    names = {v.name for v in variants}
    assert names >= {
        "einsum",
        "tensordot",
        "float64",
        "mask-keep",
        "mask-additive",
        "mask-keep-float",
    }


def test_a_mask_variant_takes_the_other_encoding_and_converts_it_on_entry() -> None:
    seed = next(s for s in SEEDS if s.name == "attention_additive")
    keep = next(v for v in bench.variants_of(seed) if v.name == "mask-keep")
    assert keep.options["mask_convention"] == "keep"
    assert "mask = tf.cast(tf.logical_not(mask), tf.float32)" in keep.code
    assert "mask_convention" not in seed.options


def test_the_einsum_variant_replaces_every_matmul() -> None:
    seed = next(s for s in SEEDS if s.name == "attention_additive")
    einsum = next(v for v in bench.variants_of(seed) if v.name == "einsum")
    assert "matmul" not in einsum.code
    assert "tf.einsum('...ij,...kj->...ik', q, k)" in einsum.code


# -- small pure parts of the runner ------------------------------------------------------------


def test_seed_values() -> None:
    assert bench.seed_values("0..9") == list(range(10))
    assert bench.seed_values("3,5") == [3, 5]


def test_disagreement_is_relative_and_sees_nan_and_shape() -> None:
    a = np.linspace(-50.0, 50.0, 12).reshape(3, 4)
    assert bench.disagreement([a], [a * (1 + 1e-13)]) is None
    assert "differs by" in bench.disagreement([a], [a + 1e-6])
    assert "shape" in bench.disagreement([a], [a.T])
    with_nan = a.copy()
    with_nan[0, 0] = np.nan
    assert bench.disagreement([with_nan], [with_nan.copy()]) is None
    assert "NaN" in bench.disagreement([a], [with_nan])
    assert "values" in bench.disagreement([a], [a, a])


def test_summary_leaves_equivalents_out_of_the_ratio() -> None:
    def mutant(equivalent: bool | None, status: str) -> dict[str, Any]:
        return {"equivalent": equivalent, "status": status}

    found = [
        mutant(False, "mismatch"),
        mutant(False, "error"),
        mutant(False, "verified"),
        mutant(True, "verified"),
        mutant(True, "mismatch"),
        mutant(None, "verified"),
    ]
    correct = [
        {"status": "verified", "not_equivalent": None},
        {"status": "error", "not_equivalent": None},
        {"status": "mismatch", "not_equivalent": "x10: differs"},
    ]
    summary = bench.summarise(found, correct)
    assert summary["equivalent"] == 2
    assert summary["killed"] == 2
    assert summary["killed_by_status"] == {"error": 1, "mismatch": 1}
    assert summary["survived"] == 1
    assert summary["kill_ratio"] == pytest.approx(2 / 3)
    assert summary["unjudged"] == 1
    assert summary["equivalent_rejected"] == 1
    assert (summary["correct_blocks"], summary["false_alarms"]) == (2, 1)
    assert summary["variants_not_equivalent"] == 1


# -- what the checker says ---------------------------------------------------------------------

SAMPLE_STRIDE = 23
"""Every 23rd generated mutant joins the known classes: about twenty, from every seed."""
TEST_SEED_VALUES = [0, 1]
TEST_VARIANTS = {
    ("attention_additive", "mask-keep"),
    ("attention_keep", "mask-additive"),
    ("attention_keep_float", "einsum"),
    ("ffn_function", "tensordot"),
    ("multihead_function", "mask-keep-float"),
    ("self_attention", "float64"),
    ("layer_norm", "rsqrt"),
    ("sublayer_post", "relu-maximum"),
    ("linear", "tf-function"),
}


@pytest.fixture(scope="module")
def checked() -> dict[str, Any]:
    """One checker run and one equivalence run over the test's blocks."""
    known = bench.known_survivors(GENERATED)
    sample = [m for m in GENERATED[::SAMPLE_STRIDE] if m not in known]
    variants = [v for s in SEEDS for v in bench.variants_of(s) if (v.seed, v.name) in TEST_VARIANTS]
    assert len(variants) == len(TEST_VARIANTS)
    suite = bench.Suite(SEEDS, [*known, *sample], variants, TEST_SEED_VALUES)
    return bench.run_suite(suite, workers=2)


def _record(report: dict[str, Any], key: tuple[str, str, str]) -> dict[str, Any]:
    return next(m for m in report["mutants"] if (m["seed"], m["operator"], m["description"]) == key)


@pytest.mark.tf
@pytest.mark.parametrize("key", bench.KNOWN_SURVIVORS, ids=" ".join)
def test_known_survivor_class_is_not_verified(
    checked: dict[str, Any], key: tuple[str, str, str]
) -> None:
    record = _record(checked, key)
    assert record["equivalent"] is False, record["equivalence_reason"]
    assert record["status"] != "verified", f"{record['where']}: {record['detail']}"


@pytest.mark.tf
def test_sampled_generated_mutants_are_not_verified(checked: dict[str, Any]) -> None:
    known = set(bench.KNOWN_SURVIVORS)
    sampled = [
        m for m in checked["mutants"] if (m["seed"], m["operator"], m["description"]) not in known
    ]
    different = [m for m in sampled if m["equivalent"] is False]
    assert len(different) >= 12, [m["equivalence_reason"] for m in sampled]
    survivors = [f"{m['where']} {m['description']}" for m in different if m["status"] == "verified"]
    assert survivors == []


@pytest.mark.tf
@pytest.mark.parametrize("name", [seed.name for seed in SEEDS])
def test_seed_is_verified_on_each_seed_value(checked: dict[str, Any], name: str) -> None:
    blocks = [c for c in checked["correct"] if c["seed"] == name and c["variant"] == "seed"]
    assert [c["seed_value"] for c in blocks] == TEST_SEED_VALUES
    assert [(c["status"], c["detail"]) for c in blocks if c["status"] != "verified"] == []


@pytest.mark.tf
@pytest.mark.parametrize("key", sorted(TEST_VARIANTS), ids=" ".join)
def test_variant_is_equivalent_and_verified(checked: dict[str, Any], key: tuple[str, str]) -> None:
    blocks = [c for c in checked["correct"] if (c["seed"], c["variant"]) == key]
    assert len(blocks) == len(TEST_SEED_VALUES)
    assert blocks[0]["not_equivalent"] is None
    assert [(c["status"], c["detail"]) for c in blocks if c["status"] != "verified"] == []


# -- the trust corpus --------------------------------------------------------------------------

TRUST = bench.load_trust()
TRUST_SAMPLE = (
    "s1_frozen_layer_ffn",
    "s1_numpy_ln",
    "s1_first_call_ln",
    "s1_regime_softmax_empty",
    "s1_wide_weights_sublayer",
    "s2_list_zero_batch_ffn",
    "s2_eager_only_ffn",
    "s5_quad_forall",
    "s5_newcommand",
)
"""One case of each kind the issue names (a weight a frozen layer or a NumPy array holds, the
first call, a regime's outputs, the wide-weights regime on weights that are not trained; a
Python side effect and an eager-only branch under ``tf.function``; a side condition and a macro
before a wrong formula), each with its twin."""


def test_trust_cases_state_a_verdict_for_every_block_and_pair_a_wrong_with_a_correct() -> None:
    cases: dict[str, list[str]] = {}
    for block in TRUST:
        cases.setdefault(block.case, []).append(block.expect)
    assert len(TRUST) >= 80
    assert {block.section for block in TRUST} == {"1", "2", "5"}
    for case, expects in cases.items():
        assert "verified" in expects, f"{case}: no correct twin"
        assert set(expects) - {"verified"}, f"{case}: nothing wrong to catch"
    assert set(TRUST_SAMPLE) <= set(cases)


def test_the_corpus_words_for_a_verdict() -> None:
    verdict = bench.Verdict
    assert bench.observed(verdict("verified", "", "agrees")) == "verified"
    assert bench.observed(verdict("verified", "", None)) == "verified"
    assert bench.observed(verdict("verified", "", "not_executable")) == "not-checked"
    assert bench.observed(verdict("mismatch", "", "not_executable")) == "formula-mismatch"
    assert bench.observed(verdict("mismatch", "", "agrees", code_failed=True)) == "mismatch"
    assert bench.observed(verdict("mismatch", "", "differs")) == "formula-mismatch"
    assert bench.observed(verdict("mismatch", "", "agrees")) == "mismatch"
    assert bench.observed(verdict("error", "", None)) == "error"
    assert bench.trust_outcome("mismatch", "not-checked") == "false pass"
    assert bench.trust_outcome("formula-mismatch", "verified") == "false pass"
    assert bench.trust_outcome("verified", "mismatch") == "false alarm"
    assert bench.trust_outcome("mismatch", "error") == "other"
    assert bench.trust_outcome("error", "verified") == "false pass"
    assert bench.trust_outcome("verified", "not-checked") == "other"


@pytest.mark.tf
def test_a_sample_of_the_trust_corpus_has_no_false_pass_and_no_false_alarm() -> None:
    blocks = [block for block in TRUST if block.case in TRUST_SAMPLE]
    report = bench.run_trust(blocks, workers=1)
    missed = [
        f"{r['outcome']}: {r['where']} expected {r['expect']}, got {r['got']}: {r['detail']}"
        for r in report["blocks"]
        if r["outcome"] != "right"
    ]
    assert missed == []
