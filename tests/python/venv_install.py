"""Installs build/python into a fresh venv, offline, as a user would (issue 64):

    /usr/bin/python3 tests/python/venv_install.py BUILD_DIR/python VENV_DIR

The venv sees the interpreter's site packages (Debian's NumPy, pytest, torch); the project is
installed with `pip install --no-index --no-build-isolation` from a copy (pip writes its build/
and egg-info beside the project). ctest's `python_venv` runs this once before `python_module`
and `python_module_arrays`, which then run the whole pytest suite with the venv's python against
the installed copy; test_packaging.py uses install() for its own venv outside ctest.
Exit status 0 with the venv's python on stdout; 1 with the reason on stderr.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Debian splits venv and pip out of python3: without them there is no offline install.
DEBIAN_PACKAGES = ("python3-venv", "python3-pip", "python3-setuptools")


def debian_packages_missing(*names):
    """Those of names dpkg does not list as installed ([] where there is no dpkg)."""
    if not shutil.which("dpkg-query"):
        return []
    p = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Status}\\n", *names], capture_output=True, text=True)
    installed = {line.split()[0] for line in p.stdout.splitlines() if line.endswith("installed")}
    return [n for n in names if n not in installed]


def install(project, root, python=sys.executable):
    """A venv at root (replaced if present) with project (build/python) installed offline;
    returns the venv's python. Raises RuntimeError with pip's output when it fails."""
    project, root = Path(project), Path(root)
    if not (project / "pyproject.toml").exists():
        raise RuntimeError(f"{project}/pyproject.toml is absent: re-run CMake")
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([python, "-m", "venv", "--system-site-packages", str(root)], check=True, timeout=120)
    venv_python = root / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="embedlab-project-") as copy:
        shutil.copytree(project, copy, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("CMakeFiles", "*.cmake", "__pycache__", "build", "*.egg-info"))
        p = subprocess.run([str(venv_python), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                            "--quiet", copy], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"pip install --no-index --no-build-isolation {project} failed:\n{p.stdout}{p.stderr}")
    return venv_python


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    missing = debian_packages_missing(*DEBIAN_PACKAGES)
    if missing:
        print(f"venv_install: the offline install needs {' '.join(missing)} "
              f"(Debian: apt-get install {' '.join(missing)})", file=sys.stderr)
        return 1
    try:
        print(install(argv[1], argv[2]))
    except (RuntimeError, subprocess.SubprocessError) as e:
        print(f"venv_install: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
