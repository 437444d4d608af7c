"""EmbedLab from Python: load a model, compress its token table, evaluate, export.

    import embedlab
    model = embedlab.load("models/tinyllama")
    run = embedlab.compress(model, "pca", rank=32, eval_text="heldout.txt")
    run.summary["delta_ln_ppl"], run.factors["Z"].shape   # factors as stored; factors_f32 decoded
    rows = embedlab.sweep(model, "pca", {"rank": [16, 32, 64]}, eval_text="heldout.txt")
    chain = embedlab.compress_chain(model, [{"method": "trim", "freq_text": "domain.txt", "coverage": 0.999},
                                            {"method": "pca", "rank": 32, "store": "q8_0"}], out="chain")
    rows.to_pandas()                                       # with pandas installed

Every number comes from the engine the CLI and the workbench run (the compiled
module _embedlab); this file adds only sweep_iter() and sweep(), loops over compress(),
Run.row (the summary beside the record's reconstruction figures), to_pandas(), and the
checks that say, at import, what is missing (NumPy) or which interpreter the module is for.
"""

import itertools
import os
import sys
import sysconfig
from pathlib import Path

from . import _build

# The project's version, as CMake's project() sets it (equals version()).
__version__ = _build.VERSION


def _interpreter():
    """This interpreter as a hint names it: its path, its version, and whether it is Debian's."""
    debian = sys.base_prefix == "/usr"  # Debian's python3, or a venv made from it
    return (f"{sys.executable} (Python {sys.version_info.major}.{sys.version_info.minor}"
            f"{', Debian' if debian else ', not Debian: apt packages are not its packages'})"), debian


def _install_hint(*modules):
    """How to install Python packages for this interpreter: apt for Debian's, pip otherwise."""
    where, debian = _interpreter()
    if debian:
        return "Debian: apt-get install " + " ".join(f"python3-{m}" for m in modules)
    return (f"this interpreter is {where}: install with {sys.executable} -m pip install "
            f"{' '.join(modules)}, or run {_build.PYTHON}, which the module is built for "
            f"(ABI {_built_abi() or 'unknown'}) and whose NumPy scripts/setup.sh installs")


def _built_abi():
    """The compiled module's ABI, from its file name (cpython-311-x86_64-linux-gnu), or None."""
    for path in sorted(Path(__file__).parent.glob("_embedlab.*.so")):
        return path.name[len("_embedlab."):-len(".so")]
    return None


# NumPy first: the module returns arrays, and without it would fail only at the first one.
try:
    import numpy as _numpy  # noqa: F401
except ImportError as e:
    raise ImportError(f"embedlab needs NumPy, which this interpreter cannot import ({e}); "
                      + _install_hint("numpy")) from e

# As embedlab-cli does (model.hpp's restart_with_passive_openmp): OpenMP threads that spin
# while they wait take the cores from the next product; measured here, perplexity runs
# 4-5x slower with libgomp's spinning default. libgomp reads this once, when it loads
# with the compiled module just below; a user's own setting is kept. The second variable
# (peer_environment.hpp) says the policy is ours, so llama.cpp run for comparison by a CLI
# started from here gets the user's environment, not this.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["EMBEDLAB_SET_OMP_WAIT_POLICY"] = "1"

try:
    from ._embedlab import (  # noqa: F401  (the public names)
        Cancelled,
        Chain,
        InputError,
        Model,
        Run,
        _check_requests,
        _runtime,
        account,
        compress,
        compress_chain,
        compress_table,
        dequantize,
        load,
        load_run,
        methods,
        version,
    )
except ImportError as e:
    # Another interpreter's ABI: say which one this is and which one the module is for.
    ours = (sysconfig.get_config_var("EXT_SUFFIX") or "")[1:-len(".so")]
    built = _built_abi()
    if built and built != ours:
        raise ImportError(
            f"embedlab's compiled module is built for {built} ({_build.PYTHON}), but this interpreter is "
            f"{_interpreter()[0]}, ABI {ours}: run {_build.PYTHON}, or rebuild with "
            f"cmake -DPython_EXECUTABLE={sys.executable}") from e
    raise

__all__ = ["Cancelled", "Chain", "InputError", "Model", "Run", "Sweep", "__version__", "account", "compress",
           "compress_chain", "compress_table", "dequantize", "load", "load_run", "methods", "sweep", "sweep_iter",
           "version"]


def _pandas():
    """pandas, or an ImportError saying how to install it for this interpreter."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError(f"to_pandas needs pandas, which this interpreter cannot import ({e}); "
                          + _install_hint("pandas")) from e
    return pandas


class Sweep(list):
    """sweep()'s rows: a list of Run.row dicts, in the grid's itertools.product order."""

    def to_pandas(self):
        """The rows as a pandas.DataFrame, one row per run, a column per summary field."""
        return _pandas().DataFrame(list(self))


def _run_row(self):
    """The run's summary with the table's reconstruction beside mean_cosine: relative_frobenius
    (||E - E_hat||_F / ||E||_F) and explained_variance (the share of the table's variance the
    kept components hold: pca and svd; None for methods without it, and both None for flat)."""
    record = self.record
    row = {}
    for key, value in self.summary.items():
        row[key] = value
        if key == "mean_cosine":
            row["relative_frobenius"] = record.get("reconstruction", {}).get("relative_frobenius")
            row["explained_variance"] = record.get("fit", {}).get("explained_variance_at_rank")
    return row


Run.row = property(_run_row)


def _run_to_pandas(self):
    """This run's row as a one-row pandas.DataFrame (the columns of Sweep.to_pandas())."""
    return _pandas().DataFrame([self.row])


Run.to_pandas = _run_to_pandas


def _run_to_torch(self):
    """The compressed token table as a torch.nn.Module (needs PyTorch): forward(ids) gives
    the rows [..., d], head(hidden) the tied head's logits [..., V]. pca, svd, tt (per-token
    ranks held padded, the padding kept at zero), tucker, lle, lle-unk, lle-pca, fourier and
    aq keep their stored values as parameters (factorised=True; ids and aq's codes as
    buffers), quant its table dequantised; flat (no token table) raises InputError naming these."""
    from ._torch import to_torch

    return to_torch(self)


Run.to_torch = _run_to_torch


def _grid_settings(grid, fields):
    if not isinstance(grid, dict) or not grid:
        raise InputError("sweep: grid must be a dict of field -> list of values, e.g. {'rank': [16, 32]}")
    names = list(grid)
    for name in names:
        if name in fields:
            raise InputError(f"sweep: '{name}' is both in the grid and a keyword")
        if isinstance(grid[name], (str, bytes)) or not hasattr(grid[name], "__iter__"):
            raise InputError(f"sweep: grid['{name}'] must be a list of values")
    return [dict(zip(names, values)) for values in itertools.product(*(list(grid[n]) for n in names))]


def sweep_iter(model, method, grid, *, progress=None, **fields):
    """One compress() per combination of grid's values, each Run yielded as it finishes.

        for run in embedlab.sweep_iter(model, "pca", {"rank": [8, 16]}, eval_text=text):
            print(run.summary["delta_ln_ppl"])

    grid maps request fields to lists of values, e.g. {"rank": [16, 32, 64]}; fields
    are the fields every run shares; progress is compress()'s (True: a bar per run).
    Every row's request is checked (against the model's shape too) here, before the
    first run: a bad value fails at once, naming its row. A run holds its model in
    memory while it is referenced: keep run.row (sweep()'s rows) rather than the runs.
    """
    settings = _grid_settings(grid, fields)
    _check_requests(model, method, [
        ("sweep (" + ", ".join(f"{n}={v!r}" for n, v in s.items()) + ")", {**fields, **s}) for s in settings])

    def runs():
        for setting in settings:
            yield compress(model, method, progress=progress, **fields, **setting)

    return runs()


def sweep(model, method, grid, *, progress=None, **fields):
    """One compress() per combination of grid's values; the runs' rows.

    As sweep_iter(), keeping each run's row only (one run's model in memory at a time).
    Returns a Sweep: a list of Run.row dicts (the summary, with relative_frobenius and
    explained_variance), with to_pandas(). An error or a Ctrl-C keeps the rows finished
    before it: the exception carries them as exc.rows.
    """
    rows = Sweep()
    try:
        for run in sweep_iter(model, method, grid, progress=progress, **fields):
            rows.append(run.row)
            del run  # one run's model in memory at a time
    except BaseException as e:
        try:
            e.rows = rows
        except (AttributeError, TypeError):
            pass
        raise
    return rows
