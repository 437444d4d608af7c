"""EmbedLab from Python: load a model, compress its token table, evaluate, export.

    import embedlab
    model = embedlab.load("models/tinyllama")
    run = embedlab.compress(model, "pca", rank=32, eval_text="heldout.txt")
    run.summary["delta_ln_ppl"], run.factors["Z"].shape   # factors as stored; factors_f32 decoded
    rows = embedlab.sweep(model, "pca", {"rank": [16, 32, 64]}, eval_text="heldout.txt")

Every number comes from the engine the CLI and the workbench run (the compiled
module _embedlab); this file adds only sweep(), a loop over compress(), and the
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
# with the compiled module just below; a user's own setting is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    from ._embedlab import (  # noqa: F401  (the public names)
        Cancelled,
        InputError,
        Model,
        Run,
        _check_requests,
        _runtime,
        account,
        compress,
        compress_table,
        dequantize,
        load,
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

__all__ = ["Cancelled", "InputError", "Model", "Run", "__version__", "account", "compress", "compress_table",
           "dequantize", "load", "methods", "sweep", "version"]


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
