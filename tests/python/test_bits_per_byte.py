"""Issue 60: bits per byte beside perplexity, comparable across tokenizations: from
perplexity() and in every run's summary, equal to the CLI's."""

import math

import pytest

import embedlab

TEXT = "Once upon a time, a little robot found a red ball in the park. It smiled at the sun."


@pytest.fixture(scope="module")
def llama(tinyllama):
    return embedlab.load(tinyllama)


def test_perplexity_reports_bits_per_byte(llama, tinyllama, tmp_path, run_cli):
    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    r = llama.perplexity(text=TEXT, ctx=16)
    # SentencePiece drops the text's leading space: the scored bytes are all but "Once".
    assert r["scored_bytes"] == len(TEXT.encode()) - len("Once")
    bits = r["nll_per_token"] * r["tokens"] / math.log(2) / r["scored_bytes"]
    assert r["bits_per_byte"] == pytest.approx(bits, rel=1e-12)
    cli = run_cli("eval", tinyllama, "--text", text, "--ctx", 16, "--json", parse_json=True)
    assert cli["bits_per_byte"] == pytest.approx(r["bits_per_byte"], rel=1e-9)
    assert cli["scored_bytes"] == r["scored_bytes"]


def test_every_run_summary_has_both_models_bits_per_byte(llama, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(TEXT * 4)
    run = embedlab.compress(llama, "quant", type="q8_0", eval_text=text, ctx=32)
    s = run.summary
    assert s["bits_per_byte"] > 0 and s["bits_per_byte_original"] > 0
    # The same text and tokens: the ratio of bits per byte is the ratio of NLLs.
    assert s["bits_per_byte"] / s["bits_per_byte_original"] == pytest.approx(
        math.log(s["ppl"]) / math.log(s["ppl_original"]), rel=1e-9)
