#!/usr/bin/env python3
"""A tour of the embedlab Python module: a PCA rank sweep plotted as perplexity against
the token table's bytes, and the rare tokens an LLE run rebuilds worst.

    PYTHONPATH=build/python /usr/bin/python3 examples/tour.py [MODEL] [--out tour.png]

MODEL defaults to ../shared/models/tinyllama beside the repository; the text is
../shared/data/tinystories-heldout.txt (--text FILE). Exits 77 (skipped) when the module,
matplotlib, the model or the text is missing.
"""

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SKIP = 77


def skip(why):
    print(f"tour: skipped: {why}", file=sys.stderr)
    sys.exit(SKIP)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default=str(SHARED / "models" / "tinyllama"))
    parser.add_argument("--text", default=str(SHARED / "data" / "tinystories-heldout.txt"))
    parser.add_argument("--out", default="tour.png", help="the plot (PNG)")
    parser.add_argument("--ranks", default="8,16,32,64", help="the PCA ranks swept")
    parser.add_argument("--eval-tokens", type=int, default=4096,
                        help="evaluate on the text's first N tokens (0: all of it)")
    args = parser.parse_args()

    try:
        import embedlab
    except ModuleNotFoundError as e:
        if e.name != "embedlab":
            raise
        skip(f"no module embedlab under {sys.executable}: build it and set PYTHONPATH=build/python")
    except ImportError as e:
        # embedlab's own message names this interpreter, the module's ABI and what to install.
        skip(f"import embedlab failed: {e}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError as e:
        # apt's python3-matplotlib serves Debian's python3 only: the hint names the interpreter.
        skip(f"{e}; {embedlab._install_hint('matplotlib')}")
    for path in (args.model, args.text):
        if not Path(path).exists():
            skip(f"{path} does not exist")

    t0 = time.monotonic()
    model = embedlab.load(args.model)
    print(f"{model!r}")

    # 1. A PCA sweep, every rank evaluated on the same tokens.
    ranks = [int(r) for r in args.ranks.split(",")]
    rows = embedlab.sweep(model, "pca", {"rank": ranks}, eval_text=args.text, eval_tokens=args.eval_tokens)
    first = rows[0]
    print(f"\npca sweep on {first['eval_tokens']} tokens of {Path(args.text).name}; "
          f"original ppl {first['ppl_original']:.4f}, table {first['bytes_before'] / 2**20:.2f} MiB")
    print(f"{'setting':<10} {'bytes':>12} {'bytes ratio':>11} {'ppl':>10} {'dlnPPL':>10} {'mean cos':>9}")
    for r in rows:
        print(f"{r['parameters']:<10} {r['bytes_after']:>12.0f} {r['bytes_after'] / r['bytes_before']:>11.4f} {r['ppl']:>10.4f} "
              f"{r['delta_ln_ppl']:>+10.4f} {r['mean_cosine']:>9.4f}")

    # The question every point answers: better than just quantising the table, at the same bytes?
    quant = embedlab.sweep(model, "quant", {"type": ["q8_0", "q4_0"]}, eval_text=args.text,
                           eval_tokens=args.eval_tokens)
    for r in quant:
        print(f"{r['parameters']:<10} {r['bytes_after']:>12.0f} {r['bytes_after'] / r['bytes_before']:>11.4f} {r['ppl']:>10.4f} "
              f"{r['delta_ln_ppl']:>+10.4f} {r['mean_cosine']:>9.4f}")

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["bytes_after"] / 2**20 for r in rows], [r["ppl"] for r in rows], "o-", label="pca")
    ax.plot([r["bytes_after"] / 2**20 for r in quant], [r["ppl"] for r in quant], "D--", color="gray",
            label="quantised table (baseline)")
    for r in rows + quant:
        ax.annotate(r["parameters"], (r["bytes_after"] / 2**20, r["ppl"]), textcoords="offset points",
                    xytext=(4, 4), fontsize=8)
    ax.plot([first["bytes_before"] / 2**20], [first["ppl_original"]], "s", color="black", label="original")
    ax.set_xscale("log")
    ax.set_xlabel("token table, MiB as stored")
    ax.set_ylabel("perplexity")
    ax.set_title(f"{Path(args.model).name}: PCA of the token table against quantising it")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot: {args.out}")

    # 2. LLE: common rows kept, rare rows rebuilt from their common neighbours.
    run = embedlab.compress(model, "lle", freq_text=args.text, keep_ratio=0.5, k=8)
    common = run.factors["common_ids"].astype(np.int64)
    rare = np.setdiff1d(np.arange(model.vocab_size), common)
    original = model.embedding_table()[rare]
    rebuilt = run.model.embedding_table()[rare]
    cosine = (original * rebuilt).sum(1) / (np.linalg.norm(original, axis=1) * np.linalg.norm(rebuilt, axis=1))
    print(f"\nlle keep 0.5, k 8: {common.size} common, {rare.size} rare tokens; "
          f"rare-row cosine mean {cosine.mean():.4f}; the 10 rebuilt worst:")
    for i in np.argsort(cosine)[:10]:
        token = rare[i]
        print(f"  {token:>6}  cos {cosine[i]:+.4f}  {model.detokenize([token])!r}")
    print(f"\n{time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
