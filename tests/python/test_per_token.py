"""Per-token arrays (issue 64): divergence(per_token=True), Run.token_damage(), batched
logits(), hidden_states() and loglikelihood(), each against an independent figure: the
CLI's JSON and per-token CSV, NumPy on the model's own logits, or the call's own
summary statistics."""

import csv
import json

import numpy as np
import pytest

import embedlab


# tinygpt2's passes cost in its 50257 logits per token: ~370 tokens (three windows) check
# what the 1,000 of short_text did.
@pytest.fixture(scope="module")
def eval_text(brief_text):
    return brief_text


@pytest.fixture(scope="module")
def text(eval_text):
    return eval_text.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def pca8(gpt2, eval_text):
    return embedlab.compress(gpt2, "pca", rank=8, eval_text=eval_text)


@pytest.fixture(scope="module")
def per_token_divergence(pca8, gpt2, text):
    """pca8's divergence(per_token=True) on the text, which two tests read: its arrays read-only."""
    d = pca8.model.divergence(gpt2, text=text, per_token=True)
    for array in d["per_token"].values():
        array.flags.writeable = False
    return d


@pytest.fixture(scope="module")
def pca8_dir(pca8, tmp_path_factory):
    out = tmp_path_factory.mktemp("per_token") / "pca8"
    pca8.export(out)
    return out


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


# --- divergence(per_token=True) --------------------------------------------------------


def test_per_token_divergence_is_the_statistics_per_position(pca8, gpt2, text, per_token_divergence):
    d = per_token_divergence
    assert d["windows"] > 1
    p = d["per_token"]
    assert set(p) == {"input", "target", "kl", "nll", "reference_nll", "same_top"}
    assert [p[k].dtype for k in ("input", "target", "kl", "nll", "reference_nll", "same_top")] == \
        [np.int32, np.int32, np.float64, np.float64, np.float64, np.bool_]
    assert all(len(v) == d["tokens"] for v in p.values())
    assert p["kl"].mean() == pytest.approx(d["kl_mean"], rel=1e-12)
    assert p["kl"].max() == d["kl_max"]
    assert p["same_top"].mean() == pytest.approx(d["top1_agreement"], rel=1e-12)
    assert np.exp(p["nll"].mean()) == pytest.approx(d["ppl"], rel=1e-12)
    assert np.exp(p["reference_nll"].mean()) == pytest.approx(d["reference_ppl"], rel=1e-12)
    # The ids are the text's: targets are ids[1:] (stride = ctx scores each once), inputs ids[:-1].
    ids = gpt2.tokenize(text)
    np.testing.assert_array_equal(p["target"], ids[1:])
    np.testing.assert_array_equal(p["input"], ids[:-1])
    # The reference's NLLs are its token_losses; without per_token no arrays.
    np.testing.assert_allclose(p["reference_nll"], gpt2.token_losses(text=text), rtol=0, atol=1e-9)
    assert "per_token" not in pca8.model.divergence(gpt2, text=text)


def test_per_token_kl_equals_numpy_on_both_models_logits(pca8, gpt2, text):
    ids = gpt2.tokenize(text)[:33]
    p = pca8.model.divergence(gpt2, ids=ids, ctx=32, per_token=True)["per_token"]
    ref = log_softmax(gpt2.logits(ids[:-1]))
    own = log_softmax(pca8.model.logits(ids[:-1]))
    kl = (np.exp(ref) * (ref - own)).sum(axis=1)
    np.testing.assert_allclose(p["kl"], kl, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(p["same_top"], ref.argmax(1) == own.argmax(1))
    np.testing.assert_allclose(p["nll"], -own[np.arange(32), ids[1:]], rtol=1e-5)


def test_per_token_kl_mean_equals_cli_eval_reference(pca8_dir, tinygpt2, eval_text, run_cli, per_token_divergence):
    cli = run_cli("eval", pca8_dir, "--reference", tinygpt2, "--text", eval_text, "--json", "--quiet",
                  parse_json=True)
    p = per_token_divergence["per_token"]  # pca8.model.divergence(gpt2, text=eval_text, per_token=True)
    assert len(p["kl"]) == cli["tokens"]
    assert p["kl"].mean() == pytest.approx(cli["kl_mean"], rel=1e-12)
    assert p["same_top"].mean() == pytest.approx(cli["top1_agreement"], rel=1e-12)


# --- Run.token_damage() ---------------------------------------------------------------------


def read_damage_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    number = lambda s: float(s) if s else np.nan  # noqa: E731
    return {
        "id": np.array([int(r["id"]) for r in rows]),
        "bucket": np.array([int(r["bucket"]) for r in rows]),
        "target_count": np.array([int(r["target_count"]) for r in rows]),
        "input_count": np.array([int(r["input_count"]) for r in rows]),
        "cosine": np.array([number(r["cosine"]) for r in rows]),
        "kl_as_target": np.array([number(r["kl_as_target"]) for r in rows]),
        "kl_as_input": np.array([number(r["kl_as_input"]) for r in rows]),
    }


def test_token_damage_equals_cli_per_token_csv(pca8, pca8_dir, tinygpt2, gpt2, eval_text, run_cli, tmp_path):
    csv_path = tmp_path / "tokens.csv"
    cli = run_cli("eval", pca8_dir, "--reference", tinygpt2, "--text", eval_text, "--per-token", csv_path,
                  "--json", "--quiet", parse_json=True)
    expected = read_damage_csv(csv_path)
    # reference=None: the original the run compressed, loaded again; the run's text and ctx.
    damage = pca8.token_damage()
    V = gpt2.vocab_size
    np.testing.assert_array_equal(expected["id"], np.arange(V))
    assert {k: (v.dtype, v.shape) for k, v in damage.items() if k != "buckets"} == {
        "cosine": (np.float64, (V,)), "target_count": (np.int64, (V,)), "kl_as_target": (np.float64, (V,)),
        "input_count": (np.int64, (V,)), "kl_as_input": (np.float64, (V,)), "bucket": (np.int32, (V,))}
    for key in ("bucket", "target_count", "input_count"):
        np.testing.assert_array_equal(damage[key], expected[key], err_msg=key)
    for key in ("cosine", "kl_as_target", "kl_as_input"):  # the CSV's %.9g
        np.testing.assert_allclose(damage[key], expected[key], rtol=1e-8, atol=1e-12, equal_nan=True, err_msg=key)
    assert damage["buckets"] == cli["damage_by_frequency"]
    # The same with the reference and the text given.
    again = pca8.token_damage(gpt2, text=eval_text.read_text(encoding="utf-8"))
    np.testing.assert_array_equal(again["cosine"], damage["cosine"])
    np.testing.assert_array_equal(again["kl_as_target"], damage["kl_as_target"])


def test_token_damage_refusals(pca8, gpt2, stories_model):
    with pytest.raises(embedlab.InputError, match="give at most one of text= or ids="):
        pca8.token_damage(gpt2, text="a b c", ids=[1, 2, 3])
    with pytest.raises(embedlab.InputError, match=r"Run.token_damage: stride must be between 1 and ctx \(8\), got 9"):
        pca8.token_damage(gpt2, ids=np.arange(40), ctx=8, stride=9)
    with pytest.raises(TypeError, match="Run.token_damage: reference must be an embedlab.Model, not str"):
        pca8.token_damage("models/x", ids=np.arange(40))
    with pytest.raises(embedlab.InputError, match="vocabular"):
        pca8.token_damage(stories_model, ids=np.arange(40), ctx=8)
    table_run = embedlab.compress_table(gpt2.embedding_table()[:600], "pca", rank=4)
    with pytest.raises(embedlab.InputError, match="compressed a table alone"):
        table_run.token_damage(gpt2)


# --- logits() of a batch ----------------------------------------------------------------


def test_batched_logits_equal_one_sequence_at_a_time(stories_model, text):
    ids = stories_model.tokenize(text)
    a, b, c = ids[:20], ids[20:40], ids[40:53]
    same = stories_model.logits([a, b])
    assert same.shape == (2, 20, stories_model.vocab_size) and same.dtype == np.float32
    np.testing.assert_allclose(same[0], stories_model.logits(a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(same[1], stories_model.logits(b), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(stories_model.logits(np.stack([a, b])), same)
    ragged = stories_model.logits([a, c, b])
    assert isinstance(ragged, list) and [x.shape[0] for x in ragged] == [20, 13, 20]
    np.testing.assert_allclose(ragged[1], stories_model.logits(c), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ragged[2], same[1])


def test_batched_logits_progress_and_refusals(stories_model):
    calls = []
    stories_model.logits([[1, 2, 3], [4, 5], [6, 7]], progress=lambda *a: calls.append(a))
    assert calls[0] == ("logits", 0, 3, 0.0) and calls[-1] == ("logits", 3, 3, 1.0)
    with pytest.raises(embedlab.Cancelled):
        stories_model.logits([[1, 2, 3], [4, 5]], progress=lambda *a: False)
    with pytest.raises(embedlab.InputError, match=r"logits: ids\[1\]: no token ids"):
        stories_model.logits([[1, 2], []])
    with pytest.raises(embedlab.InputError, match=r"logits: ids\[0\]: token id 512 at position 1 is outside"):
        stories_model.logits([[1, 512]])


# --- hidden_states() --------------------------------------------------------------------


def test_final_hidden_states_times_the_tied_table_are_the_logits(stories_model, text):
    ids = stories_model.tokenize(text)[:40]
    h = stories_model.hidden_states(ids)
    assert h.shape == (40, stories_model.dim) and h.dtype == np.float32
    assert stories_model.config["tied_embeddings"]
    np.testing.assert_allclose(h @ stories_model.embedding_table().T, stories_model.logits(ids),
                               rtol=1e-4, atol=1e-4)


def test_hidden_states_layers_use_hugging_faces_indices(stories_model, text):
    ids = stories_model.tokenize(text)[:30]
    L = stories_model.config["num_layers"]
    every = stories_model.hidden_states(ids, layers=list(range(L + 1)))
    assert every.shape == (L + 1, 30, stories_model.dim)
    # 0: the embeddings (llama adds nothing to the table's rows); L: the final hidden states.
    np.testing.assert_array_equal(every[0], stories_model.embedding_table()[ids])
    np.testing.assert_array_equal(every[L], stories_model.hidden_states(ids))
    np.testing.assert_array_equal(stories_model.hidden_states(ids, layers=-1), every[L])
    np.testing.assert_array_equal(stories_model.hidden_states(ids, layers=[2, -L]), every[[2, 1]])
    assert all(not np.array_equal(every[i], every[i + 1]) for i in range(L))
    # A residual stream: each layer's output differs from its input by the layer's update.
    assert np.isfinite(every).all()


def test_hidden_states_refusals(stories_model):
    L = stories_model.config["num_layers"]
    with pytest.raises(embedlab.InputError, match=rf"hidden_states: layer {L + 1} is outside 0..{L}"):
        stories_model.hidden_states([1, 2, 3], layers=[L + 1])
    with pytest.raises(TypeError, match="hidden_states: layers must be None, an int or a list of int, not str"):
        stories_model.hidden_states([1, 2, 3], layers="all")
    with pytest.raises(embedlab.InputError, match="hidden_states: layers is empty"):
        stories_model.hidden_states([1, 2, 3], layers=[])


# --- loglikelihood() --------------------------------------------------------------------


def numpy_loglikelihood(model, context, continuation):
    """The harness's recipe, on the model's logits: trailing spaces move to the continuation."""
    kept = context.rstrip(" ")
    continuation = context[len(kept):] + continuation
    context_ids = list(model.tokenize(kept))
    whole = list(model.tokenize(kept + continuation))
    n = len(whole) - len(context_ids)
    sequence = context_ids + whole[len(context_ids):]
    logp = log_softmax(model.logits(sequence[:-1]))
    return sum(logp[len(sequence) - 1 - n + i, sequence[len(sequence) - n + i]] for i in range(n))


@pytest.mark.parametrize("context, continuation", [
    ("Once upon a time", " there was a little girl"),
    ("The dog ran to the ", "park."),
])
def test_loglikelihood_equals_numpy_on_the_logits(stories_model, context, continuation):
    got = stories_model.loglikelihood(context, continuation)
    assert isinstance(got, float)
    assert got == pytest.approx(numpy_loglikelihood(stories_model, context, continuation), rel=1e-5)


def test_loglikelihood_of_lists_and_the_cli_tasks_choice(stories_model, stories, run_cli, tmp_path):
    examples = [("Lily saw a big", ["dog.", "sky.", "of the."], 0),
                ("Once upon a time, there", ["was a girl.", "blue green."], 0),
                ("Tom was very", ["happy.", "the."], 1)]
    with open(tmp_path / "mc.jsonl", "w", encoding="utf-8") as f:
        for context, choices, label in examples:
            f.write(json.dumps({"context": context, "choices": choices, "label": label}) + "\n")
    contexts = [c for c, choices, _ in examples for _ in choices]
    continuations = [" " + choice for _, choices, _ in examples for choice in choices]  # mc's " " + choice
    scores = stories_model.loglikelihood(contexts, continuations)
    assert scores.dtype == np.float64 and scores.shape == (len(contexts),)
    assert scores[0] == stories_model.loglikelihood(contexts[0], continuations[0])
    chosen, at = [], 0
    for _, choices, _ in examples:
        chosen.append(int(np.argmax(scores[at:at + len(choices)])))
        at += len(choices)
    accuracy = np.mean([c == label for c, (_, _, label) in zip(chosen, examples)])
    cli = run_cli("task", "mc", stories, "--data", tmp_path / "mc.jsonl", "--out", tmp_path / "out.jsonl",
                  "--json", "--quiet", parse_json=True)
    assert cli["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    # The CLI's per-example log-likelihoods, bit for bit (the same engine call).
    cli_scores = [s for line in (tmp_path / "out.jsonl").read_text().splitlines()
                  for s in json.loads(line)["loglik"]]
    assert scores.tolist() == cli_scores
    assert stories_model.task("mc", tmp_path / "mc.jsonl")["accuracy"] == pytest.approx(accuracy, abs=1e-12)


def numpy_is_greedy(model, context, continuation):
    """The harness's is_greedy on the model's logits: every continuation token is the argmax."""
    kept = context.rstrip(" ")
    continuation = context[len(kept):] + continuation
    context_ids = list(model.tokenize(kept))
    sequence = context_ids + list(model.tokenize(kept + continuation))[len(context_ids):]
    n = len(sequence) - len(context_ids)
    greedy = np.argmax(model.logits(sequence[:-1]), axis=-1)
    return bool(all(greedy[len(sequence) - 1 - n + i] == sequence[len(sequence) - n + i] for i in range(n)))


def test_loglikelihood_is_greedy_against_the_argmax_of_the_logits(stories_model):
    context = "Once upon a time"
    # The model's own greedy continuation (no BOS, as loglikelihood reads it), and others.
    greedy_text = stories_model.generate(context, max_tokens=4, bos=False)["text"]
    continuations = [greedy_text, greedy_text[:-1] + "Q", " there was a little girl", " dog."]
    expected = [numpy_is_greedy(stories_model, context, c) for c in continuations]
    assert True in expected and False in expected  # both answers are exercised
    got = [stories_model.loglikelihood(context, c, greedy=True) for c in continuations]
    assert [g for _, g in got] == expected and all(isinstance(g, bool) for _, g in got)
    assert [score for score, _ in got] == [stories_model.loglikelihood(context, c) for c in continuations]
    scores, flags = stories_model.loglikelihood([context] * len(continuations), continuations, greedy=True)
    assert flags.dtype == np.bool_ and flags.tolist() == expected
    np.testing.assert_array_equal(scores, [score for score, _ in got])


def test_loglikelihood_refusals(stories_model):
    with pytest.raises(embedlab.InputError, match="loglikelihood: 2 contexts and 1 continuations"):
        stories_model.loglikelihood(["a", "b"], [" c"])
    with pytest.raises(TypeError, match="loglikelihood: continuation must be a str, not int"):
        stories_model.loglikelihood("a", 3)
    with pytest.raises(embedlab.InputError, match="loglikelihood: example 1: the continuation '' adds no tokens"):
        stories_model.loglikelihood("Once upon a time", "")
