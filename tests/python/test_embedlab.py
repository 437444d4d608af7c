"""The Python module `embedlab` against the CLI (the same engine: numbers equal exactly),
against independent references (safetensors read here, NumPy's log-softmax) and against
its own invariants (round trips, read-only views, errors naming what is wrong).

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python -q
"""

import gc
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import read_safetensors, without_timing

embedlab = pytest.importorskip("embedlab")


# --- helpers ------------------------------------------------------------------------


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def by_suffix(tensors, suffix):
    """The one tensor whose name ends with '.<suffix>'."""
    found = [name for name in tensors if name.endswith("." + suffix)]
    assert len(found) == 1, f"{suffix}: {found} among {sorted(tensors)}"
    return tensors[found[0]]


def registry_names(run_cli):
    """The registry's method names, as the CLI lists them for an unknown --method."""
    p = run_cli("compress", "--method", "no-such-method", check=False)
    assert p.returncode == 2, p.stderr
    m = re.search(r"unknown --method 'no-such-method' \(([^)]*)\)", p.stderr)
    assert m, p.stderr
    return [name.strip() for name in m.group(1).split(",")]


# --- runs several tests read (module scope: computed once) ---------------------------


@pytest.fixture(scope="module")
def llama(tinyllama):
    return embedlab.load(str(tinyllama))


@pytest.fixture(scope="module")
def pca16(tinyllama, short_text):
    return embedlab.compress(str(tinyllama), "pca", rank=16, eval_text=str(short_text))


@pytest.fixture(scope="module")
def cli_pca16(tinyllama, short_text, run_cli, tmp_path_factory):
    """`compress --method pca --rank 16` by the CLI: its directory and its --json (embedlab.json)."""
    out = tmp_path_factory.mktemp("cli") / "pca16"
    manifest = run_cli("compress", tinyllama, "--method", "pca", "--rank", 16, "--eval-text", short_text,
                       "--out", out, "--json", "--quiet", parse_json=True)
    return out, manifest


@pytest.fixture(scope="module")
def lle8(tinyllama, short_text):
    return embedlab.compress(str(tinyllama), "lle", freq_text=str(short_text), keep_ratio=0.5, k=8)


# --- version -------------------------------------------------------------------------


def test_version_is_the_clis(run_cli):
    v = embedlab.version()
    assert isinstance(v, str) and re.fullmatch(r"\d+\.\d+\.\d+\S*", v), v
    out = run_cli("--version").stdout.strip()
    # embedlab-cli 0.1.0 (libtorch 1.13.0)
    assert re.fullmatch(r"embedlab-cli (\S+) \(libtorch [^)]+\)", out), out
    assert out.split()[1] == v


# --- load ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tinyllama", "tinygpt2", "stories"])
def test_load_matches_inspect(name, request, run_cli):
    path = request.getfixturevalue(name)
    info = run_cli("inspect", path, "--json", parse_json=True)
    m = embedlab.load(str(path))
    assert m.path == str(path)
    assert m.architecture == info["architecture"]
    assert m.vocab_size == info["vocab_size"]
    assert m.dim == info["hidden_size"]
    assert isinstance(m.config, dict)
    assert m.config["vocab_size"] == info["vocab_size"]
    assert m.config["hidden_size"] == info["hidden_size"]
    assert m.embedding_kind == "dense"
    assert isinstance(m.warnings, list)
    assert repr(m).startswith("<embedlab.Model " + str(path))


@pytest.mark.parametrize("name", ["tinyllama", "tinygpt2"])
def test_tokenize_is_int64_and_as_the_cli(name, request, run_cli, short_text):
    path = request.getfixturevalue(name)
    m = embedlab.load(str(path))
    ids = m.tokenize(short_text.read_text(encoding="utf-8"))
    assert isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.ndim == 1 and ids.size > 500
    cli = run_cli("tokenize", path, "--text", short_text, "--json", parse_json=True)
    assert ids.tolist() == cli["ids"]


@pytest.mark.parametrize("name", ["tinyllama", "tinygpt2", "stories"])
def test_detokenize_round_trip(name, request):
    m = embedlab.load(str(request.getfixturevalue(name)))
    text = "Once upon a time there was a little girl named Lily. She loved to play outside in the sun."
    ids = m.tokenize(text)
    assert m.detokenize(ids) == text
    assert m.detokenize(list(ids)) == text  # a list of ints too
    assert m.detokenize(ids[:0]) == ""


@pytest.mark.parametrize("name, tensor", [("tinyllama", "model.embed_tokens.weight"), ("tinygpt2", "wte.weight")])
def test_embedding_table_is_the_files_table(name, tensor, request):
    """The dense table equals the token table read from the safetensors file here."""
    path = request.getfixturevalue(name)
    m = embedlab.load(str(path))
    table = m.embedding_table()
    assert table.dtype == np.float32 and table.shape == (m.vocab_size, m.dim)
    assert np.array_equal(table, read_safetensors(path / "model.safetensors")[tensor])


def test_load_takes_a_tokenizer(stories):
    """The llama2.c file with its tokenizer given is the GGUF file: same ids, same table."""
    directory = stories.parent
    if not (directory / "stories260K.bin").exists() or not (directory / "tok512.bin").exists():
        pytest.skip(f"{directory} has no stories260K.bin and tok512.bin")
    bin_model = embedlab.load(str(directory / "stories260K.bin"), tokenizer=str(directory / "tok512.bin"))
    gguf_model = embedlab.load(str(stories))
    text = "Once upon a time there was a little girl named Lily."
    assert np.array_equal(bin_model.tokenize(text), gguf_model.tokenize(text))
    assert np.array_equal(bin_model.embedding_table(), gguf_model.embedding_table())
    missing = directory / "no-such-tokenizer.bin"
    with pytest.raises(embedlab.InputError, match=re.escape(str(missing))):
        embedlab.load(str(directory / "stories260K.bin"), tokenizer=str(missing))


def test_load_verifies_a_compressed_directory(tinyllama, tmp_path):
    run = embedlab.compress(str(tinyllama), "pca", rank=4)
    out = tmp_path / "pca4"
    run.export(str(out))
    weights = out / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(embedlab.InputError, match=re.escape(str(weights)) + ".*sha256"):
        embedlab.load(str(out))
    assert embedlab.load(str(out), verify=False).embedding_kind == "pca"


def test_embedding_table_is_read_only(llama):
    table = llama.embedding_table()
    assert not table.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        table[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        table += 1


def test_arrays_outlive_their_model(tinyllama):
    m = embedlab.load(str(tinyllama))
    table = m.embedding_table()
    expected = float(np.asarray(table[:10], dtype=np.float64).sum())
    del m
    gc.collect()
    embedlab.load(str(tinyllama)).embedding_table()  # reuse freed memory, if it was freed
    assert float(np.asarray(table[:10], dtype=np.float64).sum()) == expected


# --- perplexity ----------------------------------------------------------------------


PERPLEXITY_FIELDS = ["ppl", "nll_per_token", "tokens", "windows", "ctx", "stride", "ids", "batch_windows"]


@pytest.mark.parametrize("ctx", [128, 64])
def test_perplexity_equals_cli_eval(llama, tinyllama, short_text, run_cli, ctx):
    cli = run_cli("eval", tinyllama, "--text", short_text, "--ctx", ctx, "--json", parse_json=True)
    with open(short_text, encoding="utf-8", newline="") as f:
        py = llama.perplexity(text=f.read(), ctx=ctx)
    assert py["input_kind"] == "text"
    assert py["embedding"] == cli["embedding"] == "dense"
    for key in PERPLEXITY_FIELDS:
        assert py[key] == cli[key], key
    assert py["tokens"] > 2 * ctx  # several windows


def test_perplexity_ids_equal_text(llama, short_text):
    text = short_text.read_text(encoding="utf-8")
    by_text = llama.perplexity(text=text, ctx=64, stride=32)
    by_ids = llama.perplexity(ids=llama.tokenize(text), ctx=64, stride=32)
    assert by_ids["input_kind"] == "ids"
    for key in PERPLEXITY_FIELDS:
        assert by_ids[key] == by_text[key], key
    assert by_text["stride"] == 32 and by_text["ctx"] == 64


def test_perplexity_ids_equal_cli_ids_file(llama, tinyllama, short_text, run_cli, tmp_path):
    ids = llama.tokenize(short_text.read_text(encoding="utf-8"))[:300]
    f = tmp_path / "ids.txt"
    f.write_text(" ".join(map(str, ids)))
    cli = run_cli("eval", tinyllama, "--ids", f, "--json", parse_json=True)
    py = llama.perplexity(ids=ids)
    for key in PERPLEXITY_FIELDS:
        assert py[key] == cli[key], key


def test_logits_shape_and_nll(llama, short_text):
    ids = llama.tokenize(short_text.read_text(encoding="utf-8"))[:12]
    logits = llama.logits(ids)
    assert isinstance(logits, np.ndarray) and logits.dtype == np.float32
    assert logits.shape == (ids.size, llama.vocab_size)
    assert np.isfinite(logits).all()
    # NLL of ids[1:] from the logits (float64 log-softmax) == perplexity's, one window.
    z = logits[:-1].astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    nll = -log_p[np.arange(ids.size - 1), ids[1:]].mean()
    r = llama.perplexity(ids=ids, ctx=128)
    assert r["windows"] == 1 and r["tokens"] == ids.size - 1
    assert r["nll_per_token"] == pytest.approx(nll, rel=1e-5)
    assert r["ppl"] == pytest.approx(math.exp(nll), rel=1e-5)
    # Two tokens, the least perplexity takes.
    two = llama.perplexity(ids=ids[:2])
    assert two["tokens"] == 1
    assert two["nll_per_token"] == pytest.approx(-log_p[0, ids[1]], rel=1e-5)


def test_logits_are_causal(llama, short_text):
    """A prefix's logits do not depend on what follows it."""
    ids = llama.tokenize(short_text.read_text(encoding="utf-8"))[:20]
    full = llama.logits(ids)
    prefix = llama.logits(ids[:7])
    np.testing.assert_allclose(prefix, full[:7], rtol=1e-4, atol=1e-4)


# --- compress: pca -------------------------------------------------------------------


def summary_from_manifest(m):
    """The run summary's fields as `compress --json` (embedlab.json) states them."""
    e, a = m["evaluation"], m["accounting"]
    return {"method": m["method"], "params_before": a["params_before"], "params_after": a["params_after"],
            "ratio": a["ratio"], "ppl_original": e["baseline"]["ppl"], "ppl": e["compressed"]["ppl"],
            "delta_ln_ppl": e["delta_ln_ppl"], "mean_cosine": m["reconstruction"]["mean_cosine"],
            "eval_tokens": e["tokens"], "bytes_before": a["storage"]["bytes_before"],
            "bytes_after": a["storage"]["bytes_after"], "eval_text": e["text"]}


def test_pca_summary_equals_cli_compress(pca16, cli_pca16, tinyllama, tmp_path):
    _, manifest = cli_pca16
    s = pca16.summary
    expected = summary_from_manifest(manifest)
    assert {k: s[k] for k in expected} == expected
    assert s["parameters"] == "rank 16" and s["part"] == "token_embedding"
    assert s["model"] == str(tinyllama)
    # The whole record as the manifest has it (timings aside), the fit's eigenvalues too.
    record = pca16.record
    for key in ["method", "accounting", "reconstruction", "fit", "evaluation"]:
        assert without_timing(record[key]) == without_timing(manifest[key]), key
    # The same factors, bit for bit: Run.export writes the CLI's model.safetensors.
    written = pca16.export(str(tmp_path / "py"))
    assert written["weights_files"] == manifest["weights_files"]
    assert without_timing(written) == without_timing(manifest)


def test_pca_summary_equals_cli_worker(pca16, tinyllama, short_text, run_cli, tmp_path):
    """The CLI's own RunSummary (worker's compress job): every field but the time."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"kind": "compress", "model": str(tinyllama), "method": "pca", "rank": 16,
                               "eval_text": str(short_text)}))
    events = [json.loads(line) for line in run_cli("worker", "--job", job).stdout.splitlines()]
    result = [e for e in events if e["event"] == "result"]
    assert len(result) == 1, events[-3:]
    cli = result[0]["result"]["summary"]
    py = pca16.summary
    assert set(py) == set(cli)
    assert without_timing(py) == without_timing(cli)
    assert py["seconds"] > 0


def test_pca_dense_export(pca16, tmp_path):
    manifest = pca16.export(str(tmp_path / "d"), dense=True)
    assert manifest["method"] == "pca"
    dense = embedlab.load(str(tmp_path / "d" / "dense"))
    assert dense.embedding_kind == "dense"
    np.testing.assert_allclose(dense.embedding_table(), pca16.model.embedding_table(), rtol=0, atol=1e-6)


def test_divergence_equals_cli_eval_reference(pca16, cli_pca16, llama, tinyllama, short_text, run_cli):
    out, _ = cli_pca16
    cli = run_cli("eval", out, "--reference", tinyllama, "--text", short_text, "--json", "--quiet",
                  parse_json=True)
    py = pca16.model.divergence(llama, text=short_text.read_text(encoding="utf-8"))
    assert py["reference"] == str(tinyllama)
    keys = ["tokens", "windows", "ctx", "stride", "reference_ppl", "kl_mean", "kl_median", "kl_p99", "kl_max",
            "top1_agreement", "window_kl_mean", "window_top1", "delta_ln_ppl"]
    assert {k: py[k] for k in keys} == {k: cli[k] for k in keys}
    # "ppl" differs by name only: eval --reference reports its perplexity pass's, divergence() the
    # divergence pass's own (the one delta_ln_ppl is taken from); they agree to ~1e-7.
    assert py["ppl"] == pytest.approx(cli["ppl"], rel=1e-6)
    assert py["delta_ln_ppl"] == pytest.approx(math.log(py["ppl"]) - math.log(py["reference_ppl"]), abs=1e-12)
    assert 0 < py["kl_mean"] and 0 < py["top1_agreement"] < 1
    # The CLI's directory, loaded here, evaluates as the run in memory.
    assert embedlab.load(str(out)).perplexity(text=short_text.read_text(encoding="utf-8"))["ppl"] == \
        pca16.summary["ppl"]


@pytest.mark.parametrize("task, data", [("sst2", "SST-2"), ("stsb", "STS-B")])
def test_task_equals_cli(llama, tinyllama, shared, run_cli, task, data):
    path = shared / "data" / "glue" / data / "dev.tsv"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    cli = run_cli("task", task, tinyllama, "--data", path, "--limit", 30, "--json", "--quiet", parse_json=True)
    py = llama.task(task, str(path), limit=30)
    assert without_timing(py) == without_timing(cli)
    assert py["n"] == 30


def test_pca_factors_rebuild_the_table(pca16, llama):
    f = pca16.factors
    assert {"Z", "P", "mu"} <= set(f)
    V, d, k = llama.vocab_size, llama.dim, 16
    assert f["Z"].shape == (V, k) and f["P"].shape == (k, d) and f["mu"].shape == (d,)
    assert all(a.dtype == np.float32 for a in f.values())
    rebuilt = pca16.model.embedding_table()
    assert rebuilt.shape == (V, d) and rebuilt.dtype == np.float32
    np.testing.assert_allclose(f["Z"] @ f["P"] + f["mu"], rebuilt, rtol=1e-5, atol=1e-5)
    # What the summary counts is what is stored.
    assert pca16.summary["params_after"] == sum(a.size for a in f.values())
    assert pca16.summary["params_before"] == V * d
    # mean cosine, recomputed here from the two tables.
    E = llama.embedding_table().astype(np.float64)
    R = rebuilt.astype(np.float64)
    cos = (E * R).sum(1) / (np.linalg.norm(E, axis=1) * np.linalg.norm(R, axis=1))
    assert cos.mean() == pytest.approx(pca16.summary["mean_cosine"], abs=1e-6)


def test_run_model_evaluates_as_the_summary(pca16, short_text):
    m = pca16.model
    assert m.embedding_kind != "dense"
    assert m.vocab_size == pca16.factors["Z"].shape[0]
    r = m.perplexity(text=short_text.read_text(encoding="utf-8"))
    assert r["ppl"] == pca16.summary["ppl"]
    assert r["tokens"] == pca16.summary["eval_tokens"]


def test_run_model_outlives_the_run(tinyllama, llama):
    run = embedlab.compress(str(tinyllama), "pca", rank=8)
    model = run.model
    table = model.embedding_table().copy()
    ids = llama.tokenize("Once upon a time there was a cat.")
    expected = model.perplexity(ids=ids)["ppl"]
    del run
    gc.collect()
    assert np.array_equal(model.embedding_table(), table)
    assert model.perplexity(ids=ids)["ppl"] == expected


def test_run_model_has_the_tokenizer(llama):
    run = embedlab.compress(llama, "pca", rank=8)
    text = "Once upon a time there was a cat."
    assert np.array_equal(run.model.tokenize(text), llama.tokenize(text))
    assert run.model.detokenize(llama.tokenize(text)) == text


def test_compress_takes_a_model_or_a_path(llama, pca16, short_text):
    run = embedlab.compress(llama, "pca", rank=16, eval_text=str(short_text))
    assert without_timing(run.summary) == without_timing(pca16.summary)
    assert run.request == pca16.request
    assert run.request["rank"] == 16 and run.request["method"] == "pca"
    assert repr(run).startswith("<embedlab.Run ")


# --- compress: lle and export ---------------------------------------------------------


def test_lle_factors_equal_their_export(lle8, tmp_path, tinyllama):
    f = lle8.factors
    assert {"common_ids", "common_rows", "neighbour_ids", "weights", "norms"} <= set(f)
    manifest = lle8.export(str(tmp_path / "lle"))
    assert manifest["method"] == "lle"
    stored = read_safetensors(tmp_path / "lle" / "model.safetensors")
    for name, array in f.items():
        on_disk = by_suffix(stored, "lle." + name)
        assert on_disk.dtype == array.dtype, name
        assert on_disk.shape == array.shape, name
        assert np.array_equal(on_disk, array), name
    # The manifest's factor shapes are these.
    for name, shape in manifest["factor_tensors"].items():
        assert list(f[name.rsplit(".", 1)[1]].shape) == shape
    # Loaded back, the directory rebuilds the run's table exactly.
    back = embedlab.load(str(tmp_path / "lle"))
    assert back.embedding_kind == lle8.model.embedding_kind
    assert np.array_equal(back.embedding_table(), lle8.model.embedding_table())


def test_lle_keeps_common_rows(lle8, llama):
    f = lle8.factors
    common = f["common_ids"].astype(np.int64)
    original, rebuilt = llama.embedding_table(), lle8.model.embedding_table()
    assert np.array_equal(rebuilt[common], original[common])
    assert np.array_equal(f["common_rows"], original[common])
    rare = np.setdiff1d(np.arange(llama.vocab_size), common)
    assert f["neighbour_ids"].shape == (rare.size, 8)
    assert np.isin(f["neighbour_ids"].astype(np.int64), common).all()  # rare rows from common ones
    assert not np.array_equal(rebuilt[rare], original[rare])


def test_export_refuses_a_foreign_directory(pca16, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not EmbedLab's")
    with pytest.raises(embedlab.InputError, match=re.escape(str(foreign))):
        pca16.export(str(foreign))
    with pytest.raises(embedlab.InputError, match=re.escape(str(foreign))):
        pca16.export(str(foreign), overwrite=True)
    assert (foreign / "notes.txt").read_text() == "not EmbedLab's"
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_export_overwrites_an_embedlab_directory(pca16, lle8, tmp_path):
    out = tmp_path / "run"
    assert pca16.export(str(out))["method"] == "pca"
    with pytest.raises(embedlab.InputError, match=re.escape(str(out))):
        lle8.export(str(out))
    assert json.loads((out / "embedlab.json").read_text())["method"] == "pca"
    assert lle8.export(str(out), overwrite=True)["method"] == "lle"
    assert json.loads((out / "embedlab.json").read_text())["method"] == "lle"
    assert np.array_equal(embedlab.load(str(out)).embedding_table(), lle8.model.embedding_table())


# --- errors --------------------------------------------------------------------------


def test_exception_types():
    assert issubclass(embedlab.InputError, ValueError)
    assert embedlab.InputError.__module__ == embedlab.Cancelled.__module__ == "embedlab"
    assert issubclass(embedlab.Cancelled, Exception)
    assert not issubclass(embedlab.Cancelled, ValueError)


@pytest.mark.parametrize("fields, named", [({"rank": 0}, "rank"), ({"rank": -3}, "rank"),
                                           ({"bogus_field": 1}, "bogus_field"), ({"rank": "16"}, "rank"),
                                           ({"rank": 16, "keep_ratio": 0.5}, "keep_ratio")])
def test_compress_refuses_bad_fields(tinyllama, fields, named):
    with pytest.raises(embedlab.InputError, match=re.escape(named)):
        embedlab.compress(str(tinyllama), "pca", **fields)


def test_compress_refuses_unknown_method(tinyllama):
    with pytest.raises(embedlab.InputError, match="no-such-method"):
        embedlab.compress(str(tinyllama), "no-such-method", rank=4)


def test_compress_refuses_rank_above_dim(tinyllama):
    with pytest.raises(embedlab.InputError, match="rank"):
        embedlab.compress(str(tinyllama), "pca", rank=4096)


def test_load_names_a_missing_path(tmp_path):
    missing = tmp_path / "no" / "such-model"
    with pytest.raises(embedlab.InputError, match=re.escape(str(missing))):
        embedlab.load(str(missing))


def test_perplexity_refuses_short_input(llama):
    with pytest.raises(embedlab.InputError, match="0 token"):
        llama.perplexity(text="")
    with pytest.raises(embedlab.InputError, match="1 token"):
        llama.perplexity(ids=[5])
    with pytest.raises(embedlab.InputError, match="exactly one of text= or ids="):
        llama.perplexity()
    with pytest.raises(embedlab.InputError, match="exactly one of text= or ids="):
        llama.perplexity(text="a b c", ids=[1, 2, 3])


def test_ids_outside_the_vocabulary_are_named(llama):
    V = llama.vocab_size
    for call in (lambda ids: llama.perplexity(ids=ids), llama.logits, llama.detokenize):
        with pytest.raises(embedlab.InputError, match=f"token id {V} at position 2"):
            call([1, 2, V, 3])
        with pytest.raises(embedlab.InputError, match="token id -1 at position 0"):
            call(np.array([-1, 2, 3]))


def test_float_ids_are_refused(llama):
    for ids in (np.array([1.0, 2.0, 3.0]), [1.5, 2, 3], [[1, 2], [3, 4]], "1 2 3", [True, False, True]):
        with pytest.raises(embedlab.InputError, match="1-D sequence of integers"):
            llama.perplexity(ids=ids)
        if not isinstance(ids, list) or not isinstance(ids[0], list):  # logits takes a batch
            with pytest.raises(embedlab.InputError, match="1-D sequence of integers"):
                llama.logits(ids)
    with pytest.raises(embedlab.InputError, match=r"logits: ids\[1\]: token ids must be a 1-D sequence of integers"):
        llama.logits([[1, 2], [3.5, 4]])
    # Any integer type is taken, as its values.
    ids = [9038, 2501, 263, 931]
    expected = llama.perplexity(ids=ids)["ppl"]
    for dtype in (np.uint16, np.int32, np.uint64):
        assert llama.perplexity(ids=np.array(ids, dtype=dtype))["ppl"] == expected


@pytest.mark.parametrize("stride", [0, -5])
def test_perplexity_refuses_a_stride_outside_1_to_ctx(llama, stride):
    with pytest.raises(embedlab.InputError, match="stride"):
        llama.perplexity(ids=np.arange(1, 40), ctx=8, stride=stride)
    with pytest.raises(embedlab.InputError, match="stride must be between 1 and ctx"):
        llama.perplexity(ids=np.arange(1, 40), ctx=8, stride=9)


def test_perplexity_refuses_bad_windows(llama):
    with pytest.raises(embedlab.InputError, match="ctx"):
        llama.perplexity(ids=[1, 2, 3], ctx=0)
    with pytest.raises(embedlab.InputError, match="256"):
        llama.perplexity(ids=[1, 2, 3], ctx=100000)
    with pytest.raises(embedlab.InputError, match="stride"):
        llama.perplexity(ids=[1, 2, 3], ctx=8, stride=9)


def test_logits_refuse_empty_and_too_long(llama):
    with pytest.raises(embedlab.InputError, match="no token ids"):
        llama.logits([])
    n = llama.config["max_positions"]
    assert llama.logits(np.ones(n, dtype=np.int64)).shape == (n, llama.vocab_size)
    with pytest.raises(embedlab.InputError, match=f"{n + 1} ids are more than the model's context of {n}"):
        llama.logits(np.ones(n + 1, dtype=np.int64))


# --- progress, cancel, Ctrl-C, the GIL -----------------------------------------------


def test_progress_reports_sane_values(tinyllama, short_text):
    calls = []

    def progress(stage, done, total, overall):
        calls.append((stage, done, total, overall))

    embedlab.compress(str(tinyllama), "pca", rank=8, eval_text=str(short_text), progress=progress)
    assert len(calls) >= 3
    stages = []
    for stage, done, total, overall in calls:
        assert isinstance(stage, str) and stage
        assert isinstance(done, int) and isinstance(total, int)
        assert 0 <= done and (total <= 0 or done <= total), (stage, done, total)
        assert 0.0 <= overall <= 1.0, (stage, overall)
        if not stages or stages[-1] != stage:
            stages.append(stage)
    overall = [c[3] for c in calls]
    assert overall == sorted(overall), "overall went backwards"
    assert overall[-1] == pytest.approx(1.0)
    assert "eval original" in stages and "eval compressed" in stages, stages


def test_progress_false_cancels(tinyllama, short_text):
    calls = []

    def progress(stage, done, total, overall):
        calls.append(stage)
        return False

    with pytest.raises(embedlab.Cancelled):
        embedlab.compress(str(tinyllama), "pca", rank=8, eval_text=str(short_text), progress=progress)
    assert len(calls) == 1


def test_progress_exception_propagates(tinyllama, short_text):
    def progress(stage, done, total, overall):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="^boom$") as info:
        embedlab.compress(str(tinyllama), "pca", rank=8, eval_text=str(short_text), progress=progress)
    assert type(info.value) is ValueError


def test_progress_of_perplexity_and_export(llama, pca16, short_text, tmp_path):
    calls = []
    llama.perplexity(text=short_text.read_text(encoding="utf-8"), progress=lambda *a: calls.append(a))
    assert calls and {c[0] for c in calls} == {"eval"}
    assert calls[-1][1] == calls[-1][2] and calls[-1][3] == pytest.approx(1.0)
    with pytest.raises(embedlab.Cancelled):
        llama.perplexity(text=short_text.read_text(encoding="utf-8"), progress=lambda *a: False)
    with pytest.raises(embedlab.Cancelled):
        pca16.export(str(tmp_path / "cancelled"), progress=lambda *a: False)
    assert not (tmp_path / "cancelled").exists()  # atomic: nothing left


def test_ctrl_c_interrupts(llama, heldout):
    """SIGINT during the engine's work raises KeyboardInterrupt (not Cancelled)."""
    text = heldout.read_text(encoding="utf-8")
    started = threading.Event()
    armed = [True]

    def on_sigint(signum, frame):
        if armed[0]:
            raise KeyboardInterrupt

    def progress(stage, done, total, overall):
        started.set()

    def interrupt():
        started.wait(30)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        t = threading.Thread(target=interrupt)
        t.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            llama.perplexity(text=text, ctx=32, progress=progress)
        assert time.monotonic() - t0 < 10
        t.join()
    finally:
        armed[0] = False
        signal.signal(signal.SIGINT, old)


def test_gil_is_released(llama, heldout):
    """While perplexity runs in a thread, this thread keeps running Python."""
    ids = llama.tokenize(heldout.read_text(encoding="utf-8"))[:6000]
    result = {}
    t = threading.Thread(target=lambda: result.update(llama.perplexity(ids=ids)))
    gaps, last = [], time.monotonic()
    t0 = last
    t.start()
    while t.is_alive():
        time.sleep(0.002)
        now = time.monotonic()
        gaps.append(now - last)
        last = now
    t.join()
    elapsed = time.monotonic() - t0
    assert result["tokens"] == ids.size - 1
    assert elapsed > 0.2, f"too quick to tell ({elapsed:.3f} s)"
    assert max(gaps) < 0.25 * elapsed, f"longest pause {max(gaps):.3f} s of {elapsed:.3f} s"


# --- account, methods ------------------------------------------------------------------


def test_account_equals_cli(run_cli):
    py = embedlab.account("pca", vocab=32000, dim=128, rank=16)
    cli = run_cli("account", "--method", "pca", "--vocab", 32000, "--dim", 128, "--rank", 16, "--json",
                  parse_json=True)
    assert py == cli
    assert "storage" not in py


@pytest.mark.parametrize("stored_type", ["f32", "F32", "q8_0"])
def test_account_stored_type_equals_cli(run_cli, stored_type):
    py = embedlab.account("pca", 32000, 128, rank=16, stored_type=stored_type)
    cli = run_cli("account", "--method", "pca", "--vocab", 32000, "--dim", 128, "--rank", 16, "--stored-type",
                  stored_type, "--json", parse_json=True)
    assert py == cli
    assert py["storage"]["stored_type_before"] == stored_type.upper()


def test_account_options_equal_cli(run_cli):
    py = embedlab.account("pca", 50257, 768, rank=64, model_params=124_000_000, tied=False, positions=786432)
    cli = run_cli("account", "--method", "pca", "--vocab", 50257, "--dim", 768, "--rank", 64, "--model-params",
                  124000000, "--untied", "--positions", 786432, "--json", parse_json=True)
    assert py == cli


def test_account_refuses_bad_input():
    with pytest.raises(embedlab.InputError, match="rank"):
        embedlab.account("pca", 32000, 128, rank=0)
    with pytest.raises(embedlab.InputError, match="no-such-method"):
        embedlab.account("no-such-method", 32000, 128)
    with pytest.raises(embedlab.InputError, match="stored"):
        embedlab.account("pca", 32000, 128, rank=16, stored_type="nonsense")


def test_account_refuses_a_table_too_large_to_count():
    # Issue 57 item 4: V d = 2^124 wrapped to params_before 0; the engine's bound (the CLI's too).
    with pytest.raises(embedlab.InputError, match=re.escape(
            "account: vocab x dim = 4611686018427387904 x 4611686018427387904 = "
            "21267647932558653966460912964485513216 parameters exceeds what EmbedLab counts (2^62)")):
        embedlab.account("pca", 2**62, 2**62, rank=8)
    with pytest.raises(embedlab.InputError, match=re.escape("exceeds what EmbedLab counts (2^62)")):
        embedlab.account("tt", 2**40, 2**24, shape=[4096, 4096], ranks=[1, 8, 1])
    big = embedlab.account("pca", 2**40, 2**21, rank=8)  # V d = 2^61: counted exactly
    assert big["params_before"] == 2**61
    assert big["params_after"] == 2**40 * 8 + 2**21 * 9


def test_methods_are_the_registry(run_cli):
    methods = embedlab.methods()
    names = [m["name"] for m in methods]
    assert names == registry_names(run_cli)
    python_types = {"str": str, "bool": bool, "int": int, "float": (int, float), "list[int]": list,
                    "list[int] (token ids)": list}
    for m in methods:
        assert m["part"] in ("token_embedding", "attention_values"), m
        assert isinstance(m["summary"], str) and m["summary"]
        assert m["fields"], m["name"]
        for field in m["fields"]:
            assert set(field) == {"name", "type", "default"}, field
            assert field["type"] in python_types, field
            assert isinstance(field["default"], python_types[field["type"]]), field
    pca = {f["name"]: f for f in next(m for m in methods if m["name"] == "pca")["fields"]}
    assert pca["rank"]["type"] == "int"
    lle = next(m for m in methods if m["name"] == "lle")
    assert lle["needs_frequency_text"] is True
    assert {"keep_ratio", "k", "freq_text"} <= {f["name"] for f in lle["fields"]}
    flat = next(m for m in methods if m["name"] == "flat")
    assert flat["part"] == "attention_values" and flat["needs_calibration_text"] is True


# --- sweep ---------------------------------------------------------------------------


def test_sweep_equals_separate_runs(llama, pca16, short_text):
    calls = []
    rows = embedlab.sweep(llama, "pca", {"rank": [8, 16]}, eval_text=str(short_text),
                          progress=lambda *a: calls.append(a))
    assert len(rows) == 2 and all(isinstance(r, dict) for r in rows)
    assert [r["parameters"] for r in rows] == ["rank 8", "rank 16"]
    assert rows[0]["params_after"] < rows[1]["params_after"]
    assert without_timing(rows[1]) == without_timing(pca16.row)
    eight = embedlab.compress(llama, "pca", rank=8, eval_text=str(short_text))
    assert without_timing(rows[0]) == without_timing(eight.row)
    assert calls  # progress reached every run


def test_sweep_refuses_bad_grids(llama):
    with pytest.raises(embedlab.InputError, match="grid must be a dict"):
        embedlab.sweep(llama, "pca", [8, 16])
    with pytest.raises(embedlab.InputError, match="grid must be a dict"):
        embedlab.sweep(llama, "pca", {})
    with pytest.raises(embedlab.InputError, match="'rank' is both"):
        embedlab.sweep(llama, "pca", {"rank": [8]}, rank=8)
    with pytest.raises(embedlab.InputError, match=r"grid\['rank'\] must be a list"):
        embedlab.sweep(llama, "pca", {"rank": 8})


def test_a_fresh_interpreter(stories):
    """In a process of its own: the import sets OMP_WAIT_POLICY=PASSIVE unless it is set (libgomp's
    spinning default made forward passes 3-4x slower), and the interpreter exits cleanly (no static
    Python object destroyed after finalisation: that aborted with 'Fatal Python error', status 134)."""
    script = ("import os, embedlab\n"
              f"m = embedlab.load({str(stories)!r})\n"
              "t = m.embedding_table()\n"
              "c = m.config\n"
              "print(os.environ.get('OMP_WAIT_POLICY'))\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(embedlab.__file__).resolve().parents[1]),
                                         os.environ.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert "Fatal Python error" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stderr
    assert p.stdout == "PASSIVE\n"
    env["OMP_WAIT_POLICY"] = "ACTIVE"  # the user's own setting is kept
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and p.stdout == "ACTIVE\n", p.stderr


# --- memory --------------------------------------------------------------------------


@pytest.mark.leak
def test_load_does_not_leak(stories):
    for _ in range(10):
        m = embedlab.load(str(stories))
        m.embedding_table()
        del m
    gc.collect()
    after_ten = rss_bytes()
    for _ in range(90):
        m = embedlab.load(str(stories))
        m.embedding_table()
        del m
    gc.collect()
    grown = rss_bytes() - after_ten
    assert grown < 50 * 2**20, f"RSS grew {grown / 2**20:.1f} MB over 90 loads"


def test_account_refuses_what_is_not_a_table_method_as_the_cli_does():
    with pytest.raises(embedlab.InputError, match="'flat' compresses the attention values"):
        embedlab.account("flat", 32000, 128)
    with pytest.raises(embedlab.InputError, match="account: .*nosuch"):
        embedlab.account("nosuch", 32000, 128)
