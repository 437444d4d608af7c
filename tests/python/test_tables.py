"""In-memory tables and per-token losses (issue 64): Model.with_table, compress_table and
Model.token_losses, each checked against the file path it stands beside (the same
perplexity, the same record, the same NLL per token)."""

import numpy as np
import pytest

import embedlab


@pytest.fixture(scope="module")
def model(stories):
    return embedlab.load(stories)


@pytest.fixture(scope="module")
def text(heldout):
    return heldout.read_text()[:4000]


def test_with_table_of_the_models_own_table_gives_the_same_perplexity(model, text):
    table = model.embedding_table()
    same = model.with_table(table)
    assert same.vocab_size == model.vocab_size and same.dim == model.dim
    assert same.architecture == model.architecture
    p = model.perplexity(text=text, ctx=64)
    q = same.perplexity(text=text, ctx=64)
    assert q["tokens"] == p["tokens"]
    assert q["nll_per_token"] == pytest.approx(p["nll_per_token"], abs=1e-9)


def test_with_table_of_another_table_changes_the_model_but_not_the_original(model, text):
    table = model.embedding_table()
    before = model.perplexity(text=text, ctx=64)["nll_per_token"]
    noise = np.random.default_rng(0).standard_normal(table.shape) * 0.05
    other = model.with_table(table + noise)  # float64: converted to float32
    assert other.perplexity(text=text, ctx=64)["nll_per_token"] != pytest.approx(before, abs=1e-6)
    # The original keeps its own table and its perplexity.
    assert np.array_equal(model.embedding_table(), table)
    assert model.perplexity(text=text, ctx=64)["nll_per_token"] == pytest.approx(before, abs=1e-12)
    # The new model's table is the one given (the tied head reads the same rows).
    assert np.array_equal(other.embedding_table(), (table + noise).astype(np.float32))


def test_with_table_takes_any_array_like(model):
    rows = model.embedding_table().tolist()
    assert model.with_table(rows).embedding_kind == "dense"
    assert model.with_table(np.asarray(rows, dtype=np.float16)).vocab_size == model.vocab_size


def test_with_table_refuses_bad_tables(model):
    table = model.embedding_table()
    with pytest.raises(embedlab.InputError, match=r"table must have shape \[512, 64\], got \[512, 63\]"):
        model.with_table(table[:, :63])
    with pytest.raises(embedlab.InputError, match=r"table must have shape \[512, 64\], got \[512\]"):
        model.with_table(table[:, 0])
    bad = table.copy()
    bad[3, 5] = np.nan
    with pytest.raises(embedlab.InputError, match="table must hold finite values"):
        model.with_table(bad)
    bad[3, 5] = np.inf
    with pytest.raises(embedlab.InputError, match="table must hold finite values"):
        model.with_table(bad)
    with pytest.raises(embedlab.InputError, match="after conversion to float32"), np.errstate(over="ignore"):
        model.with_table(table.astype(np.float64) * 1e300)
    with pytest.raises(TypeError, match="table must be an array of real numbers"):
        model.with_table(table.astype(np.complex64))
    with pytest.raises(TypeError, match="table must be an array of real numbers"):
        model.with_table(np.array([["a"] * 64] * 512, dtype=object))


def test_compress_table_equals_compressing_the_file(model):
    from_table = embedlab.compress_table(model.embedding_table(), "pca", rank=8, model=model)
    from_file = embedlab.compress(model, "pca", rank=8)
    a, b = from_table.record, from_file.record
    assert set(b) - set(a) == {"summary"}
    for key in ("method", "spec", "accounting"):
        assert a[key] == b[key], key
    for key, value in b["reconstruction"].items():
        assert a["reconstruction"][key] == pytest.approx(value, abs=1e-9), key
    assert a["fit"].keys() == b["fit"].keys()
    assert from_table.factor_types == from_file.factor_types
    for name, f in from_file.factors_f32.items():
        np.testing.assert_allclose(from_table.factors_f32[name], f, atol=1e-6)
    # The compressed rows go back into a model as any table does.
    rows = from_table.embedding_table()
    assert rows.shape == (model.vocab_size, model.dim)
    np.testing.assert_allclose(rows, from_file.model.embedding_table(), atol=1e-5)


def test_compress_table_without_a_model_accounts_as_account_does():
    table = np.random.default_rng(1).standard_normal((300, 32)).astype(np.float32)
    run = embedlab.compress_table(table, "svd", rank=4)
    counted = embedlab.account("svd", 300, 32, rank=4)
    for key in ("params_before", "params_after", "eta_emb"):
        assert run.record["accounting"][key] == counted[key], key
    assert run.record["spec"]["rank"] == 4
    assert "summary" not in run.record and "evaluation" not in run.record
    for what in ("summary", "model"):
        with pytest.raises(embedlab.InputError, match=f"Run.{what}: this run compressed a table alone"):
            getattr(run, what)


def test_compress_table_refuses_as_the_engine_names_fields(model):
    table = model.embedding_table()
    with pytest.raises(embedlab.InputError, match="rank="):
        embedlab.compress_table(table, "pca", rank=0)
    with pytest.raises(embedlab.InputError, match="rank="):
        embedlab.compress_table(table, "pca", rank=65)
    with pytest.raises(embedlab.InputError, match="no request field 'rnak'"):
        embedlab.compress_table(table, "pca", rnak=8)
    with pytest.raises(embedlab.InputError, match="store= needs a model file"):
        embedlab.compress_table(table, "pca", rank=8, store="f16")
    with pytest.raises(embedlab.InputError, match="eval_text= needs a model file"):
        embedlab.compress_table(table, "pca", rank=8, eval_text="x.txt")
    with pytest.raises(embedlab.InputError, match="compress_table: .*flat"):
        embedlab.compress_table(table, "flat", rank=8)
    with pytest.raises(embedlab.InputError, match="frequency text"):
        embedlab.compress_table(table, "lle", k=4)
    with pytest.raises(embedlab.InputError, match=r"table must have shape \[512, 64\]"):
        embedlab.compress_table(table[:10], "pca", rank=8, model=model)
    with pytest.raises(embedlab.InputError, match="not both"):
        embedlab.compress_table(table, "pca", rank=8, model=model, tied=False)


def test_token_losses_are_perplexitys_per_token_nll(model, text):
    ids = model.tokenize(text)
    for ctx, stride in ((64, None), (32, 16)):
        p = model.perplexity(ids=ids, ctx=ctx, stride=stride)
        losses = model.token_losses(ids=ids, ctx=ctx, stride=stride)
        assert losses.dtype == np.float64 and losses.shape == (p["tokens"],)
        # The engine computes each NLL in float32 (divergence: log_softmax; perplexity:
        # logsumexp - logit), so the two means agree to float32's rounding, not to 1e-9.
        assert losses.mean() == pytest.approx(p["nll_per_token"], rel=1e-7)
        assert (losses >= 0).all()
    by_text = model.token_losses(text=text, ctx=64)
    np.testing.assert_array_equal(by_text, model.token_losses(ids=ids, ctx=64))


def test_token_losses_refuses_bad_arguments(model):
    with pytest.raises(embedlab.InputError, match="exactly one of text= or ids="):
        model.token_losses()
    with pytest.raises(embedlab.InputError, match="at least 2"):
        model.token_losses(ids=[1])
    with pytest.raises(embedlab.InputError, match="stride must be between"):
        model.token_losses(ids=[1, 2, 3], ctx=2, stride=3)
    with pytest.raises(embedlab.InputError, match="ctx=100000 exceeds"):
        model.token_losses(ids=[1, 2, 3], ctx=100000)


@pytest.mark.parametrize("name", ["tinygpt2", "tinyllama"])
def test_with_table_on_other_architectures(name, request, text):
    """gpt2 (learned positions kept) and llama: the same table, the same perplexity;
    another table moves it."""
    model = embedlab.load(request.getfixturevalue(name))
    table = model.embedding_table()
    ids = model.tokenize(text)[:200]
    p = model.perplexity(ids=ids, ctx=64)["nll_per_token"]
    assert model.with_table(table).perplexity(ids=ids, ctx=64)["nll_per_token"] == pytest.approx(p, abs=1e-9)
    scaled = model.with_table(table * 1.5)
    assert scaled.perplexity(ids=ids, ctx=64)["nll_per_token"] != pytest.approx(p, abs=1e-6)


@pytest.mark.parametrize("name", ["tinygpt2", "tinyllama"])
def test_the_head_follows_the_table_as_the_model_ties_it(name, request):
    """A row the input never reads: a tied head's logit for it moves, an untied head's not."""
    model = embedlab.load(request.getfixturevalue(name))
    table = model.embedding_table().copy()
    ids = [5, 6, 7]
    token = 100
    table[token] *= 2.0
    before, after = model.logits(ids), model.with_table(table).logits(ids)
    others = np.delete(np.arange(model.vocab_size), token)
    np.testing.assert_array_equal(after[:, others], before[:, others])
    if model.config["tied_embeddings"]:
        assert not np.allclose(after[:, token], before[:, token])
    else:
        np.testing.assert_array_equal(after[:, token], before[:, token])
