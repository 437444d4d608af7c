"""The Python module on encoders (issue 42): embed() equals embedlab-cli embed, a
classifier's logits and labels, masked-LM pseudo-perplexity equal to eval --json, what
each fixture family says it is, and refusals with the engine's messages."""

import _thread

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


def test_normalize_none_true_false(run_cli, tmp_path):
    """None is the CLI's default (the model's Normalize), True is --normalize, False the
    model's own pooling without its Normalize (--pooling mean on minilm-st)."""
    path = fixture("minilm-st")
    model = embedlab.load(path)
    assert model.normalize_embeddings
    text = tmp_path / "t.txt"
    text.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    raw = model.embed(TEXTS, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    cli_mean = run_cli("embed", path, "--text", text, "--pooling", "mean", "--json", parse_json=True)
    assert cli_mean["normalized"] is False
    np.testing.assert_allclose(raw, np.array(cli_mean["embeddings"], dtype=np.float32), atol=1e-6)
    np.testing.assert_allclose(model.embed(TEXTS, normalize=None), model.embed(TEXTS), atol=0)
    # True on a pooling that does not normalise by itself: --normalize, x / |x| of its rows.
    max_rows = model.embed(TEXTS, pooling="max")
    forced = model.embed(TEXTS, pooling="max", normalize=True)
    np.testing.assert_allclose(forced, max_rows / np.linalg.norm(max_rows, axis=1, keepdims=True), atol=1e-6)
    with pytest.raises(embedlab.InputError, match="normalize must be None"):
        model.embed(TEXTS, normalize=1)


def test_embed_on_a_decoder_equals_the_cli(stories, run_cli, tmp_path):
    """Decoders embed by the mean of their final hidden states, no framing tokens."""
    model = embedlab.load(stories)
    assert not model.is_encoder and model.head == "causal_lm" and model.labels == []
    assert "encoder" not in repr(model)
    texts = ["Once upon a time there was a cat.", "The dog ran home."]
    ours = model.embed(texts)
    assert ours.shape == (2, 64)
    text = tmp_path / "t.txt"
    text.write_text("\n".join(texts) + "\n", encoding="utf-8")
    cli = run_cli("embed", stories, "--text", text, "--json", parse_json=True)
    assert cli["pooling"] == "mean" == model.pooling
    np.testing.assert_allclose(ours, np.array(cli["embeddings"], dtype=np.float32), atol=1e-5)


def test_embed_reports_progress_and_stops_on_false_or_ctrl_c():
    model = embedlab.load(fixture("minilm-st"))
    texts = [f"a man plays a guitar number {i}" for i in range(6)]
    reports = []
    model.embed(texts, batch=2, progress=lambda *r: reports.append(r) or True)
    assert reports[0][0] == "embed" and [r[1:3] for r in reports] == [(0, 6), (2, 6), (4, 6), (6, 6)]
    with pytest.raises(embedlab.Cancelled):
        model.embed(texts, batch=2, progress=lambda *r: False)
    seen = []

    def interrupt(*r):
        seen.append(r)
        if len(seen) == 1:
            _thread.interrupt_main()  # what Ctrl-C does
        return True

    with pytest.raises(KeyboardInterrupt):
        model.embed(texts, batch=1, progress=interrupt)
    assert len(seen) == 1  # stopped at the next report: no further batches
    with pytest.raises(embedlab.Cancelled):
        embedlab.load(fixture("bert-cls")).classify(texts, batch=2, progress=lambda *r: False)


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
        assert m.normalize_embeddings == (name == "minilm-st"), name
        assert m.config["encoder_head"] == head and m.config["labels"] == labels, name
        r = repr(m)
        assert r.startswith(f"<embedlab.Model {FIXTURES / name}: {arch}, V 2000, embedding dense"), r
        assert f"encoder, head {head}" in r and f"pooling {pooling}" in r, r
        assert ("negative, positive" in r) == bool(labels), r
        assert ("normalize" in r) == (name == "minilm-st"), r


def test_classify_gives_the_heads_logits_and_the_task_agrees(tmp_path):
    model = embedlab.load(fixture("bert-cls"))
    logits = model.classify(TEXTS)
    assert logits.shape == (3, 2) and logits.dtype == np.float32
    pairs = model.classify(TEXTS, pairs=["x", "y", "z"])
    assert not np.allclose(pairs, logits)  # the second text and its segment count
    # Batches of one: the same logits (padding is masked).
    np.testing.assert_allclose(model.classify(TEXTS, batch=1), logits, atol=1e-5)
    np.testing.assert_allclose(model.classify(TEXTS, pairs=["x", "y", "z"], batch=2), pairs, atol=1e-5)
    with pytest.raises(embedlab.InputError, match="3 texts but 2 pairs"):
        model.classify(TEXTS, pairs=["x", "y"])
    with pytest.raises(embedlab.InputError, match="no texts"):
        model.classify([])
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


def test_compress_with_eval_text_gives_evals_pseudo_perplexity(run_cli, tmp_path):
    """compress on a masked-LM encoder goes through run_compression: its pseudo-perplexity."""
    path = fixture("distilbert-mlm")
    f = tmp_path / "t.txt"
    f.write_text("a sometimes tedious film about a man and his dog .\n", encoding="utf-8")
    run = embedlab.compress(path, "pca", rank=16, eval_text=str(f))
    out = tmp_path / "pca16"
    assert run.export(str(out))["evaluation"]["kind"] == "pseudo-perplexity"
    cli = run_cli("eval", out, "--text", f, "--json", "--quiet", parse_json=True)
    assert run.summary["ppl"] == pytest.approx(cli["pseudo_ppl"], rel=1e-9)
    assert run.summary["eval_tokens"] == cli["masked"]
    original = embedlab.load(path).masked_lm(text=f.read_text(encoding="utf-8"))
    assert run.summary["ppl_original"] == pytest.approx(original["pseudo_ppl"], rel=1e-9)


def test_stsb_on_the_sentence_encoder_equals_the_cli(run_cli, tmp_path):
    path = fixture("minilm-st")
    dev = tmp_path / "stsb.tsv"
    rows = [("A man is playing a guitar.", "A man plays a guitar.", 4.8),
            ("A dog runs.", "The stock market fell.", 0.2),
            ("A woman is slicing onions.", "A woman cuts an onion.", 4.2),
            ("Two kids play football.", "A cat sleeps on a sofa.", 0.5),
            ("The film was good.", "The movie was fine.", 3.6)]
    dev.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows),
                   encoding="utf-8")
    ours = embedlab.load(path).task("stsb", str(dev))
    cli = run_cli("task", "stsb", path, "--data", dev, "--json", "--quiet", parse_json=True)
    assert ours["n"] == cli["n"] == 5
    assert ours["spearman"] == pytest.approx(cli["spearman"], abs=1e-12)
    assert ours["pearson"] == pytest.approx(cli["pearson"], abs=1e-12)
    assert ours.keys() == cli.keys()


def test_decoder_work_is_refused_on_an_encoder(run_cli, tmp_path):
    """The engine's refusals, word for word as the CLI prints them."""
    path = fixture("minilm-st")
    model = embedlab.load(path)
    with pytest.raises(embedlab.InputError, match="bert is an encoder: it has no next-token perplexity"):
        model.perplexity(text="a man plays a guitar")
    with pytest.raises(embedlab.InputError, match="bert is an encoder: it does not generate text"):
        model.generate("a man")
    dev = tmp_path / "sst2.tsv"
    dev.write_text("sentence\tlabel\nit is good .\t1\n", encoding="utf-8")
    with pytest.raises(embedlab.InputError, match="an encoder without a classifier") as e:
        model.task("sst2", str(dev))
    cli = run_cli("task", "sst2", path, "--data", dev, "--json", check=False)
    assert cli.returncode != 0 and str(e.value) in cli.stderr
