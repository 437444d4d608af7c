# %% [markdown]
# # EmbedLab in a notebook: compress a token table, compare with quantising, find the damage
#
# A walk-through in cells (`# %%`: VS Code, PyCharm and Jupyter with jupytext open it as a
# notebook; `python3 examples/notebook.py` runs it as a script). It uses the model and the
# text bundled with the repository, so it runs anywhere the module is built:
#
#     PYTHONPATH=build/python /usr/bin/python3 examples/notebook.py [--out DIR]
#
# Paths are relative to the repository (found from this file). Plots need matplotlib
# (written to DIR as PNG when run as a script); tables need pandas; the bars need tqdm.
# Each is skipped, saying so, when it is missing. Exits 77 (skipped) without the module.

# %%
import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

try:
    REPO = Path(__file__).resolve().parents[1]
except NameError:  # a notebook kernel started in examples/ or in the repository
    REPO = Path.cwd().parent if Path.cwd().name == "examples" else Path.cwd()
MODEL = REPO / "resources" / "models" / "tinygpt2-f16"
TEXT = REPO / "resources" / "texts" / "tinystories-heldout.txt"

parser = argparse.ArgumentParser(description="EmbedLab's notebook walk-through, as a script")
parser.add_argument("--out", default=None, help="where plots and the exported run go (default: a temporary folder)")
parser.add_argument("--eval-tokens", type=int, default=4096, help="evaluate on the text's first N tokens")
args, _ = parser.parse_known_args()  # a notebook kernel passes its own arguments
OUT = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="embedlab-notebook-"))
OUT.mkdir(parents=True, exist_ok=True)

try:
    import embedlab
except ImportError as e:
    print(f"notebook: skipped: {e} (build the module and set PYTHONPATH=build/python)", file=sys.stderr)
    sys.exit(77)
import numpy as np

HAVE_PANDAS = importlib.util.find_spec("pandas") is not None
HAVE_PLOTS = importlib.util.find_spec("matplotlib") is not None
if HAVE_PLOTS:
    import matplotlib

    if "ipykernel" not in sys.modules:
        matplotlib.use("Agg")  # a script: files, no window
    import matplotlib.pyplot as plt
print(f"embedlab {embedlab.__version__}; pandas {'yes' if HAVE_PANDAS else 'no'}, "
      f"matplotlib {'yes' if HAVE_PLOTS else 'no'}; output in {OUT}")


def show(frame_or_rows, columns):
    """A table: pandas' when it is there, else plain lines."""
    if HAVE_PANDAS:
        print(frame_or_rows.to_pandas()[columns].to_string(index=False))
    else:
        for row in frame_or_rows:
            print("  ".join(f"{c}={row[c]}" for c in columns))


# %% [markdown]
# ## Load the model and score the text
# `with` releases the model at the end of the block; here it stays loaded for every cell.

# %%
model = embedlab.load(MODEL)
ids = model.tokenize(TEXT.read_text(encoding="utf-8"))[: args.eval_tokens]
base = model.perplexity(ids=ids, progress=True)
print(model, f"\nperplexity {base['ppl']:.4f} over {base['tokens']} tokens")
losses = model.token_losses(ids=ids)  # NLL per scored token: its mean is the eval's
print(f"mean of token_losses {losses.mean():.8f} = nll_per_token {base['nll_per_token']:.8f}")

# %% [markdown]
# ## Compress with PCA at several ranks, as each run finishes
# `sweep_iter` checks every row first, then yields one `Run` at a time; keep each run's `row`
# (its summary with the table's `relative_frobenius` and `explained_variance`, as `sweep` keeps).

# %%
eval_file = OUT / "eval.txt"
eval_file.write_text(model.detokenize(ids), encoding="utf-8")
rows = embedlab.Sweep()
for run in embedlab.sweep_iter(model, "pca", {"rank": [8, 16, 32, 64]}, eval_text=eval_file, progress=True):
    row = run.row
    rows.append(row)
    print(f"{row['parameters']}: delta ln PPL {row['delta_ln_ppl']:+.4f}, {row['bytes_after'] / 2**20:.2f} MiB, "
          f"relative Frobenius error {row['relative_frobenius']:.4f}, "
          f"explained variance {row['explained_variance']:.4f}")

# %% [markdown]
# ## Compare with quantising the table (the same evaluation, bytes as stored)

# %%
quantised = embedlab.sweep(model, "quant", {"type": ["q8_0", "q4_0"]}, eval_text=eval_file)
both = embedlab.Sweep(rows + quantised)
show(both, ["method", "parameters", "bytes_after", "ppl", "delta_ln_ppl", "relative_frobenius"])
if HAVE_PLOTS:
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, marker in (("pca", "o-"), ("quant", "s")):
        mine = [r for r in both if r["method"] == method]
        ax.plot([r["bytes_after"] / 2**20 for r in mine], [r["delta_ln_ppl"] for r in mine], marker, label=method)
        for r in mine:
            ax.annotate(r["parameters"], (r["bytes_after"] / 2**20, r["delta_ln_ppl"]), fontsize=7)
    ax.set_xlabel("token table as stored (MiB)")
    ax.set_ylabel("Δ ln PPL")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "pareto.png", dpi=100)

# %% [markdown]
# ## Where does rank 16 hurt? Per-token damage
# `token_damage()` is `eval --reference --per-token` as arrays, one entry per vocabulary id.

# %%
run = embedlab.compress(model, "pca", rank=16, eval_text=eval_file)
damage = run.token_damage(model)
seen = damage["target_count"] > 0
print(f"{seen.sum()} of {model.vocab_size} tokens occur as targets; mean cosine of their rows "
      f"{damage['cosine'][seen].mean():.4f}, of the rest {damage['cosine'][~seen].mean():.4f}")
worst = np.argsort(np.nan_to_num(damage["kl_as_target"], nan=-1))[::-1][:8]
for token in worst:
    print(f"  {model.detokenize([token])!r:>12}: KL as target {damage['kl_as_target'][token]:.3f} "
          f"over {damage['target_count'][token]} positions, cosine {damage['cosine'][token]:.3f}")
for bucket in damage["buckets"]:
    print(f"  seen {bucket['bucket']:>7} times: {bucket['tokens']:>6} tokens, mean cosine "
          f"{bucket['mean_cosine']:.4f}, KL as target {bucket['kl_as_target'] or float('nan'):.4f}")

# %%
per_position = run.model.divergence(model, ids=ids, per_token=True)["per_token"]
if HAVE_PLOTS:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.semilogx(damage["target_count"][seen], damage["kl_as_target"][seen], ".", alpha=0.4)
    left.set_xlabel("times the token is a target")
    left.set_ylabel("mean KL where it is predicted (nats)")
    window = 64
    smooth = np.convolve(per_position["kl"], np.ones(window) / window, mode="valid")
    right.plot(smooth)
    right.set_xlabel("position in the text")
    right.set_ylabel(f"KL, mean over {window} positions")
    fig.tight_layout()
    fig.savefig(OUT / "damage.png", dpi=100)
print(f"KL per position: mean {per_position['kl'].mean():.4f}, top-1 agreement "
      f"{per_position['same_top'].mean():.3f}")

# %% [markdown]
# ## What a harness asks for: log-likelihoods of continuations

# %%
context = "Once upon a time, there was a little"
for continuation in [" girl", " dog", " table"]:
    original = model.loglikelihood(context, continuation)
    compressed = run.model.loglikelihood(context, continuation)
    print(f"{continuation!r:>9}: original {original:8.3f}, pca 16 {compressed:8.3f}")

# %% [markdown]
# ## Save the run, read it back, pickle it

# %%
import pickle  # noqa: E402

run.export(OUT / "pca16", overwrite=True)
back = embedlab.load_run(OUT / "pca16")
assert back.record["accounting"] == run.record["accounting"]
assert np.array_equal(back.embedding_table(), run.embedding_table())
again = pickle.loads(pickle.dumps(back))  # by its directory
print(again, "- its model's perplexity", round(again.model.perplexity(ids=ids)["ppl"], 4),
      "= the run's", round(run.summary["ppl"], 4))
