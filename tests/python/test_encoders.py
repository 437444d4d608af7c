"""The Python module on encoders (issue 42): embed() equals embedlab-cli embed, a
classifier's logits and labels, masked-LM pseudo-perplexity equal to eval --json, what
each fixture family says it is, and refusals with the engine's messages."""

import json

import numpy as np
import pytest

import embedlab
from conftest import REPO

FIXTURES = REPO / "tests" / "data" / "encoders"
TEXTS = ["A man is playing a guitar.", "Unbelievably, naïve cafés serve coffee!", "a dog"]


def fixture(name):
    path = FIXTURES / name
    if not path.is_dir():
        pytest.skip(f"needs the encoder fixture {path}")
    return path


def test_embed_equals_the_cli(run_cli, tmp_path):
    path = fixture("minilm-st")
    model = embedlab.load(path)
    ours = model.embed(TEXTS)
    assert ours.shape == (3, 64) and ours.dtype == np.float32
    # minilm-st: mean pooling and sentence-transformers' Normalize.
    assert model.pooling == "mean"
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    text = tmp_path / "t.txt"
    text.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    cli = run_cli("embed", path, "--text", text, "--json", parse_json=True)
    np.testing.assert_allclose(ours, np.array(cli["embeddings"], dtype=np.float32), atol=1e-6)
    cls = model.embed(TEXTS, pooling="cls")
    assert not np.allclose(cls, ours)
    np.testing.assert_allclose(
        cls, np.array(run_cli("embed", path, "--text", text, "--pooling", "cls", "--json", parse_json=True)
                      ["embeddings"], dtype=np.float32), atol=1e-6)


def test_embed_refuses_bad_input_with_the_engines_message():
    model = embedlab.load(fixture("minilm-st"))
    with pytest.raises(embedlab.InputError, match="pooling 'weightedmean' is not cls, mean, max or model"):
        model.embed(TEXTS, pooling="weightedmean")
    with pytest.raises(embedlab.InputError, match="no texts to embed"):
        model.embed([])
    with pytest.raises(embedlab.InputError, match="a list of texts, not one string"):
        model.embed("one string")


def test_each_family_says_what_it_is():
    expect = {
        "bert-cls": ("bert", "classification", ["negative", "positive"], "cls"),
        "distilbert-cls": ("distilbert", "classification", ["negative", "positive"], "cls"),
        "distilbert-mlm": ("distilbert", "masked_lm", [], "mean"),
        "minilm-st": ("bert", "none", [], "mean"),
    }
    for name, (arch, head, labels, pooling) in expect.items():
        m = embedlab.load(fixture(name))
        assert m.is_encoder, name
        assert (m.architecture, m.head, m.labels, m.pooling) == (arch, head, labels, pooling), name


def test_classify_gives_the_heads_logits_and_the_task_agrees(tmp_path):
    model = embedlab.load(fixture("bert-cls"))
    logits = model.classify(TEXTS)
    assert logits.shape == (3, 2) and logits.dtype == np.float32
    pairs = model.classify(TEXTS, pairs=["x", "y", "z"])
    assert not np.allclose(pairs, logits)  # the second text and its segment count
    # task sst2 on the same sentences picks each argmax.
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(TEXTS)),
                   encoding="utf-8")
    result = model.task("sst2", str(dev))
    gold = np.array([i % 2 for i in range(3)])
    assert result["accuracy"] == pytest.approx(float(np.mean(logits.argmax(1) == gold)))
    with pytest.raises(embedlab.InputError, match="without a sequence-classification head"):
        embedlab.load(fixture("minilm-st")).classify(TEXTS)


def test_masked_lm_equals_eval_json(run_cli, tmp_path):
    path = fixture("distilbert-mlm")
    text = "a sometimes tedious film about a man and his dog ."
    ours = embedlab.load(path).masked_lm(text=text, ctx=16)
    f = tmp_path / "t.txt"
    f.write_text(text + "\n", encoding="utf-8")
    cli = run_cli("eval", path, "--text", f, "--ctx", "16", "--json", "--quiet", parse_json=True)
    assert ours["masked"] == cli["masked"]
    assert ours["pseudo_ppl"] == pytest.approx(cli["pseudo_ppl"], rel=1e-9)
    with pytest.raises(embedlab.InputError, match="without a masked-LM head"):
        embedlab.load(fixture("minilm-st")).masked_lm(text=text)


def test_decoder_work_is_refused_on_an_encoder():
    model = embedlab.load(fixture("minilm-st"))
    with pytest.raises(embedlab.InputError):
        model.perplexity(text="a man plays a guitar")
