"""Shared fixtures of the Python module's tests: where the repository, its build and the
shared data are, the CLI to compare against, and the few runs several tests read.

The build directory is $EMBEDLAB_BUILD_DIR (default <repo>/build); its python/ is put on
sys.path when `embedlab` is not importable otherwise. The shared data is ../shared beside
the repository; whatever needs it skips, with the reason, when it is absent.
"""

import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
BUILD = Path(os.environ.get("EMBEDLAB_BUILD_DIR", REPO / "build")).resolve()

# ctest's python_module* run the suite with a venv's python against the copy pip installed
# there (tests/python/venv_install.py), with EMBEDLAB_EXPECT_INSTALLED=1.
EXPECT_INSTALLED = os.environ.get("EMBEDLAB_EXPECT_INSTALLED", "") not in ("", "0")

# PYTHONPATH wins; without it, the build's package (never when the installed copy is expected).
if (not EXPECT_INSTALLED and importlib.util.find_spec("embedlab") is None
        and (BUILD / "python" / "embedlab").is_dir()):
    sys.path.insert(0, str(BUILD / "python"))


def installed_copy_problem(package_file, prefix=sys.prefix, base_prefix=sys.base_prefix):
    """Why package_file (embedlab.__file__) is not a venv's installed copy, or None."""
    where = Path(package_file).resolve()
    if prefix == base_prefix:
        return f"{sys.executable} is not a venv's python (sys.prefix {prefix})"
    if where.is_relative_to(BUILD / "python"):
        return f"embedlab is imported from the build's python/ ({where}), not the venv {prefix}"
    if not where.is_relative_to(Path(prefix).resolve()):
        return f"embedlab is imported from {where}, outside the venv {prefix}"
    return None


if EXPECT_INSTALLED:
    import embedlab as _installed

    _problem = installed_copy_problem(_installed.__file__)
    if _problem:
        raise ImportError(f"EMBEDLAB_EXPECT_INSTALLED is set, but {_problem}")


def pytest_configure(config):
    config.addinivalue_line("markers", "leak: loads a model many times and watches the RSS (a few seconds)")


# Fields of a run summary (and of a manifest) that are timings or dates: never compared
# between two runs.
def is_timing(key):
    return "seconds" in key or "per_second" in key or key in ("created",)


def without_timing(value):
    """A JSON value with every timing field left out, at any depth."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if not is_timing(k)}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def need(path, what):
    if not path.exists():
        pytest.skip(f"{what} is absent: {path} (the shared data lives at ../shared beside the repository)")
    return path


@pytest.fixture(scope="session")
def shared():
    return need(SHARED, "the shared data directory")


@pytest.fixture(scope="session")
def tinyllama(shared):
    return need(shared / "models" / "tinyllama", "the tinyllama model")


@pytest.fixture(scope="session")
def tinygpt2(shared):
    return need(shared / "models" / "tinygpt2", "the tinygpt2 model")


@pytest.fixture(scope="session")
def stories(shared):
    """The smallest model (V 512, d 64): a GGUF file with its tokenizer inside."""
    return need(shared / "models" / "stories260K" / "stories260K.gguf", "the stories260K model")


# The two small models most test files read, loaded once per test file.
@pytest.fixture(scope="module")
def stories_model(stories):
    import embedlab

    return embedlab.load(stories)


@pytest.fixture(scope="module")
def gpt2(tinygpt2):
    import embedlab

    return embedlab.load(tinygpt2)


@pytest.fixture(scope="session")
def heldout(shared):
    return need(shared / "data" / "tinystories-heldout.txt", "the held-out TinyStories text")


@pytest.fixture(scope="session")
def short_text(heldout, tmp_path_factory):
    """The held-out text's first ~4000 characters, cut at a line end, as a file."""
    text = heldout.read_text(encoding="utf-8")
    if len(text) > 4000:
        cut = text.rfind("\n", 0, 4000)
        text = text[: cut + 1 if cut > 0 else 4000]
    path = tmp_path_factory.mktemp("text") / "short.txt"
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path


@pytest.fixture(scope="session")
def cli():
    exe = BUILD / "cli" / "embedlab-cli"
    if not os.access(exe, os.X_OK):
        pytest.skip(f"the CLI is not built: {exe} (set EMBEDLAB_BUILD_DIR to the build directory)")
    return exe


@pytest.fixture(scope="session")
def run_cli(cli):
    """run_cli(*args) -> stdout of a successful embedlab-cli run; run_cli(*args, json=True) parses it."""

    def run(*args, parse_json=False, check=True):
        p = subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise AssertionError(f"embedlab-cli {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
        return json.loads(p.stdout) if parse_json else p

    return run


# safetensors, read independently of the engine: 8-byte little-endian header length,
# the JSON header, then the raw tensors.
SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
                      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8}


def read_safetensors(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = np.dtype(SAFETENSORS_DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(data[8 + n + begin : 8 + n + end], dtype=dtype).reshape(info["shape"])
    return out
