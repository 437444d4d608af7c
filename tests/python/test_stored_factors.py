"""Run.factors as stored (issue 64, item 6): with store= the arrays are the stored bytes at
their types (f16 float16, bf16 uint16 bits, ggml types uint8 blocks), their nbytes the
record's bytes_after; Run.factors_f32 the same factors decoded, which embedlab.dequantize
reproduces from the stored arrays."""

import numpy as np
import pytest

import embedlab

STORES = ["f16", "bf16", "q8_0"]


@pytest.fixture(scope="module")
def runs(stories, heldout):
    """(method, store) -> Run on the smallest model: pca and lle, each store and none."""
    settings = {"pca": dict(rank=8), "lle": dict(keep_ratio=0.5, k=4, freq_text=heldout)}
    out = {}
    for method, fields in settings.items():
        for store in STORES + [None]:
            store_field = {"store": store} if store else {}
            out[method, store] = embedlab.compress(stories, method, **fields, **store_field)
    return out


def stored_bytes(run):
    """The record's count of the table's bytes as stored, and the summary's (the same)."""
    storage = run.record["accounting"]["storage"]
    assert run.summary["bytes_after"] == storage["bytes_after"]
    return storage["bytes_after"]


@pytest.mark.parametrize("method", ["pca", "lle"])
@pytest.mark.parametrize("store", STORES + [None])
def test_stored_arrays_are_the_bytes_the_record_counts(runs, method, store):
    run = runs[method, store]
    assert sum(a.nbytes for a in run.factors.values()) == stored_bytes(run)
    assert set(run.factors) == set(run.factors_f32) == set(run.factor_types)


@pytest.mark.parametrize("method", ["pca", "lle"])
@pytest.mark.parametrize("store", STORES)
def test_stored_arrays_have_the_stored_types(runs, method, store):
    run = runs[method, store]
    stored = {n: t for n, t in run.factor_types.items() if t == store}
    assert stored, f"no factor of {method} was stored as {store}: {run.factor_types}"
    for name, type_ in run.factor_types.items():
        a, f32 = run.factors[name], run.factors_f32[name]
        if type_ == "f16":
            assert a.dtype == np.float16 and a.shape == f32.shape
        elif type_ == "bf16":
            assert a.dtype == np.uint16 and a.shape == f32.shape
        elif type_ == "q8_0":
            # ggml's blocks: 32 values in 34 bytes (an f16 scale and 32 int8), a row per row.
            assert a.dtype == np.uint8 and a.shape == (int(np.prod(f32.shape[:-1])), f32.shape[-1] // 32 * 34)
        else:
            assert type_ in ("f32", "int16", "int32"), type_
            assert a.dtype == f32.dtype and np.array_equal(a, f32)
        if type_ in STORES:
            assert f32.dtype == np.float32


@pytest.mark.parametrize("method", ["pca", "lle"])
@pytest.mark.parametrize("store", STORES)
def test_dequantize_gives_the_values_the_model_runs_on(runs, method, store):
    run = runs[method, store]
    for name, type_ in run.factor_types.items():
        if type_ in STORES:
            f32 = run.factors_f32[name]
            decoded = embedlab.dequantize(run.factors[name], type_, f32.shape)
            assert decoded.dtype == np.float32 and np.array_equal(decoded, f32), name


def test_f16_and_bf16_decode_with_numpy_alone(runs):
    f16 = runs["pca", "f16"]
    assert np.array_equal(f16.factors["Z"].astype(np.float32), f16.factors_f32["Z"])
    bf16 = runs["pca", "bf16"]
    bits = bf16.factors["Z"].astype(np.uint32) << 16  # bf16 is float32's upper half
    assert np.array_equal(bits.view(np.float32), bf16.factors_f32["Z"])


def test_unstored_factors_are_float32_as_fitted(runs):
    run = runs["pca", None]
    assert run.factor_types == {"mu": "f32", "Z": "f32", "P": "f32"}
    for name, a in run.factors.items():
        assert a.dtype == np.float32 and np.array_equal(a, run.factors_f32[name])


def test_quant_blocks_decode_to_the_models_table(stories):
    run = embedlab.compress(stories, "quant", type="q8_0")
    assert run.factor_types == {"blocks": "q8_0"}
    table = embedlab.dequantize(run.factors["blocks"], "q8_0")
    assert table.shape == (run.model.vocab_size, run.model.dim)
    assert np.array_equal(table, run.model.embedding_table())


def test_dequantize_refuses_what_is_not_blocks():
    with pytest.raises(embedlab.InputError, match="'q9' is not a stored type"):
        embedlab.dequantize(np.zeros((2, 34), np.uint8), "q9")
    with pytest.raises(embedlab.InputError, match="uint8 blocks"):
        embedlab.dequantize(np.zeros((2, 32), np.float32), "q8_0")
    with pytest.raises(embedlab.InputError, match="not whole q8_0 blocks"):
        embedlab.dequantize(np.zeros((2, 33), np.uint8), "q8_0")
    with pytest.raises(embedlab.InputError, match="shape holds 3 values"):
        embedlab.dequantize(np.zeros((1, 34), np.uint8), "q8_0", (3,))


@pytest.mark.parametrize("store", STORES)
def test_stored_arrays_are_the_exported_tensors_bytes(tinygpt2, tmp_path, store):
    from conftest import read_safetensors

    run = embedlab.compress(tinygpt2, "pca", rank=8, store=store)
    run.export(tmp_path / "out")
    written = read_safetensors(tmp_path / "out" / "model.safetensors")
    for name, a in run.factors.items():
        assert a.tobytes() == written[f"wte.pca.{name}"].tobytes(), name
