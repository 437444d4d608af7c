"""Runs an example as a user of the installed package would (issue 64): ctest's python_example
and python_notebook run examples/tour.py and examples/notebook.py through this, with the python
of the venv that python_venv made (tests/python/venv_install.py), PYTHONPATH unset.

    VENV/bin/python tests/python/run_installed_example.py BUILD_DIR examples/tour.py [ARGS...]

The example runs in this process as `python examples/tour.py ARGS` would run it (runpy, its
folder first on sys.path), then what it imported is checked: embedlab and each of its modules
(the compiled _embedlab among them) must come from this venv, not from BUILD_DIR/python (a
PYTHONPATH, a sys.path entry) nor from anywhere else. Exit status: 1 when the check fails or
the example never imported embedlab (an install that does not import skips nothing); else the
example's own (0, or 77 when it skipped for a missing model or text).
"""

import runpy
import sys
import traceback
from pathlib import Path


def embedlab_modules():
    """{name: file} of every loaded module of the embedlab package that has a file."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "embedlab" or name.startswith("embedlab."):
            file = getattr(module, "__file__", None)
            if file:
                found[name] = Path(file).resolve()
    return found


def import_problem(modules, build_python, prefix=sys.prefix, base_prefix=sys.base_prefix):
    """Why the example's embedlab is not this venv's installed copy, or None."""
    if prefix == base_prefix:
        return f"{sys.executable} is not a venv's python (sys.prefix {prefix}); run the venv's"
    if "embedlab" not in modules:
        return "the example did not import embedlab (see its output above)"
    if "embedlab._embedlab" not in modules:
        return "the example's embedlab did not load its compiled module embedlab._embedlab"
    venv = Path(prefix).resolve()
    for name, file in sorted(modules.items()):
        if file.is_relative_to(build_python):
            return f"{name} was imported from the build's python/ ({file}), not from the venv {prefix}"
        if not file.is_relative_to(venv):
            return f"{name} was imported from {file}, outside the venv {prefix}"
    return None


def run(script, args):
    """The example's exit status, as `python script args` gives it."""
    sys.argv = [str(script), *args]
    sys.path[0] = str(script.parent)
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:  # the traceback python prints, and its status
        traceback.print_exc()
        return 1
    return 0


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    build_python = (Path(argv[1]) / "python").resolve()
    script = Path(argv[2]).resolve()
    status = run(script, argv[3:])
    sys.stdout.flush()
    modules = embedlab_modules()
    problem = import_problem(modules, build_python)
    if problem:
        print(f"run_installed_example: {script.name} (exit status {status}): {problem}", file=sys.stderr)
        return 1
    print(f"run_installed_example: {script.name} imported embedlab from {modules['embedlab'].parent}",
          file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
