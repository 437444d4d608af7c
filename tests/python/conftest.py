"""Shared fixtures of the Python module's tests: where the repository, its build and the
shared data are, the CLI to compare against, and the few runs several tests read.

The build directory is $EMBEDLAB_BUILD_DIR (default <repo>/build); its python/ is put on
sys.path when `embedlab` is not importable otherwise. The shared data is ../shared beside
the repository; whatever needs it skips, with the reason, when it is absent.
"""

import importlib.util
import json
import os
import signal
import socket
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


def _heldout_prefix(heldout, tmp_path_factory, chars, name):
    """The held-out text's first ~`chars` characters, cut at a line end, as a file."""
    text = heldout.read_text(encoding="utf-8")
    if len(text) > chars:
        cut = text.rfind("\n", 0, chars)
        text = text[: cut + 1 if cut > 0 else chars]
    path = tmp_path_factory.mktemp("text") / name
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path


@pytest.fixture(scope="session")
def short_text(heldout, tmp_path_factory):
    """The held-out text's first ~4000 characters, cut at a line end, as a file."""
    return _heldout_prefix(heldout, tmp_path_factory, 4000, "short.txt")


@pytest.fixture(scope="session")
def brief_text(heldout, tmp_path_factory):
    """The held-out text's first ~1600 characters, cut at a line end, as a file: about 370
    tinygpt2 tokens, three windows of 128. For the files that evaluate tinygpt2 (V 50257) over
    and over, where the 4000 characters of short_text cost 2.5x the time and check the same."""
    return _heldout_prefix(heldout, tmp_path_factory, 1600, "brief.txt")


@pytest.fixture(scope="session")
def cli():
    exe = BUILD / "cli" / "embedlab-cli"
    if not os.access(exe, os.X_OK):
        pytest.skip(f"the CLI is not built: {exe} (set EMBEDLAB_BUILD_DIR to the build directory)")
    return exe


class CliForkServer:
    """embedlab-cli as a fork server (cli/fork_server.hpp, issue 58), the Python twin of
    tests/cli_fork_client.hpp: started on the first run, it has loaded libtorch once and forks
    a child per run, which does what an executed embedlab-cli does from main() on (a run whose
    environment differs from the server's is executed by it instead). A run costs the command's
    own CPU, not libtorch's 0.5 s start again. run() gives what subprocess.run gives, or None
    when no server can be had (the caller executes the program); EMBEDLAB_TEST_CLI_EXEC=1 asks
    for executed runs only. One run at a time."""

    VARIABLE = "EMBEDLAB_CLI_FORK_SERVER"  # cli/fork_protocol.hpp's kServerVariable

    @staticmethod
    def environment():
        """The runs' environment: this process's but pytest's PYTEST_CURRENT_TEST, which names each
        test (so no run would have the server's environment) and which the CLI does not read."""
        return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}

    def __init__(self, exe, scratch):
        self.exe, self.scratch = Path(exe), Path(scratch)
        self.process = self.socket = None
        self.broken = os.environ.get("EMBEDLAB_TEST_CLI_EXEC") == "1"

    def start(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**self.environment(), self.VARIABLE: str(theirs.fileno())}
        try:
            # Its own process group: a run past its timeout is killed with the server.
            self.process = subprocess.Popen([str(self.exe)], stdin=subprocess.DEVNULL, env=env,
                                            pass_fds=(theirs.fileno(),), start_new_session=True)
        except OSError:
            ours.close()
            return False
        finally:
            theirs.close()
        self.socket = ours
        return True

    @staticmethod
    def strings(words):
        """The wire format (cli/fork_protocol.hpp): a 4-byte count, then each string as a 4-byte
        length and its bytes."""
        out = [struct.pack("=I", len(words))]
        for w in words:
            b = os.fsencode(w)
            out += [struct.pack("=I", len(b)), b]
        return b"".join(out)

    def receive(self, size):
        data = b""
        while len(data) < size:
            chunk = self.socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the fork server closed its socket")
            data += chunk
        return data

    def run(self, argv, timeout):
        if self.broken:
            return None
        if self.process is None and not self.start():
            self.broken = True
            return None
        out, err = self.scratch / "stdout", self.scratch / "stderr"
        env = [f"{k}={v}" for k, v in self.environment().items()]
        request = [os.getcwd(), os.devnull, str(out), str(err), str(len(argv)), *argv, *env]
        self.socket.settimeout(timeout)
        try:
            self.socket.sendall(self.strings(request))
            # ForkedRun: wait status, max RSS, user and system microseconds, each an int64.
            status, _, _, _ = struct.unpack("=4q", self.receive(32))
        except socket.timeout:
            self.stop(kill=True)
            self.broken = True
            raise subprocess.TimeoutExpired(argv, timeout)
        except OSError as e:
            self.stop(kill=True)
            self.broken = True
            raise AssertionError(f"embedlab-cli's fork server stopped answering ({e}); "
                                 "the runs from here on are executed") from e
        if status < 0:
            self.broken = True
            raise AssertionError("embedlab-cli's fork server could not fork or wait for a run")
        code = os.waitstatus_to_exitcode(status)  # -N for signal N, as subprocess reports it
        # As subprocess.run(text=True) decodes: the locale's encoding, universal newlines.
        return subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())

    def stop(self, kill=False):
        if self.process is None:
            return
        if kill:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:  # the server and its runs are gone already
                pass
        self.socket.close()  # the end of the stream: the server ends
        self.process.wait(timeout=30)
        self.process = None


@pytest.fixture(scope="session")
def run_cli(cli, tmp_path_factory):
    """run_cli(*args) -> stdout of a successful embedlab-cli run; run_cli(*args, json=True) parses it.
    The runs go through a fork server (CliForkServer), as the C++ tests' do."""
    server = CliForkServer(cli, tmp_path_factory.mktemp("cli-fork-server"))

    def run(*args, parse_json=False, check=True):
        argv = [str(cli), *map(str, args)]
        p = server.run(argv, timeout=120)
        if p is None:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise AssertionError(f"embedlab-cli {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
        return json.loads(p.stdout) if parse_json else p

    yield run
    server.stop()


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
