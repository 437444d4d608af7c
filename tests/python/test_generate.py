"""Model.generate: the CLI's generate --json from Python, streamed through on_token,
compared against another model, stopped by the callback."""

import pytest

import embedlab
from conftest import need
from conftest import without_timing as without_timing_at_any_depth

PROMPT = "Once upon a time, there was a little girl named Lily."


def without_timing(d):
    return {k: v for k, v in d.items() if "seconds" not in k and "per_second" not in k}


@pytest.fixture(scope="module")
def llama(tinyllama):
    return embedlab.load(tinyllama)


def test_generate_equals_the_cli(llama, tinyllama, run_cli):
    ours = llama.generate(PROMPT, max_tokens=12, temperature=0.8, top_p=0.9, seed=5)
    cli = run_cli("generate", tinyllama, "--prompt", PROMPT, "--max-tokens", 12, "--temperature", 0.8,
                  "--top-p", 0.9, "--seed", 5, "--json", parse_json=True)
    assert ours["ids"] == cli["ids"]
    assert ours["text"] == cli["text"]
    assert ours["prompt_ids"][0] == 1  # llama's BOS
    assert [t["logprob"] for t in ours["tokens"]] == pytest.approx([t["logprob"] for t in cli["tokens"]], abs=1e-6)


def test_on_token_streams_the_text_and_can_stop(llama):
    pieces = []
    full = llama.generate(PROMPT, max_tokens=10)
    llama.generate(PROMPT, max_tokens=10, on_token=lambda t: pieces.append(t["text"]))
    assert "".join(pieces) == full["text"]
    # False ends the generation normally, after the token it was called with (issue 64).
    stopped = llama.generate(PROMPT, max_tokens=10, on_token=lambda t: False)
    assert stopped["stop_reason"] == "callback" and stopped["ids"] == full["ids"][:1]
    with pytest.raises(ZeroDivisionError):
        llama.generate(PROMPT, max_tokens=10, on_token=lambda t: 1 / 0)


def test_compare_gives_kl_and_the_originals_text(llama, tinyllama, tmp_path):
    run = embedlab.compress(tinyllama, "pca", rank=16)
    g = run.model.generate(PROMPT, max_tokens=8, compare=llama)
    assert len(g["tokens"]) == 8
    assert all(t["kl"] >= 0 and t["reference_rank"] >= 0 for t in g["tokens"])
    assert g["original"]["ids"] == llama.generate(PROMPT, max_tokens=8)["ids"]
    same = llama.generate(PROMPT, max_tokens=4, compare=llama)
    assert all(t["kl"] == pytest.approx(0, abs=1e-9) and t["reference_rank"] == 0 for t in same["tokens"])


def test_bad_arguments_are_named(llama):
    with pytest.raises(embedlab.InputError, match="exactly one of prompt= or ids="):
        llama.generate()
    with pytest.raises(embedlab.InputError, match="top_p"):
        llama.generate(PROMPT, top_p=0)
    with pytest.raises(embedlab.InputError, match="outside the model.s vocabulary of 32000"):
        llama.generate(ids=[1, 10**6])
    assert llama.generate(ids=[1, 9038], max_tokens=3, stop=["zzz"])["stop_reason"] == "max_tokens"


def write_kld_base(path, model, tokens, n_ctx):
    """A llama-perplexity --kl-divergence-base file of `model`'s own log-probabilities
    (engine/src/io/llamacpp_logits.hpp has the layout), quantised as llama.cpp does: 16 bits
    over [max - 16, max]."""
    import numpy as np

    n_vocab = model.vocab_size
    n_chunk = len(tokens) // n_ctx
    tokens = np.asarray(tokens[: n_chunk * n_ctx], dtype=np.int32)
    nv = 2 * ((n_vocab + 1) // 2) + 4
    with open(path, "wb") as f:
        f.write(b"_logits_" + np.array([n_ctx, n_vocab, n_chunk], dtype=np.int32).tobytes() + tokens.tobytes())
        for c in range(n_chunk):
            logits = model.logits(tokens[c * n_ctx : (c + 1) * n_ctx]).astype(np.float64)
            for pos in range(n_ctx // 2, n_ctx - 1):
                logp = logits[pos] - logits[pos].max()
                logp -= np.log(np.exp(logp).sum())
                low = max(logp.min(), logp.max() - 16)
                scale = (logp.max() - low) / 65535
                row = np.zeros(nv, dtype=np.uint16)
                row[:4] = np.frombuffer(np.array([scale, low], dtype=np.float32).tobytes(), dtype=np.uint16)
                row[4 : 4 + n_vocab] = np.round((np.clip(logp, low, None) - low) / scale).astype(np.uint16)
                f.write(row.tobytes())


def test_llamacpp_divergence_of_a_model_against_its_own_base_file(stories, heldout, tmp_path):
    model = embedlab.load(stories)
    ids = model.tokenize(heldout.read_text(encoding="utf-8")[:3000])
    write_kld_base(tmp_path / "base.kld", model, list(ids), 32)
    d = model.llamacpp_divergence(tmp_path / "base.kld")
    assert d["ctx"] == 32 and d["windows"] == len(ids) // 32
    assert d["tokens"] == d["windows"] * (32 - 1 - 16)
    assert d["kl_mean"] == pytest.approx(0, abs=1e-4)
    assert d["top1_agreement"] > 0.99
    assert d["ppl"] == pytest.approx(d["reference_ppl"], rel=1e-3)
    (tmp_path / "short.kld").write_bytes((tmp_path / "base.kld").read_bytes()[:-3])
    with pytest.raises(embedlab.InputError, match="short.kld"):
        model.llamacpp_divergence(tmp_path / "short.kld")


# Issue 63: generate() reads an f16/bf16 model's matrices as stored by default, as
# embedlab-cli generate does (--weights half); weights="f32" the float32 weights.
@pytest.fixture(scope="module")
def gpt2_f16_path(shared):
    return need(shared / "models" / "tinygpt2-f16", "the tinygpt2-f16 model")


@pytest.fixture(scope="module")
def gpt2_f16(gpt2_f16_path):
    return embedlab.load(gpt2_f16_path)


def assert_equals_the_cli(ours, cli):
    cli = without_timing_at_any_depth(cli)
    ours = without_timing_at_any_depth(ours)
    # The CLI also echoes its options (bos, max_tokens, ...); the generation's fields are both's.
    common = (set(cli) & set(ours)) - {"model"}
    assert {"prompt_ids", "ids", "text", "tokens", "stop_reason", "embedding"} <= common
    for key in common:
        # The CLI prints each double to the digits that read back as the same double.
        assert ours[key] == cli[key], key


@pytest.mark.parametrize("weights", ["half", "f32"])
def test_generate_on_an_f16_model_equals_the_cli_with_the_same_weights(gpt2_f16, gpt2_f16_path, run_cli, weights):
    keyword = {} if weights == "half" else {"weights": "f32"}  # half is the default
    ours = gpt2_f16.generate(PROMPT, max_tokens=12, **keyword)
    flag = [] if weights == "half" else ["--weights", "f32"]
    cli = run_cli("generate", gpt2_f16_path, "--prompt", PROMPT, "--max-tokens", 12, "--json", *flag,
                  parse_json=True)
    assert len(ours["tokens"]) == 12
    assert_equals_the_cli(ours, cli)


def test_half_and_f32_generate_the_same_greedy_tokens_from_different_sums(gpt2_f16):
    half = gpt2_f16.generate(PROMPT, max_tokens=24, ignore_eos=True)
    f32 = gpt2_f16.generate(PROMPT, max_tokens=24, ignore_eos=True, weights="f32")
    assert half["ids"] == f32["ids"]
    half_lp = [t["logprob"] for t in half["tokens"]]
    f32_lp = [t["logprob"] for t in f32["tokens"]]
    assert half_lp == pytest.approx(f32_lp, abs=1e-4)
    assert half_lp != f32_lp, "the half products sum in another order: the two paths are told apart"


def test_half_weights_serve_compare_and_are_released_with_the_model(gpt2_f16_path, run_cli):
    with embedlab.load(gpt2_f16_path) as a, embedlab.load(gpt2_f16_path) as b:
        ours = a.generate(PROMPT, max_tokens=6, compare=b)
    cli = run_cli("generate", gpt2_f16_path, "--prompt", PROMPT, "--max-tokens", 6, "--compare", gpt2_f16_path,
                  "--json", parse_json=True)
    assert [t["kl"] for t in ours["tokens"]] == [t["kl"] for t in cli["tokens"]]
    assert ours["original"]["ids"] == cli["original"]["ids"]
    with pytest.raises(embedlab.InputError, match="is closed"):
        a.generate(PROMPT, max_tokens=2)


def test_a_bad_weights_value_is_named(gpt2_f16):
    with pytest.raises(embedlab.InputError, match=r"generate: weights=: 'f16' is not a weight precision; expected half or f32"):
        gpt2_f16.generate(PROMPT, weights="f16")
    with pytest.raises(TypeError):
        gpt2_f16.generate(PROMPT, weights=16)
