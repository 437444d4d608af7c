"""Chains from Python (issue 60, "the Python module takes pipeline=[...]"): compress_chain()
runs the CLI's `compress --method trim ... --then pca ... --then-store q8_0` through the same
engine call (run_pipeline), so its record, its directory and its refusals are the CLI's."""

import json
import os
import re

import pytest

import embedlab
from conftest import REPO, read_safetensors, without_timing

MODEL = REPO / "resources" / "models" / "tinygpt2-f16"  # byte-level BPE, V 50257, d 128, f16
TEXT = REPO / "resources" / "texts" / "tinystories-heldout.txt"


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """The held-out text's first 60,000 bytes (the domain) and the next 2,000 (evaluation: ~470
    tokens, four windows of 128; each pass over them costs in the 50257 logits per token, and the
    CLI's chain and Python's evaluate the original and the chain's model)."""
    data = TEXT.read_bytes()
    folder = tmp_path_factory.mktemp("chain_texts")
    (folder / "fit.txt").write_bytes(data[:60000])
    (folder / "eval.txt").write_bytes(data[60000:62000])
    return folder / "fit.txt", folder / "eval.txt"


def chain_steps(fit, coverage=0.999, rank=32, store="q8_0"):
    return [{"method": "trim", "freq_text": str(fit), "coverage": coverage},
            {"method": "pca", "rank": rank, "store": store}]


@pytest.fixture(scope="module")
def chain_pair(texts, run_cli, tmp_path_factory):
    """The same chain by the CLI (--json: its record) and by compress_chain(out=)."""
    fit, ev = texts
    folder = tmp_path_factory.mktemp("chain")
    cli_record = run_cli("compress", MODEL, "--method", "trim", "--freq-text", fit, "--coverage", "0.999",
                         "--then", "pca", "--rank", "32", "--then-store", "q8_0", "--eval-text", ev,
                         "--out", folder / "cli", "--json", "--quiet", parse_json=True)
    # The CLI writes its defaults of ctx and stride into the request; Python what it is given.
    chain = embedlab.compress_chain(str(MODEL), chain_steps(fit), eval_text=str(ev), ctx=128, stride=128,
                                    out=folder / "python")
    return cli_record, chain, folder


def comparable(record):
    """A record without its timings and dates."""
    return without_timing(json.loads(json.dumps(record)))


def test_a_chains_record_is_the_clis(chain_pair):
    cli_record, chain, _ = chain_pair
    assert comparable(chain.record) == comparable(cli_record)
    assert chain.summary == chain.record["summary"]
    assert chain.label == cli_record["pipeline"]["label"] == "trim 0.999 → pca rank 32 → q8_0"
    assert chain.summary["parameters"] == chain.label


def test_a_chains_directory_is_the_clis(chain_pair):
    _, chain, folder = chain_pair
    assert chain.out == str(folder / "python")
    manifest = json.loads((folder / "python" / "embedlab.json").read_text())
    assert chain.manifest == manifest
    cli_manifest = json.loads((folder / "cli" / "embedlab.json").read_text())
    # source.path names the model the chain started from, not its removed trimmed copy.
    for m in (manifest, cli_manifest):
        assert m["source"]["path"] == os.path.normpath(os.path.abspath(MODEL))
    assert comparable(manifest) == comparable(cli_manifest)
    for name in ("model.safetensors", "tokenizer.json", "vocab.json", "merges.txt", "config.json"):
        assert (folder / "python" / name).read_bytes() == (folder / "cli" / name).read_bytes(), name


def test_a_chain_gives_every_steps_settings_and_the_whole_chain_against_the_original(chain_pair, texts):
    _, chain, folder = chain_pair
    fit, _ = texts
    assert chain.steps == [{"method": "trim", "freq_text": str(fit), "coverage": 0.999},
                           {"method": "pca", "rank": 32, "store": "q8_0"}]
    assert chain.steps == chain.record["pipeline"]["request"]["pipeline"]
    whole = chain.whole_chain
    assert whole == chain.record["pipeline"]["whole_chain"]
    # Against the original as stored: V x d at f16; after: the stored factors, read from the file.
    assert whole["table_parameters"]["before"] == 50257 * 128
    assert whole["table_bytes"]["before"] == 50257 * 128 * 2
    kept = chain.record["pipeline"]["vocab_size"]["after"]
    tensors = read_safetensors(folder / "python" / "model.safetensors")
    factors = {name: a for name, a in tensors.items() if name.startswith("wte.pca.")}
    assert set(chain.manifest["stored_types"]) <= set(factors)
    assert factors["wte.pca.Z"].shape[0] == kept
    assert whole["table_bytes"]["after"] == sum(a.nbytes for a in factors.values())
    assert whole["table_parameters"]["after"] == kept * 32 + 32 * 128 + 128  # Z, P, mu
    assert whole["model_bytes"]["before"] == sum(
        a.nbytes for a in read_safetensors(MODEL / "model.safetensors").values())
    assert whole["model_bytes"]["after"] == sum(a.nbytes for a in tensors.values())


def test_a_chain_without_out_writes_nothing(chain_pair, texts, tmp_path, monkeypatch):
    _, chain, _ = chain_pair
    fit, _ = texts
    monkeypatch.chdir(tmp_path)
    # Trim alone (no evaluation: the cheapest chain), from a Model: the record only.
    alone = embedlab.compress_chain(embedlab.load(MODEL), chain_steps(fit)[:1])
    assert alone.out is None and alone.manifest is None
    assert list(tmp_path.iterdir()) == []
    assert alone.steps == chain.steps[:1] and alone.label == "trim 0.999"
    trimmed = alone.record["pipeline"]
    assert trimmed["vocab_size"] == chain.record["pipeline"]["vocab_size"]
    assert trimmed["whole_chain"]["table_parameters"]["after"] == trimmed["vocab_size"]["after"] * 128
    assert repr(alone) == "<embedlab.Chain trim 0.999>"
    assert repr(chain).startswith("<embedlab.Chain trim 0.999 → pca rank 32 → q8_0 in ")


def test_a_chain_of_one_method_is_that_compress(tmp_path):
    chain = embedlab.compress_chain(MODEL, [{"method": "pca", "rank": 4, "store": "f16"}])
    run = embedlab.compress(MODEL, "pca", rank=4, store="f16")
    assert without_timing(chain.summary) == without_timing(run.summary)
    assert chain.steps == [chain.record["request"]] and chain.steps[0]["store"] == "f16"
    assert chain.label == "pca rank 4 → f16"
    s = run.summary
    assert chain.whole_chain == {
        "table_parameters": {"before": s["params_before"], "after": s["params_after"], "ratio": s["ratio"]},
        "table_bytes": {"before": s["bytes_before"], "after": s["bytes_after"]},
        "model_bytes": {"before": s["model_bytes_before"], "after": s["model_bytes_after"]}}


def cli_refusal(run_cli, *args):
    p = run_cli(*args, check=False)
    assert p.returncode == 2, p.stderr
    return p.stderr


@pytest.mark.parametrize("coverage, keep", [(2, None), (None, 10)])
def test_trims_refusals_are_the_clis(texts, run_cli, tmp_path, coverage, keep):
    fit, _ = texts
    budget = ["--coverage", str(coverage)] if coverage is not None else ["--keep", str(keep)]
    stderr = cli_refusal(run_cli, "compress", MODEL, "--method", "trim", "--freq-text", fit, *budget,
                         "--then", "pca", "--rank", "8", "--out", tmp_path / "cli")
    step = {"method": "trim", "freq_text": str(fit), **({"coverage": coverage} if coverage is not None
                                                         else {"keep": keep})}
    with pytest.raises(embedlab.InputError) as refused:
        embedlab.compress_chain(MODEL, [step, {"method": "pca", "rank": 8}], out=tmp_path / "python")
    assert str(refused.value) in stderr, (str(refused.value), stderr)
    assert not (tmp_path / "python").exists() and not (tmp_path / "cli").exists()


def test_a_steps_refusals_name_the_step_and_field_before_any_work(texts, tmp_path):
    fit, ev = texts
    trim = {"method": "trim", "freq_text": str(fit), "coverage": 0.99}
    refusals = {
        "pipeline\\[1\\]: rank 500 is outside 1..128": [trim, {"method": "pca", "rank": 500}],
        'pipeline\\[1\\].method: unknown method "pcx" \\(trim, ': [trim, {"method": "pcx"}],
        "pipeline\\[1\\].method: trim must be the first step": [{"method": "pca", "rank": 8}, trim],
        "pipeline\\[2\\].method: quant after pca does not apply: a chain is trim, then one method":
            [trim, {"method": "pca", "rank": 8}, {"method": "quant", "type": "q8_0"}],
        'pipeline\\[0\\]: "rank" is not a field of trim': [{**trim, "rank": 8}],
        "pipeline: must be a non-empty list of steps": [],
    }
    for message, steps in refusals.items():
        with pytest.raises(embedlab.InputError, match=message):
            embedlab.compress_chain(MODEL, steps, out=tmp_path / "out")
    with pytest.raises(embedlab.InputError, match="pipeline: divergence does not apply to a trimmed chain"):
        embedlab.compress_chain(MODEL, [trim, {"method": "pca", "rank": 8}], eval_text=ev, divergence=True,
                                out=tmp_path / "out")
    with pytest.raises(embedlab.InputError, match="compress_chain: no request field 'kind'"):
        embedlab.compress_chain(MODEL, [trim], kind="compress")
    with pytest.raises(TypeError, match="compress_chain: pipeline must be a list of steps, .* not dict"):
        embedlab.compress_chain(MODEL, trim)
    assert not (tmp_path / "out").exists()


def test_the_cli_refuses_the_same_rank_naming_its_flag(texts, run_cli, tmp_path):
    # The one message that differs: the CLI names its flag, a JSON request (and Python) the step's field.
    fit, _ = texts
    stderr = cli_refusal(run_cli, "compress", MODEL, "--method", "trim", "--freq-text", fit, "--keep", "3000",
                         "--then", "pca", "--rank", "500", "--out", tmp_path / "cli")
    assert "compress: --rank 500 is outside 1..128" in stderr
    with pytest.raises(embedlab.InputError, match=re.escape("pipeline[1]: rank 500 is outside 1..128")):
        embedlab.compress_chain(MODEL, [{"method": "trim", "freq_text": str(fit), "keep": 3000},
                                        {"method": "pca", "rank": 500}])


def test_a_chain_reports_progress_and_stops_when_told(texts, tmp_path):
    fit, _ = texts
    stages = []

    def stop_at_the_method(stage, done, total, overall):
        stages.append(stage)
        return stage == stages[0]  # False at the first stage after trim's

    with pytest.raises(embedlab.Cancelled):
        embedlab.compress_chain(MODEL, chain_steps(fit), out=tmp_path / "out", progress=stop_at_the_method)
    assert len(set(stages)) == 2
    assert not (tmp_path / "out").exists()  # nothing half-written
    assert [p for p in tmp_path.iterdir()] == []
