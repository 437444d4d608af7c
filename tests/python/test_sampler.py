"""Issue 62 item 4: generate's sampling chain from Python: sampler="llamacpp" (the default,
llama.cpp's top-k, top-p, min-p, temperature) or "hf" (temperature first), min_p, ignore_eos."""

import pytest

import embedlab

PROMPT = "Once upon a time, there was a little girl named Lily."


@pytest.fixture(scope="module")
def llama(tinyllama):
    return embedlab.load(tinyllama)


def test_sampler_min_p_and_ignore_eos(llama, tinyllama, run_cli):
    hot = dict(max_tokens=8, temperature=0.9, top_p=0.9, seed=3)
    default = llama.generate(PROMPT, **hot)
    assert llama.generate(PROMPT, sampler="llamacpp", min_p=0.05, **hot)["ids"] == default["ids"]
    cli = run_cli("generate", tinyllama, "--prompt", PROMPT, "--max-tokens", 8, "--temperature", 0.9,
                  "--top-p", 0.9, "--seed", 3, "--json", parse_json=True)
    assert cli["ids"] == default["ids"]
    assert (cli["sampler"], cli["min_p"], cli["ignore_eos"]) == ("llamacpp", 0.05, False)
    hf = llama.generate(PROMPT, sampler="hf", min_p=0.1, **hot)
    assert len(hf["ids"]) == 8
    # Greedy tinyllama ends this story at once; ignore_eos goes on.
    ended = "Lily was happy. The end."
    assert llama.generate(ended, max_tokens=4)["stop_reason"] == "eos"
    on = llama.generate(ended, max_tokens=4, ignore_eos=True)
    assert on["stop_reason"] == "max_tokens" and len(on["ids"]) == 4
    cli_on = run_cli("generate", tinyllama, "--prompt", ended, "--max-tokens", 4, "--ignore-eos", "--json",
                     parse_json=True)
    assert cli_on["ids"] == on["ids"] and cli_on["ignore_eos"] is True
    # Greedy is the argmax whatever the chain.
    assert llama.generate(PROMPT, max_tokens=6, sampler="hf")["ids"] == llama.generate(PROMPT, max_tokens=6)["ids"]
    with pytest.raises(embedlab.InputError, match="sampler must be llamacpp or hf, not 'vllm'"):
        llama.generate(PROMPT, sampler="vllm")
    with pytest.raises(embedlab.InputError, match="min_p"):
        llama.generate(PROMPT, min_p=1.5)
