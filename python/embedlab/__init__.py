"""EmbedLab from Python: load a model, compress its token table, evaluate, export.

    import embedlab
    model = embedlab.load("models/tinyllama")
    run = embedlab.compress(model, "pca", rank=32, eval_text="heldout.txt")
    run.summary["delta_ln_ppl"], run.factors["Z"].shape
    rows = embedlab.sweep(model, "pca", {"rank": [16, 32, 64]}, eval_text="heldout.txt")

Every number comes from the engine the CLI and the workbench run (the compiled
module _embedlab); this file adds only sweep(), a loop over compress().
"""

import itertools
import os

# As embedlab-cli does (model.hpp's restart_with_passive_openmp): OpenMP threads that spin
# while they wait take the cores from the next product; measured here, perplexity runs
# 4-5x slower with libgomp's spinning default. libgomp reads this once, when it loads
# with the compiled module just below; a user's own setting is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from ._embedlab import (  # noqa: F401  (the public names)
    Cancelled,
    InputError,
    Model,
    Run,
    _check_requests,
    account,
    compress,
    load,
    methods,
    version,
)

__all__ = ["Cancelled", "InputError", "Model", "Run", "account", "compress", "load", "methods",
           "sweep", "version"]


def sweep(model, method, grid, *, progress=None, **fields):
    """One compress() per combination of grid's values; the runs' summaries as rows.

    grid maps request fields to lists of values, e.g. {"rank": [16, 32, 64]}; fields
    are the fields every run shares. Each row is Run.summary (a dict), ready for
    pandas.DataFrame(rows). progress, if given, is called as in compress().

    Every row's request is checked (against the model's shape too) before the first
    run: a bad value fails in a second, naming its row. An error or a Ctrl-C during the
    runs keeps the rows finished before it: the exception carries them as exc.rows.
    """
    if not isinstance(grid, dict) or not grid:
        raise InputError("sweep: grid must be a dict of field -> list of values, e.g. {'rank': [16, 32]}")
    names = list(grid)
    for name in names:
        if name in fields:
            raise InputError(f"sweep: '{name}' is both in the grid and a keyword")
        if isinstance(grid[name], (str, bytes)) or not hasattr(grid[name], "__iter__"):
            raise InputError(f"sweep: grid['{name}'] must be a list of values")
    settings = [dict(zip(names, values)) for values in itertools.product(*(list(grid[n]) for n in names))]
    rows = []
    try:
        _check_requests(model, method, [
            ("sweep (" + ", ".join(f"{n}={v!r}" for n, v in s.items()) + ")", {**fields, **s})
            for s in settings])
        for setting in settings:
            run = compress(model, method, progress=progress, **fields, **setting)
            rows.append(run.summary)
            del run  # one run's model in memory at a time
    except BaseException as e:
        try:
            e.rows = rows
        except (AttributeError, TypeError):
            pass
        raise
    return rows
