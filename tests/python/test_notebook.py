"""Notebook conveniences (issue 64): progress=True (a tqdm bar, or a plain line without
tqdm), a progress callable that raises or returns False stops the engine at its next
report with nothing half-written, sweep_iter() yields runs as they finish, and
to_pandas() on a sweep's rows and on a run."""

import importlib.util
import sys

import numpy as np
import pytest

import embedlab
from embedlab import _progress


# The compressions' evaluation text: tinygpt2's passes cost in its 50257 logits per token, and
# ~370 tokens (three windows of 128) stop, sweep and tabulate as the 1,000 of short_text do.
@pytest.fixture(scope="module")
def eval_text(brief_text):
    return brief_text


@pytest.fixture(scope="module")
def ids(stories_model, heldout):
    return stories_model.tokenize(heldout.read_text(encoding="utf-8")[:20000])


# --- progress=True / False ----------------------------------------------------------------


def test_progress_true_without_tqdm_writes_one_line(stories_model, ids, capsys, monkeypatch):
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    quiet = stories_model.perplexity(ids=ids, ctx=64, progress=False)
    assert capsys.readouterr().err == ""
    shown = stories_model.perplexity(ids=ids, ctx=64, progress=True)
    assert shown["ppl"] == quiet["ppl"]
    err = capsys.readouterr().err
    last = err.split("\r")[-1]
    assert last == f"perplexity: eval {quiet['tokens']}/{quiet['tokens']} (100%)\x1b[K\n", repr(err[-200:])


@pytest.mark.skipif(importlib.util.find_spec("tqdm") is None, reason="tqdm is not importable (apt: python3-tqdm)")
def test_progress_true_shows_a_tqdm_bar(stories_model, ids, capsys):
    stories_model.perplexity(ids=ids, ctx=64, progress=True)
    err = capsys.readouterr().err
    assert "perplexity eval" in err and "100%|" in err, repr(err[-300:])


def test_progress_true_on_compress_names_its_stages(tinygpt2, eval_text, capsys, monkeypatch):
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    monkeypatch.setattr(_progress.time, "monotonic", iter(range(0, 10**6)).__next__)  # every report shown
    embedlab.compress(tinygpt2, "pca", rank=4, eval_text=eval_text, progress=True)
    err = capsys.readouterr().err
    for stage in ("compress: load", "compress: eval original", "compress: compress pca", "compress: eval compressed"):
        assert stage in err, (stage, err[-300:])
    assert err.endswith("(100%)\x1b[K\n")


# --- stopping from Python -----------------------------------------------------------------------


def test_a_raising_progress_stops_the_engine_at_once(stories_model, ids):
    calls = []

    def progress(stage, done, total, overall):
        calls.append((done, total))
        if done > 0:
            raise KeyboardInterrupt  # what Ctrl-C raises in a progress callable

    with pytest.raises(KeyboardInterrupt):
        stories_model.perplexity(ids=ids, ctx=32, batch=1, progress=progress)
    # No report after the one that raised: the first window's, of many.
    assert [done > 0 for done, _ in calls] == [False] * (len(calls) - 1) + [True]
    assert calls[-1][0] < calls[-1][1] / 10


class Stop(Exception):
    pass


def test_a_raising_progress_leaves_no_half_written_export(gpt2, eval_text, tmp_path):
    run = embedlab.compress(gpt2, "pca", rank=4, eval_text=eval_text)
    reports = []

    def fail_midway(stage, done, total, overall):
        reports.append(done)
        if done > 0:
            raise Stop("stop here")

    with pytest.raises(Stop, match="^stop here$"):
        run.export(tmp_path / "out", progress=fail_midway)
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temporary directory left either
    # Over an existing export: the previous directory stays as it was.
    first = run.export(tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    with pytest.raises(Stop):
        run.export(tmp_path / "out", overwrite=True, progress=fail_midway)
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert embedlab.load_run(tmp_path / "out").record == first


def test_a_raising_progress_stops_compress_and_token_damage(gpt2, tinygpt2, eval_text):
    stages = []

    def fail_at_compressed_eval(stage, done, total, overall):
        stages.append(stage)
        if stage == "eval compressed":
            raise Stop(stage)

    with pytest.raises(Stop, match="^eval compressed$"):
        embedlab.compress(tinygpt2, "pca", rank=4, eval_text=eval_text, progress=fail_at_compressed_eval)
    assert stages.count("eval compressed") == 1
    run = embedlab.compress(gpt2, "pca", rank=4)
    with pytest.raises(embedlab.Cancelled):
        run.token_damage(gpt2, text=eval_text.read_text(encoding="utf-8"), progress=lambda *a: False)


# --- sweep_iter and to_pandas -------------------------------------------------------------


def test_sweep_iter_yields_runs_as_they_finish(gpt2, eval_text):
    loads = []
    # Every row is checked when sweep_iter is called, before the first run.
    with pytest.raises(embedlab.InputError, match=r"sweep \(rank=1000\): rank= 1000 is outside 1\.\.128"):
        embedlab.sweep_iter(gpt2, "pca", {"rank": [2, 1000]}, eval_text=eval_text)
    runs = embedlab.sweep_iter(gpt2, "pca", {"rank": [2, 4]}, eval_text=eval_text,
                               progress=lambda stage, *a: loads.append(stage) if stage == "load" else None)
    assert loads == []  # nothing runs until asked for
    first = next(runs)
    assert isinstance(first, embedlab.Run) and first.request["rank"] == 2
    assert len(set(loads)) == 1 and loads.count("load") >= 1
    loads.clear()
    rest = list(runs)
    assert [r.request["rank"] for r in rest] == [4] and loads
    one = embedlab.compress(gpt2, "pca", rank=4, eval_text=eval_text)
    assert rest[0].summary["ppl"] == one.summary["ppl"]


def test_sweep_rows_carry_the_reconstruction_bytes_and_kl(gpt2, eval_text):
    E = gpt2.embedding_table().astype(np.float64)
    rows = embedlab.sweep(gpt2, "pca", {"rank": [4, 16]}, eval_text=eval_text, divergence=True)
    centred = E - E.mean(axis=0)
    eigenvalues = np.sort(np.linalg.eigvalsh(centred.T @ centred))[::-1]
    runs = list(embedlab.sweep_iter(gpt2, "pca", {"rank": [4, 16]}, eval_text=eval_text, divergence=True))
    for row, run, rank in zip(rows, runs, (4, 16)):
        assert list(row) == list(run.row) and row["ppl"] == run.row["ppl"]
        keys = list(row)
        assert keys[keys.index("mean_cosine") + 1:keys.index("mean_cosine") + 3] == ["relative_frobenius",
                                                                                      "explained_variance"]
        # Against NumPy: the rebuilt rows' error, and PCA's share of the variance at the rank.
        error = np.linalg.norm(E - run.embedding_table()) / np.linalg.norm(E)
        assert row["relative_frobenius"] == pytest.approx(error, rel=1e-4)
        assert row["explained_variance"] == pytest.approx(eigenvalues[:rank].sum() / eigenvalues.sum(), rel=1e-4)
        assert row["bytes_after"] == 4 * run.record["accounting"]["params_after"]
        assert row["kl_mean"] > 0 and 0 <= row["top1_agreement"] <= 1
    assert rows[0]["relative_frobenius"] > rows[1]["relative_frobenius"]
    # A method without a variance share: None; without divergence=True: no KL.
    quant = embedlab.compress(gpt2, "quant", type="q8_0")
    assert quant.row["explained_variance"] is None and quant.row["kl_mean"] is None
    error = np.linalg.norm(E - quant.embedding_table()) / np.linalg.norm(E)
    assert quant.row["relative_frobenius"] == pytest.approx(error, rel=1e-4)


pandas_missing = pytest.mark.skipif(importlib.util.find_spec("pandas") is None,
                                    reason="pandas is not importable (apt: python3-pandas)")


@pandas_missing
def test_to_pandas_of_a_sweep_and_of_a_run(gpt2, eval_text):
    rows = embedlab.sweep(gpt2, "pca", {"rank": [2, 4]}, eval_text=eval_text)
    assert isinstance(rows, embedlab.Sweep) and isinstance(rows, list) and len(rows) == 2
    frame = rows.to_pandas()
    assert list(frame.columns) == list(rows[0]) and len(frame) == 2
    assert frame["ppl"].tolist() == [r["ppl"] for r in rows]
    assert frame["parameters"].tolist() == ["rank 2", "rank 4"]
    run = embedlab.compress(gpt2, "pca", rank=4, eval_text=eval_text)
    one = run.to_pandas()
    assert len(one) == 1 and list(one.columns) == list(run.row)
    assert one["delta_ln_ppl"][0] == run.summary["delta_ln_ppl"]
    assert one["ppl"][0] == frame["ppl"][1]


def test_to_pandas_without_pandas_says_what_to_install(gpt2, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match=r"to_pandas needs pandas, which this interpreter cannot import "
                                          r"\(.*\); Debian: apt-get install python3-pandas"):
        embedlab.Sweep([{"ppl": 1.0}]).to_pandas()
    run = embedlab.compress(gpt2, "pca", rank=2)
    with pytest.raises(ImportError, match="to_pandas needs pandas"):
        run.to_pandas()


def test_progress_must_be_a_callable_or_a_bool(stories_model):
    with pytest.raises(TypeError, match="perplexity: progress must be a callable, True, False or None, not str"):
        stories_model.perplexity(ids=np.arange(1, 40), ctx=8, progress="yes")
    # generate's on_token takes no bar.
    with pytest.raises(TypeError, match="generate: on_token must be a callable or None, not bool"):
        stories_model.generate("a", max_tokens=2, on_token=True)
