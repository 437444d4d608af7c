"""The package around the module (issue 64, items 9 and a-c): NumPy checked at import,
an interpreter of another ABI told which one the module is for, __version__ and
python3 -m embedlab, and build/python installable offline into a venv. Under ctest the
whole suite runs from such a venv (python_venv, tests/python/venv_install.py): the venv
checks here then read that one (EMBEDLAB_VENV) instead of making their own."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import embedlab
import venv_install
from conftest import BUILD, EXPECT_INSTALLED, REPO, installed_copy_problem

PACKAGE = Path(embedlab.__file__).resolve().parent

# A finder first on sys.meta_path that refuses NumPy, as an interpreter without it would.
BLOCK_NUMPY = """
import sys
class NoNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoNumpy())
"""


def python(code, *, path=PACKAGE.parent, env=None):
    """`code` run by this interpreter with only `path` (the package's parent) on PYTHONPATH."""
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    e.update(env or {}, PYTHONPATH=str(path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=e)


def last_line(p):
    return p.stderr.strip().splitlines()[-1]


def test_import_without_numpy_fails_at_once_naming_the_package():
    p = python(BLOCK_NUMPY + "import embedlab\n")
    assert p.returncode != 0
    line = last_line(p)
    assert line.startswith("ImportError: embedlab needs NumPy")
    if sys.base_prefix == "/usr":  # Debian's python3 (the tests' own)
        assert "Debian: apt-get install python3-numpy" in line


def test_without_numpy_another_interpreter_is_told_pip_and_the_modules_interpreter():
    # As a pyenv python3 sees it: not Debian's, so apt's python3-numpy is not its NumPy.
    p = python("import sys; sys.base_prefix = '/opt/other-python'\n" + BLOCK_NUMPY + "import embedlab\n")
    line = last_line(p)
    assert "apt-get" not in line
    assert f"{sys.executable} -m pip install numpy" in line
    abi = sysconfig.get_config_var("EXT_SUFFIX")[1:-3]
    assert f"ABI {abi}" in line and "not Debian" in line


def test_another_abi_is_named_with_the_modules_own(tmp_path):
    # The module renamed to another ABI's suffix: this interpreter does not find it.
    copy = tmp_path / "embedlab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (so,) = copy.glob("_embedlab.*.so")
    so.rename(copy / "_embedlab.cpython-399-x86_64-linux-gnu.so")
    p = python("import embedlab\n", path=tmp_path)
    line = last_line(p)
    ours = sysconfig.get_config_var("EXT_SUFFIX")[1:-3]
    assert "built for cpython-399-x86_64-linux-gnu" in line
    assert f"ABI {ours}" in line and sys.executable in line


def test_version_is_the_cmake_projects():
    m = re.search(r"project\(EmbedLab VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text())
    assert embedlab.__version__ == m.group(1) == embedlab.version()
    assert "__version__" in embedlab.__all__


def test_python_m_embedlab_prints_version_paths_and_threads():
    p = python("import runpy; runpy.run_module('embedlab', run_name='__main__')",
               env={"EMBEDLAB_THREADS": "1"})
    assert p.returncode == 0, p.stderr
    lines = dict(line.split(None, 1) for line in p.stdout.splitlines()[1:] if not line.startswith("built"))
    assert p.stdout.splitlines()[0] == f"embedlab {embedlab.__version__}"
    assert Path(lines["module"]).samefile(next(PACKAGE.glob("_embedlab.*.so")))
    assert "libtorch" in Path(lines["libtorch"]).name and Path(lines["libtorch"]).exists()
    assert lines["threads"] == "1 (EMBEDLAB_THREADS=1)"


def test_python_m_embedlab_runs_as_a_command():
    e = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    p = subprocess.run([sys.executable, "-m", "embedlab"], capture_output=True, text=True, timeout=120, env=e)
    assert p.returncode == 0 and p.stdout.startswith("embedlab "), p.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv that sees Debian's NumPy, with build/python installed into it offline: ctest's
    (python_venv, named by EMBEDLAB_VENV), or one made here."""
    if os.environ.get("EMBEDLAB_VENV"):
        return Path(os.environ["EMBEDLAB_VENV"]).absolute() / "bin" / "python"
    missing = venv_install.debian_packages_missing(*venv_install.DEBIAN_PACKAGES)
    if missing:
        pytest.skip(f"offline install needs {' '.join(missing)} (Debian: apt-get install {' '.join(missing)})")
    # The build's project (the package here may be an installed copy, without pyproject.toml).
    if not (BUILD / "python" / "pyproject.toml").exists():
        pytest.skip(f"{BUILD}/python/pyproject.toml is absent: re-run CMake")
    return venv_install.install(BUILD / "python", tmp_path_factory.mktemp("venv") / "env")


def test_offline_install_into_a_venv_imports_and_runs(venv, tmp_path):
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import embedlab, pathlib; print(embedlab.__version__); print(embedlab.__file__); "
            "print(pathlib.Path(embedlab.__file__).with_name('__init__.pyi').exists()); "
            "print(embedlab.account('pca', 512, 64, rank=8)['params_after'])")
    p = subprocess.run([str(venv), "-c", code], capture_output=True, text=True, timeout=120, env=e, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    version, file, stub, params = p.stdout.split()
    assert version == embedlab.__version__
    assert Path(file).is_relative_to(venv.parent.parent)  # the venv's copy, not build/python
    assert stub == "True" and int(params) == 512 * 8 + 8 * 64 + 64
    p = subprocess.run([str(venv), "-m", "embedlab"], capture_output=True, text=True, timeout=120, env=e,
                       cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith(f"embedlab {embedlab.__version__}"), p.stderr
    p = subprocess.run([str(venv), "-m", "pip", "show", "embedlab"], capture_output=True, text=True, timeout=120,
                       env=e)
    assert f"Version: {embedlab.__version__}" in p.stdout


def test_the_suite_passes_against_the_venvs_install(venv):
    """The package works as installed, not only from build/python. Under ctest the whole suite
    runs with the venv's python (EMBEDLAB_EXPECT_INSTALLED): this process must be that venv's,
    importing its copy. Elsewhere, part of the suite (the stub and the arguments) runs there."""
    if EXPECT_INSTALLED:
        assert Path(sys.prefix).resolve() == venv.parent.parent.resolve(), (sys.prefix, venv)
        assert installed_copy_problem(embedlab.__file__) is None
        from importlib import metadata

        files = {str(f) for f in metadata.files("embedlab")}
        assert metadata.version("embedlab") == embedlab.__version__
        so = next(PACKAGE.glob("_embedlab.*.so")).name
        assert {"embedlab/__init__.pyi", "embedlab/py.typed", f"embedlab/{so}"} <= files
        return
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import embedlab, pathlib, sys, pytest; "
            f"assert pathlib.Path(embedlab.__file__).is_relative_to({str(venv.parent.parent)!r}), embedlab.__file__; "
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/python/test_stub.py', "
            "'tests/python/test_arguments.py']))")
    p = subprocess.run([str(venv), "-B", "-c", code], capture_output=True, text=True, timeout=300, env=e,
                       cwd=REPO)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    passed = re.search(r"\b(\d+) passed\b", p.stdout)
    assert passed and int(passed.group(1)) >= 20 and "skipped" not in p.stdout, p.stdout[-500:]


def test_the_installed_copy_check_refuses_the_builds_copy_and_a_non_venv(tmp_path):
    # conftest's check, which EMBEDLAB_EXPECT_INSTALLED applies at the suite's start.
    build_copy = BUILD / "python" / "embedlab" / "__init__.py"
    problem = installed_copy_problem(build_copy, prefix=str(tmp_path), base_prefix="/usr")
    assert "imported from the build's python/" in problem
    assert "not a venv's python" in installed_copy_problem(tmp_path / "x.py", prefix="/usr", base_prefix="/usr")
    assert "outside the venv" in installed_copy_problem("/opt/elsewhere/embedlab/__init__.py",
                                                        prefix=str(tmp_path), base_prefix="/usr")
    assert installed_copy_problem(tmp_path / "lib" / "embedlab" / "__init__.py", prefix=str(tmp_path),
                                  base_prefix="/usr") is None


# --- the examples from the install (ctest's python_example, python_notebook) -------------------

EXAMPLE_RUNNER = REPO / "tests" / "python" / "run_installed_example.py"


def run_example(python, script, *, env=None, cwd):
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    e.update(env or {})
    return subprocess.run([str(python), str(EXAMPLE_RUNNER), str(BUILD), str(script), "--flag", "x"],
                          capture_output=True, text=True, timeout=120, env=e, cwd=cwd)


def test_an_example_runs_from_the_venvs_install_and_fails_from_build_python(venv, tmp_path):
    if not (BUILD / "python" / "embedlab" / "__init__.py").exists():
        pytest.skip(f"{BUILD}/python has no built package to import by mistake")
    example = tmp_path / "example.py"
    example.write_text("import sys\nimport embedlab\nprint(embedlab.account('pca', 512, 64, rank=8)['params_after'],"
                       " sys.argv[1:], __name__)\nsys.exit(77 if 'skip' in sys.argv else 0)\n")
    ok = run_example(venv, example, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == f"{512 * 8 + 8 * 64 + 64} ['--flag', 'x'] __main__\n"  # as `python example.py --flag x`
    venv_package = Path(venv.parent.parent).resolve()
    assert ok.stderr.startswith(f"run_installed_example: example.py imported embedlab from {venv_package}/"), ok.stderr

    # The build's copy first on PYTHONPATH, or put on sys.path by the example itself: refused.
    from_build = run_example(venv, example, env={"PYTHONPATH": str(BUILD / "python")}, cwd=tmp_path)
    assert from_build.returncode == 1
    build_init = (BUILD / "python" / "embedlab" / "__init__.py").resolve()
    assert from_build.stderr.splitlines()[-1].startswith(
        f"run_installed_example: example.py (exit status 0): embedlab was imported from the build's python/ "
        f"({build_init}), not from the venv "), from_build.stderr
    inserting = tmp_path / "inserting.py"
    inserting.write_text(f"import sys\nsys.path.insert(0, {str(BUILD / 'python')!r})\nimport embedlab\n")
    assert "from the build's python/" in run_example(venv, inserting, cwd=tmp_path).stderr

    # An example that never imported embedlab, a skip included, fails: the install is what is tested.
    skipping = tmp_path / "skipping.py"
    skipping.write_text("import sys\nsys.exit(77)\n")
    p = run_example(venv, skipping, cwd=tmp_path)
    assert p.returncode == 1 and p.stderr.endswith(
        "skipping.py (exit status 77): the example did not import embedlab (see its output above)\n"), p.stderr
    # Its own skip once embedlab is imported is kept (ctest's SKIP_RETURN_CODE 77).
    example_skip = tmp_path / "skip.py"
    example_skip.write_text(example.read_text().replace("'skip' in sys.argv", "True"))
    assert run_example(venv, example_skip, cwd=tmp_path).returncode == 77
    # Not a venv's python.
    p = run_example(sys.base_prefix + "/bin/python3", example, cwd=tmp_path)
    assert p.returncode == 1 and "is not a venv's python" in p.stderr, p.stderr
