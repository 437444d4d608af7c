"""Runs and models as objects (issue 64): load_run() reads a compressed directory back
(record, request, factors as stored, model), Model and Run pickle (by path and
settings), and `with embedlab.load(...) as m:` releases the model."""

import json
import pickle

import numpy as np
import pytest

import embedlab
from conftest import without_timing


# The runs' evaluation text: tinygpt2's passes cost in its 50257 logits per token, and ~370
# tokens (three windows of 128) read back as the 1,000 of short_text do.
@pytest.fixture(scope="module")
def eval_text(brief_text):
    return brief_text


@pytest.fixture(scope="module")
def text(eval_text):
    return eval_text.read_text(encoding="utf-8")


# --- load_run -------------------------------------------------------------------------------


@pytest.mark.parametrize("store", [None, "f16", "bf16", "q8_0"])
def test_load_run_reads_back_what_export_wrote(gpt2, eval_text, text, tmp_path, store):
    fields = {"store": store} if store else {}
    run = embedlab.compress(gpt2, "pca", rank=32, eval_text=eval_text, **fields)
    manifest = run.export(tmp_path / "pca")
    back = embedlab.load_run(tmp_path / "pca")
    assert back.record == manifest
    assert back.factor_types == run.factor_types
    assert set(back.factors) == set(run.factors) == {"mu", "Z", "P"}
    for name in run.factors:
        assert back.factors[name].dtype == run.factors[name].dtype, name
        np.testing.assert_array_equal(back.factors[name], run.factors[name], err_msg=name)
        np.testing.assert_array_equal(back.factors_f32[name], run.factors_f32[name], err_msg=name)
    # The stored bytes are the accounting's.
    assert sum(a.nbytes for a in back.factors.values()) == back.record["accounting"]["storage"]["bytes_after"]
    np.testing.assert_array_equal(back.embedding_table(), run.embedding_table())
    assert back.model.perplexity(text=text)["ppl"] == run.summary["ppl"]
    assert back.request["method"] == "pca" and back.request["rank"] == 32
    assert back.request["model"] == manifest["source"]["path"]
    assert back.request.get("store") == store
    assert repr(back) == f"<embedlab.Run {repr(run)[len('<embedlab.Run '):-1]} read from {tmp_path / 'pca'}>"


# Settings whose rows exercise each part of the reader: the divergence and its windows,
# stored factors (", stored f16", their bytes), a compressed position table (" + positions",
# the model's bytes), quant's block bytes, tt's ranks, lle's split (" 146 rare"), no evaluation.
SAVED_SUMMARY_RUNS = {
    "pca divergence": ("pca", {"rank": 8, "divergence": True}),
    "pca stored f16": ("pca", {"rank": 8, "store": "f16"}),
    "pca positions": ("pca", {"rank": 8, "positions": True}),
    "pca positions stored q8_0": ("pca", {"rank": 8, "positions": True, "store": "q8_0"}),
    "quant q8_0": ("quant", {"type": "q8_0"}),
    "tt": ("tt", {"shape": [4, 4, 8], "ranks": [1, 4, 4, 1]}),
    "lle": ("lle", {"keep_ratio": 0.5, "k": 4, "freq": True}),
    "no evaluation": ("svd", {"rank": 4, "eval": False}),
    # LoRA recovery: the adapters counted in parameters, bytes and the settings' words.
    "pca lora": ("pca", {"rank": 8, "lora_rank": 2, "lora_steps": 2, "train": True}),
    # flat: the value heads' part before and after, its words (ranks per layer), its KL; and
    # with a target, the MLPs narrowed too (a Nystrom solve: more calibration tokens).
    "flat divergence": ("flat", {"remaining": 0.5, "calib": True, "samples": 4, "seqlen": 32, "divergence": True}),
    "flat target mlp": ("flat", {"target_ratio": 0.8, "calib": True, "samples": 16, "seqlen": 64}),
}


@pytest.mark.parametrize("name", list(SAVED_SUMMARY_RUNS))
def test_a_loaded_runs_summary_is_the_one_of_the_run_that_wrote_it(gpt2, short_text, eval_text, heldout, tmp_path,
                                                                   name):
    method, fields = SAVED_SUMMARY_RUNS[name]
    fields = dict(fields)
    if fields.pop("freq", False):
        fields["freq_text"] = short_text
    if fields.pop("train", False):
        fields["train_text"] = heldout
    if fields.pop("calib", False):
        fields["calib_text"] = heldout
    if fields.pop("eval", True):
        fields["eval_text"] = eval_text
    run = embedlab.compress(gpt2, method, **fields)
    run.export(tmp_path / "run")
    back = embedlab.load_run(tmp_path / "run").summary
    wrote = run.summary
    # What embedlab.json does not record: the run's wall time and its machine.
    assert back["seconds"] is None and back["host"] == ""
    assert without_timing({**back, "host": None}) == without_timing({**wrote, "host": None})
    assert list(back) == list(wrote)
    assert back["model_bytes_after"] is not None  # a Hugging Face source of one dtype: always known
    if "divergence" in fields:
        assert back["kl_mean"] == wrote["kl_mean"] and len(back["window_kl"]) > 1
    if "eval_text" not in fields:
        assert back["ppl"] is None and back["eval_tokens"] == 0 and back["eval_text"] == ""


def test_a_loaded_flat_runs_record_carries_its_rows_words_and_part_before(gpt2, tmp_path, eval_text, heldout):
    run = embedlab.compress(gpt2, "flat", remaining=0.5, calib_text=heldout, samples=4, seqlen=32,
                            eval_text=eval_text)
    manifest = run.export(tmp_path / "flat")
    # The fields the row needs, beside the ones that were always there (their names unchanged).
    assert manifest["settings"] == run.summary["parameters"]
    assert manifest["settings"].startswith("remaining 0.5, iprs, ranks ")
    storage = manifest["storage"]
    assert storage["params_before"] == run.summary["params_before"]
    assert storage["bytes_before"] == run.summary["bytes_before"]
    assert storage["params_after"] == run.summary["params_after"]
    assert storage["bytes_after"] == run.summary["bytes_after"]
    assert embedlab.load_run(tmp_path / "flat").row == run.row | {"seconds": None, "host": ""}


def test_a_flat_record_written_before_its_row_fields_is_refused_naming_them(gpt2, tmp_path, heldout):
    run = embedlab.compress(gpt2, "flat", remaining=0.5, calib_text=heldout, samples=4, seqlen=32)
    manifest = run.export(tmp_path / "flat")
    # As flat wrote embedlab.json before 2026-11-29 (the tensors' digests are unchanged).
    del manifest["settings"], manifest["storage"]["params_before"], manifest["storage"]["bytes_before"]
    (tmp_path / "flat" / "embedlab.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    back = embedlab.load_run(tmp_path / "flat")
    with pytest.raises(embedlab.InputError) as refused:
        back.summary
    assert str(refused.value) == (
        f"Run.summary: {tmp_path / 'flat'}: flat's record has no results row: embedlab.json lacks "
        "storage.params_before and settings (the part's parameters before narrowing and the settings' words, "
        "which flat records written before 2026-11-29 do not keep); its figures are in model_params, storage and "
        "evaluation; compress it again to read its row back")
    with pytest.raises(embedlab.InputError, match="lacks storage.params_before and settings"):
        back.row
    # What it does record still reads back.
    assert back.record["storage"]["params_after"] == run.summary["params_after"]
    assert back.model.config["value_head_dims"] == run.model.config["value_head_dims"]


def test_a_loaded_run_refuses_what_it_does_not_have(gpt2, tmp_path, eval_text):
    run = embedlab.compress(gpt2, "pca", rank=4, eval_text=eval_text)
    run.export(tmp_path / "r")
    back = embedlab.load_run(str(tmp_path / "r"))
    with pytest.raises(embedlab.InputError, match="Run.export: this run was read back from .* copy the directory"):
        back.export(tmp_path / "again")
    with pytest.raises(embedlab.InputError, match="compress: model is a run's compressed model"):
        embedlab.compress(back.model, "pca", rank=2)
    # Its token damage defaults to its own evaluation text and the source model.
    damage = back.token_damage()
    np.testing.assert_array_equal(damage["cosine"], run.token_damage()["cosine"])


def test_load_run_refuses_a_model_that_is_not_a_run(tinygpt2, tmp_path):
    with pytest.raises(embedlab.InputError, match=r"load_run: .*tinygpt2 is not an EmbedLab compressed directory "
                                                  r"\(it has no embedlab.json\); embedlab.load reads a model"):
        embedlab.load_run(tinygpt2)
    with pytest.raises(embedlab.InputError, match="no-such"):
        embedlab.load_run(tmp_path / "no-such")


# --- pickle --------------------------------------------------------------------------------


def test_a_model_pickles_by_path(gpt2, tinygpt2, text, tmp_path, monkeypatch):
    data = pickle.dumps(gpt2)
    assert len(data) < 1000  # the path and the settings, not the weights
    monkeypatch.chdir(tmp_path)  # the path is absolute: another folder unpickles it
    back = pickle.loads(data)
    assert back.path == str(tinygpt2)
    assert back.perplexity(text=text)["ppl"] == gpt2.perplexity(text=text)["ppl"]


def test_models_held_in_memory_refuse_pickling(gpt2):
    other = gpt2.with_table(gpt2.embedding_table())
    with pytest.raises(TypeError, match=r"cannot pickle .* \(with_table\): a with_table model holds a table in "
                                        r"memory; pickle the table"):
        pickle.dumps(other)
    run = embedlab.compress(gpt2, "pca", rank=2)
    with pytest.raises(TypeError, match="a run's compressed model; pickle the Run instead"):
        pickle.dumps(run.model)
    table_run = embedlab.compress_table(gpt2.embedding_table()[:500], "pca", rank=2)
    with pytest.raises(TypeError, match="cannot pickle a compress_table run"):
        pickle.dumps(table_run)


def test_a_run_pickles_by_its_request_and_runs_again(gpt2, eval_text):
    run = embedlab.compress(gpt2, "svd", rank=8, eval_text=eval_text)
    data = pickle.dumps(run)
    assert len(data) < 2000
    back = pickle.loads(data)
    assert back.request == run.request
    assert without_timing(back.summary) == without_timing(run.summary)
    for name in run.factors:
        np.testing.assert_array_equal(back.factors[name], run.factors[name])


def test_a_loaded_run_pickles_by_its_directory(gpt2, tmp_path):
    embedlab.compress(gpt2, "pca", rank=4).export(tmp_path / "d")
    back = pickle.loads(pickle.dumps(embedlab.load_run(tmp_path / "d")))
    assert back.record == embedlab.load_run(tmp_path / "d").record
    with pytest.raises(embedlab.InputError, match="not an embedlab.Run's pickled state"):
        embedlab.Run.__new__(embedlab.Run).__setstate__(("what",))


# --- with ... as m ---------------------------------------------------------------------------


def test_with_releases_the_model(stories):
    with embedlab.load(stories) as m:
        table = m.embedding_table()
        copy = np.array(table)
        ppl = m.perplexity(text="Once upon a time there was a cat. She liked to play.")["ppl"]
        assert ppl > 1
    assert repr(m) == f"<embedlab.Model {stories}: closed>"
    for call in (lambda: m.perplexity(text="a b c"), lambda: m.tokenize("a"), lambda: m.vocab_size,
                 lambda: m.warnings, lambda: m.with_table(copy), lambda: pickle.dumps(m)):
        with pytest.raises(embedlab.InputError, match=r"stories260K.gguf is closed \(its with block ended, or "
                                                      r"close\(\) was called\): load it again"):
            call()
    np.testing.assert_array_equal(table, copy)  # an array returned before stays valid
    m.close()  # twice is fine


def test_closing_one_handle_leaves_the_others(stories):
    m = embedlab.load(stories)
    other = m.with_table(m.embedding_table())
    m.close()
    assert other.perplexity(text="Once upon a time there was a cat.")["tokens"] > 0
