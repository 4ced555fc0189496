"""Exported artifacts checked against the formula: a SavedModel's signature, a ``.keras``
model and TFLite files (float32, float16 weights, float16 outputs, int8) run by TensorFlow's own interpreter, exported
for real once per test session (fixtures/artifacts/export.py), drifted exports caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from formula_check.errors import SnippetError
from formula_check.model import Location, Status
from formula_check.pages.blocks import Settings, page_blocks
from formula_check.results import CheckResult
from formula_check.session.engine import Engine
from formula_check.snippets import resolve_code

pytestmark = pytest.mark.tf

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "artifacts"
PATHS = {
    "attn.W_q": "wq.kernel", "attn.b_q": "wq.bias", "attn.W_k": "wk.kernel",
    "attn.b_k": "wk.bias", "attn.W_v": "wv.kernel", "attn.b_v": "wv.bias",
    "attn.W_o": "wo.kernel", "attn.b_o": "wo.bias", "norm1.gamma": "norm1.gamma",
    "norm1.beta": "norm1.beta", "ffn.W_1": "ff1.kernel", "ffn.b_1": "ff1.bias",
    "ffn.W_2": "ff2.kernel", "ffn.b_2": "ff2.bias", "norm2.gamma": "norm2.gamma",
    "norm2.beta": "norm2.beta",
}  # fmt: skip
DIMS = 'dims="b=2 n=5 d_model=8 h=2 depth=4 d_ff=16" formula="off" timing="off"'


def weights(under: str) -> str:
    """The weight map with every path under ``under`` (the block's place in the artifact)."""
    return " ".join(f"{name}={under}{path}" for name, path in PATHS.items())


BLOCKS = [  # id, code=, mask, weights under, status
    ("source", "transformer_block:TransformerBlock", "padding", "", Status.VERIFIED),
    ("saved-model", "saved_model:artifacts/block", "padding", "block.", Status.VERIFIED),
    ("keras", "artifacts/block.keras", "padding", "TransformerBlock[0].", Status.VERIFIED),
    ("tflite", "tflite:artifacts/block.tflite::artifacts/block", "padding", "block.", Status.VERIFIED),
    ("float16", "artifacts/block_f16.tflite::artifacts/block", "padding", "block.", Status.VERIFIED),
    ("int8", "artifacts/block_int8.tflite::artifacts/block", "none", "block.", Status.VERIFIED),
    ("half-outputs", "saved_model:artifacts/block_half", "padding", "block.", Status.VERIFIED),
    ("half-tflite", "artifacts/block_half.tflite::artifacts/block", "padding", "block.", Status.VERIFIED),
    ("mask-flipped", "saved_model:artifacts/drift_mask", "padding", "block.", Status.MISMATCH),
    ("op-changed", "artifacts/drift_op.tflite::artifacts/block", "padding", "block.", Status.MISMATCH),
    ("coarse-int8", "artifacts/drift_int8.tflite::artifacts/block", "none", "block.", Status.MISMATCH),
]  # fmt: skip


def page_text() -> str:
    lines = ["# Artifacts", ""]
    for block_id, code, mask, under, _ in BLOCKS:
        init = ' kind="layer" init="d_model=d_model num_heads=h d_ff=d_ff"' if not under else ""
        lines += [
            f'```formula id="{block_id}" oracle="encoder_layer" code="{code}" mask="{mask}" '
            f'{DIMS}{init} weights="{weights(under)}"',
            r"\text{LayerNorm}(y + \text{FFN}(y))",
            "```",
            "",
        ]
    return "\n".join(lines)


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project holding the block's module and every artifact the export script makes."""
    root = tmp_path_factory.mktemp("artifacts")
    shutil.copy(FIXTURES / "transformer_block.py", root)
    subprocess.run(
        [sys.executable, str(FIXTURES / "export.py"), str(root / "artifacts")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return root


@pytest.fixture(scope="module")
def artifact_engine(project: Path) -> Iterator[Engine]:
    """One uncached engine for this module's checks (each still runs in a process of its own)."""
    with Engine(project, use_cache=False) as engine:
        yield engine


@pytest.fixture(scope="module")
def results(project: Path, artifact_engine: Engine) -> dict[str, CheckResult]:
    blocks = page_blocks(page_text().split("\n"), page="docs/p.md", settings=Settings(project))
    found = {}
    for block in blocks:
        assert block.spec is not None, block.error
        found[block.spec.block_id] = artifact_engine.check(block.spec)
    return found


@pytest.mark.parametrize(("block_id", "status"), [(b[0], b[4]) for b in BLOCKS])
def test_each_artifact_is_judged_against_the_formula(
    results: dict[str, CheckResult], block_id: str, status: Status
) -> None:
    result = results[block_id]
    assert result.status is status, result.headline()
    line = 3 + 4 * [b[0] for b in BLOCKS].index(block_id)
    assert result.headline().startswith(f"docs/p.md:{line} [{block_id}]: {status.value}")


def test_the_card_names_the_artifact_its_dtype_and_what_its_own_weights_hide(
    results: dict[str, CheckResult],
) -> None:
    notes = results["float16"].notes
    assert (
        "artifact: the TFLite file artifacts/block_f16.tflite, signature serving_default, "
        "computing in float32, weights in float16; weights read from artifacts/block"
    ) in notes
    kept = next(n for n in notes if n.startswith("weights at their exported values"))
    assert "hold only zeros or ones" not in kept  # exported with its weights moved
    assert not any(n.startswith("artifact:") for n in results["source"].notes)


def test_a_keras_model_s_first_call_is_judged_before_its_weights_move(
    results: dict[str, CheckResult],
) -> None:
    """A ``.keras`` file's weights are moved, as a layer's are; its first call, on the
    weights it was saved with, is judged too. An artifact whose weights stay is called once."""
    assert "first call" in results["keras"].regimes()
    assert "first call" not in results["saved-model"].regimes()


def test_a_float16_weight_model_is_judged_on_its_rounded_weights(
    results: dict[str, CheckResult],
) -> None:
    """TFLite's float16 conversion computes in float32 on weights rounded to float16: the
    oracle takes the same rounded weights, and float32's rounding is the tolerance."""
    float16 = results["float16"].verdicts[0]  # the check's own inputs (then its regimes')
    assert "float32 rounding" in float16.tolerance and "8192" not in float16.tolerance
    assert "int8" not in float16.tolerance


def test_an_int8_model_is_judged_with_what_its_quantization_explains(
    results: dict[str, CheckResult],
) -> None:
    """The int8 model's tolerance is float32's plus its activations' rounding (measured) and
    its weights' (bounded), said on the card; calibrated a hundred times too small, its
    tensors clip, which is no rounding: a mismatch naming the tensors that saturated."""
    verdict = results["int8"].verdicts[0]
    assert verdict.ok and "+ int8 quantization: its activations' rounding as measured" in (
        verdict.tolerance
    )
    assert "weights' rounding bounded" in verdict.tolerance
    assert 0.01 < verdict.atol < 1.0  # steps of about 0.02 on outputs of unit scale
    coarse = results["coarse-int8"]
    assert not coarse.verdicts[0].ok and coarse.verdicts[0].used > 3
    saturated = next(n for n in coarse.notes if n.startswith("int8 tensors saturated"))
    assert "tfl.quantize" in saturated  # the input, calibrated on values 100 times smaller


def test_a_weight_the_artifact_does_not_expose_is_an_error_naming_those_it_does(
    project: Path, artifact_engine: Engine
) -> None:
    text = (
        '```formula id="missing" oracle="encoder_layer" code="saved_model:artifacts/block" '
        f'mask="padding" {DIMS} weights="{weights("block.").replace("block.ff2.bias", "block.b2")}"'
        "\nx\n```\n"
    )
    (block,) = page_blocks(text.split("\n"), page="docs/q.md", settings=Settings(project))
    assert block.spec is not None
    result = artifact_engine.check(block.spec)
    assert result.status is Status.ERROR
    assert result.failure is not None
    assert "does not expose a weight the map names" in result.failure.message
    assert "block.ff2.bias" in result.failure.message  # among the weights it exposes


def test_a_tflite_file_without_its_saved_model_cannot_give_weights(
    project: Path, artifact_engine: Engine
) -> None:
    text = (
        '```formula id="bare" oracle="encoder_layer" code="artifacts/block.tflite" '
        f'mask="padding" {DIMS} weights="{weights("block.")}"\nx\n```\n'
    )
    (block,) = page_blocks(text.split("\n"), page="docs/r.md", settings=Settings(project))
    assert block.spec is not None
    result = artifact_engine.check(block.spec)
    assert result.status is Status.ERROR
    assert result.failure is not None
    assert "fourth part of code=" in result.failure.message


# the references themselves: pure, no TensorFlow ---------------------------------------------


def test_an_artifact_reference_digests_its_files(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"graph")
    where = Location("docs/p.md", 3)
    first = resolve_code("saved_model:m", tmp_path, where)
    assert first.origin == "artifact"
    assert dict(first.artifact) == {
        "format": "saved_model", "path": "m", "signature": "serving_default", "weights_from": ""
    }  # fmt: skip
    (model / "saved_model.pb").write_bytes(b"graph, exported again")
    assert resolve_code("saved_model:m", tmp_path, where).source != first.source


@pytest.mark.parametrize(
    ("reference", "said"),
    [
        ("saved_model:../outside", "outside the project"),
        ("saved_model:missing", "is not a SavedModel folder"),
        ("model.tflite", "does not exist; export it first"),
        ("keras:a.keras:extra", "write it as keras:FILE.keras"),
    ],
)
def test_a_bad_artifact_reference_says_what_is_wrong(
    tmp_path: Path, reference: str, said: str
) -> None:
    (tmp_path / "missing").mkdir()
    with pytest.raises(SnippetError, match=said):
        resolve_code(reference, tmp_path, Location("docs/p.md", 3))


# -- what an artifact's digest holds ----------------------------------------------------------


def _saved_model_folder(root: Path) -> Path:
    folder = root / "models" / "m"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"graph")
    (folder / "variables" / "variables.data-00000-of-00001").write_bytes(b"weights-1")
    return folder


def _manifest(root: Path) -> str:
    from formula_check.model import Location
    from formula_check.snippets import resolve_code

    return resolve_code("saved_model:models/m", root, Location("docs/p.md", 3)).source


def test_a_re_export_keeping_size_and_time_changes_the_digest(tmp_path: Path) -> None:
    """``cp -p`` keeps the size and the modification time; the new bytes must still be read
    (the inode change time moves)."""
    import os

    folder = _saved_model_folder(tmp_path)
    weights = folder / "variables" / "variables.data-00000-of-00001"
    before = _manifest(tmp_path)
    kept = weights.stat()
    weights.write_bytes(b"weights-2")  # same size
    os.utime(weights, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert _manifest(tmp_path) != before


def test_a_linked_weights_folder_is_hashed_and_one_outside_the_project_refused(
    tmp_path: Path,
) -> None:
    from formula_check.errors import SnippetError

    root = tmp_path / "project"
    folder = _saved_model_folder(root)
    kept = root / "weights-store"
    (folder / "variables").rename(kept)
    (folder / "variables").symlink_to(kept, target_is_directory=True)
    before = _manifest(root)
    assert "models/m/variables/variables.data-00000-of-00001" in before
    (kept / "variables.data-00000-of-00001").write_bytes(b"weights-3")
    assert _manifest(root) != before, "the weights behind the link are part of the digest"
    outside = tmp_path / "elsewhere"
    (folder / "variables").unlink()
    kept.rename(outside)
    (folder / "variables").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SnippetError) as refused:
        _manifest(root)
    assert "leads outside the project" in refused.value.message
    assert str(refused.value).startswith("docs/p.md:3: ")
