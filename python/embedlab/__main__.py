"""python3 -m embedlab: the version and where everything was loaded from, for a bug report.

    embedlab 0.1.0
    module    .../build/python/embedlab/_embedlab.cpython-311-x86_64-linux-gnu.so
    ...
"""

import sys

import embedlab
from embedlab import _build, _embedlab


def main():
    info = embedlab._runtime()
    rows = [
        ("module", _embedlab.__file__),
        ("package", embedlab.__file__),
        ("python", f"{sys.executable} {sys.version.split()[0]}"),
        ("built for", _build.PYTHON),
        ("numpy", f"{embedlab._numpy.__version__} {embedlab._numpy.__file__}"),
        ("libtorch", info["libtorch"] or "unknown"),
        ("threads", f"{info['threads']} (EMBEDLAB_THREADS={info['EMBEDLAB_THREADS'] or 'unset: every core'})"),
    ]
    print(f"embedlab {embedlab.__version__}")
    for name, value in rows:
        print(f"{name:<10} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
