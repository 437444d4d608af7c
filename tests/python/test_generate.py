"""Model.generate: the CLI's generate --json from Python, streamed through on_token,
compared against another model, cancelled by the callback."""

import pytest

import embedlab

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
    with pytest.raises(embedlab.Cancelled):
        llama.generate(PROMPT, max_tokens=10, on_token=lambda t: False)
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
