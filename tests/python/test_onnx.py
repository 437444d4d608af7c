"""Model.export_onnx: the CLI's export --format onnx from Python, for a loaded model and a
run's compressed model (ONNX Runtime's agreement is test_onnx's, in C++)."""

import json

import pytest

import embedlab


def test_export_onnx_equals_the_cli(tinyllama, run_cli, tmp_path):
    model = embedlab.load(tinyllama)
    ours = model.export_onnx(tmp_path / "py.onnx")  # a pathlib.Path
    cli = run_cli("export", tinyllama, "--format", "onnx", "--out", tmp_path / "cli.onnx", "--json",
                  parse_json=True)
    assert ours["bytes"] == (tmp_path / "py.onnx").stat().st_size == cli["bytes"]
    assert ours["tensors"] == cli["tensors"] and ours["architecture"] == cli["architecture"]
    with pytest.raises(embedlab.InputError, match="--force"):
        model.export_onnx(tmp_path / "py.onnx")
    assert model.export_onnx(tmp_path / "py.onnx", overwrite=True)["bytes"] == ours["bytes"]


def test_a_runs_compressed_table_is_written_as_its_factors(tinyllama, tmp_path):
    dense = embedlab.load(tinyllama).export_onnx(tmp_path / "dense.onnx")
    run = embedlab.compress(tinyllama, "pca", rank=16)
    r = run.model.export_onnx(tmp_path / "pca.onnx", with_past=True)
    assert r["embedding"] == "pca"
    assert any("pca factors" in n for n in r["notes"])
    # The table [V, d] float32 replaced by Z [V, 16], P [16, d] and the mean [d].
    V, d = run.model.vocab_size, run.model.dim
    assert dense["bytes"] - r["bytes"] == pytest.approx(4 * (V * d - V * 16 - 16 * d - d), rel=0.02)
