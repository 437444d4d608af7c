"""Issue 64: the module's arguments as Python checks its own. Paths take os.PathLike
everywhere; a run's model is refused by compress() with what to do; sweep() checks every
row before the first run and keeps finished rows on a later error; on_token's False is a
normal end; a wrong type is a TypeError and a bad value an InputError, each naming the
argument; request fields are named as keywords (rank=), not as the CLI's flags.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python/test_arguments.py -q
"""

import json
import re
import signal
from pathlib import Path

import numpy as np
import pytest

embedlab = pytest.importorskip("embedlab")

PROMPT = "Once upon a time, there was a little girl named Lily."


@pytest.fixture(scope="module")
def llama(tinyllama):
    return embedlab.load(Path(tinyllama))


@pytest.fixture(scope="module")
def pca8(tinyllama):
    return embedlab.compress(Path(tinyllama), "pca", rank=8)


# --- item 2: every path argument takes os.PathLike ----------------------------------


def test_every_path_argument_takes_a_pathlib_path(tinyllama, llama, pca8, stories, heldout, tmp_path):
    out = tmp_path / "run"
    written = pca8.export(out)  # a Path, not str(out)
    assert written["method"] == "pca" and (out / "embedlab.json").is_file()
    assert embedlab.load(out).embedding_kind == "pca"
    # sst2's TSV layout: sentence<TAB>label with a header.
    data = tmp_path / "sst2.tsv"
    data.write_text("sentence\tlabel\na good film\t1\na bad film\t0\n", encoding="utf-8")
    assert llama.task("sst2", data)["data"] == str(data)
    assert llama.export_onnx(tmp_path / "m.onnx")["path"] == str(tmp_path / "m.onnx")
    # Paths inside request fields, and the model itself as a Path.
    run = embedlab.compress(Path(tinyllama), "lle", freq_text=Path(heldout), keep_ratio=0.5, k=4)
    assert run.request["freq_text"] == str(heldout)


def test_path_arguments_refuse_other_types_and_nul(llama, pca8):
    with pytest.raises(TypeError, match=r"load: path must be a str or an os\.PathLike .*not int"):
        embedlab.load(5)
    with pytest.raises(TypeError, match="load: tokenizer must be a str or an os.PathLike"):
        embedlab.load("x", tokenizer=3.5)
    with pytest.raises(TypeError, match="export: dir must be a str or an os.PathLike"):
        pca8.export(None)
    with pytest.raises(TypeError, match="task: data must be a str or an os.PathLike"):
        llama.task("sst2", 7)
    with pytest.raises(TypeError, match="compress: model must be an embedlab.Model, a str or an os.PathLike"):
        embedlab.compress(3, "pca", rank=8)
    # Not InputError('/tmp/'): the NUL is named, as open() names it (a ValueError).
    with pytest.raises(embedlab.InputError, match=r"load: path holds a NUL character"):
        embedlab.load("/tmp/\x00x")
    with pytest.raises(embedlab.InputError, match=r"export: dir holds a NUL character"):
        pca8.export("/tmp/\x00x")


# --- item 3: a run's model is refused by compress, saying what to do ---------------------


def test_compress_refuses_a_runs_model_naming_the_original(tinyllama, pca8):
    with pytest.raises(embedlab.InputError) as info:
        embedlab.compress(pca8.model, "quant", type="q8_0")
    message = str(info.value)
    assert "no such file or directory" not in message
    assert "run's compressed model" in message and message.endswith(str(tinyllama)), message
    with pytest.raises(embedlab.InputError, match="run's compressed model"):
        embedlab.sweep(pca8.model, "quant", {"type": ["q8_0"]})
    # The advice holds: the original compresses.
    assert embedlab.compress(tinyllama, "quant", type="q8_0").summary["method"] == "quant"


# --- item 4: sweep checks every row first, keeps finished rows ---------------------------


def test_sweep_checks_every_row_before_the_first_run(tinyllama, llama):
    calls = []
    for model in (str(tinyllama), llama):  # a path (its config read) or a loaded Model
        with pytest.raises(embedlab.InputError, match=r"sweep \(rank=1000\): rank= 1000 is outside 1\.\.128") as info:
            embedlab.sweep(model, "pca", {"rank": [8, 16, 1000]}, progress=lambda *a: calls.append(a))
        assert calls == [], "a run started before the bad row was found"
        assert info.value.rows == []


def test_sweep_keeps_finished_rows_on_a_later_error(tinyllama):
    seen = []

    def progress(stage, done, total, overall):
        seen.append((stage, done))
        # The second run's first report (its load, 0 done): the first run is finished.
        if seen.count(("load", 0)) == 2:
            raise ValueError("stop here")

    with pytest.raises(ValueError, match="stop here") as info:
        embedlab.sweep(tinyllama, "pca", {"rank": [4, 8, 16]}, progress=progress)
    assert [r["parameters"] for r in info.value.rows] == ["rank 4"]


def test_sweep_keeps_finished_rows_on_ctrl_c(tinyllama):
    seen = []

    def progress(stage, done, total, overall):
        seen.append((stage, done))
        if seen.count(("load", 0)) == 3:
            signal.raise_signal(signal.SIGINT)  # Python's handler: KeyboardInterrupt at the next report

    with pytest.raises(KeyboardInterrupt) as info:
        embedlab.sweep(tinyllama, "pca", {"rank": [4, 8, 16]}, progress=progress)
    assert [r["parameters"] for r in info.value.rows] == ["rank 4", "rank 8"]


# --- item 5: on_token's False ends the generation normally --------------------------------


def test_on_token_false_stops_with_the_text_so_far(llama):
    full = llama.generate(PROMPT, max_tokens=10)
    seen = []

    def on_token(t):
        seen.append(t["text"])
        return len(seen) < 4

    g = llama.generate(PROMPT, max_tokens=10, on_token=on_token)
    assert g["stop_reason"] == "callback"
    assert g["ids"] == full["ids"][:4] and len(g["tokens"]) == 4
    assert g["text"] == "".join(seen) and full["text"].startswith(g["text"]) and g["text"]
    assert g["prompt_ids"] == full["prompt_ids"]
    # Beside a compared model, its own continuation is as long at most.
    stopped = iter([True, False])
    c = llama.generate(PROMPT, max_tokens=10, compare=llama, on_token=lambda t: next(stopped))
    assert c["stop_reason"] == "callback" and c["original"]["ids"] == full["ids"][:2]
    # An exception in on_token is still raised as itself.
    with pytest.raises(ZeroDivisionError):
        llama.generate(PROMPT, max_tokens=10, on_token=lambda t: 1 / 0)


# --- item 7: a wrong type is a TypeError naming the argument -------------------------------


def test_wrong_types_are_type_errors_naming_the_argument(llama, tinyllama):
    with pytest.raises(TypeError, match="generate: prompt must be a str, not list"):
        llama.generate(["a", "b"])
    with pytest.raises(TypeError, match="generate: compare must be an embedlab.Model, not int"):
        llama.generate("a", compare=5)
    with pytest.raises(TypeError, match=r"generate: stop\[1\] must be a str, not int"):
        llama.generate("a", stop=["x", 3])
    with pytest.raises(TypeError, match=r"embed: texts must be a list of str, not generator \(pass list"):
        llama.embed(t for t in ["a", "b"])
    with pytest.raises(TypeError, match="embed: texts must be a list of str, not NoneType"):
        llama.embed(None)
    with pytest.raises(TypeError, match=r"embed: texts\[1\] must be a str, not int"):
        llama.embed(["a", 2])
    with pytest.raises(TypeError, match="perplexity: text must be a str, not int"):
        llama.perplexity(text=5)
    with pytest.raises(TypeError, match="perplexity: progress must return None, True or False, not str"):
        llama.perplexity(ids=np.arange(1, 40), ctx=8, progress=lambda *a: "no")
    with pytest.raises(TypeError, match="perplexity: progress must be a callable, True, False or None, not int"):
        llama.perplexity(ids=np.arange(1, 40), ctx=8, progress=5)
    with pytest.raises(TypeError, match="generate: on_token must return None, True or False, not int"):
        llama.generate("a", max_tokens=3, on_token=lambda t: 0)
    with pytest.raises(TypeError, match="compress: eval_text= must be a number, a str, a bool"):
        embedlab.compress(tinyllama, "pca", rank=8, eval_text=object())
    # NumPy's bool is an answer.
    assert llama.perplexity(ids=np.arange(1, 40), ctx=8, progress=lambda *a: np.True_)["tokens"] == 38


def test_nan_in_a_request_field_names_the_field(tinyllama):
    for value in (float("nan"), float("inf"), [1.0, float("nan")]):
        field = "shape" if isinstance(value, list) else "keep_ratio"
        with pytest.raises(embedlab.InputError, match=f"compress: {field}= must be a finite number"):
            embedlab.compress(tinyllama, "lle", freq_text="t.txt", k=4, **{field: value})


# --- item 8: fields named as keywords -------------------------------------------------------


def test_messages_name_keywords_not_flags(tinyllama, llama):
    def message(call):
        with pytest.raises(embedlab.InputError) as info:
            call()
        text = str(info.value)
        assert "--" not in text, text
        return text

    assert message(lambda: embedlab.compress(tinyllama, "pca")) == "compress: rank= is required (1..d)"
    assert message(lambda: embedlab.compress(tinyllama, "pca", rank=1000)) == \
        "compress: rank= 1000 is outside 1..128"
    assert message(lambda: embedlab.compress(tinyllama, "pca", rank=8, k=3)) == \
        "compress: k= does not apply to method pca"
    assert "ctx= 100000 exceeds the model's context of 256" in message(
        lambda: embedlab.compress(tinyllama, "pca", rank=8, ctx=100000, eval_text="x.txt"))
    assert message(lambda: llama.perplexity(ids=[1, 2, 3], ctx=100000)) == \
        "perplexity: ctx=100000 exceeds the 256-token context the model was trained for"
    assert "divergence: ctx=100000" in message(lambda: llama.divergence(llama, ids=[1, 2, 3], ctx=100000))
    assert message(lambda: embedlab.account("pca", 1000, 64, rank=65)) == "account: rank= 65 is outside 1..64"
