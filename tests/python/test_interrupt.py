"""Ctrl-C (SIGINT) while the engine works: the engine stops at its next progress report
and the call raises KeyboardInterrupt, as a notebook's interrupt button expects. The
module checks for it at every report, with or without a progress callable; the callable
here only makes the interrupt arrive at a known point (a timer would race the work)."""

import _thread
from pathlib import Path

import pytest

embedlab = pytest.importorskip("embedlab", reason="the embedlab module is not built (build/python)")

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
TEXT = SHARED / "data" / "tinystories-heldout.txt"
MODEL = SHARED / "models" / "tinyllama"


def needs_shared():
    if not MODEL.is_dir() or not TEXT.is_file():
        pytest.skip(f"needs {MODEL} and {TEXT} (../shared)")


def interrupt_once():
    reports = []

    def progress(stage, done, total, overall):
        reports.append((stage, done, total))
        if len(reports) == 1:
            _thread.interrupt_main()  # what Ctrl-C or a notebook's interrupt does
        return True

    return progress, reports


def test_ctrl_c_stops_a_perplexity_with_keyboard_interrupt():
    needs_shared()
    model = embedlab.load(str(MODEL))
    progress, reports = interrupt_once()
    with pytest.raises(KeyboardInterrupt):
        model.perplexity(text=TEXT.read_text()[:40000], ctx=64, batch=1, progress=progress)
    assert len(reports) == 1  # stopped at the report after the interrupt: no further windows
    # The model is still usable afterwards.
    assert model.perplexity(text="Once upon a time there was a cat.")["tokens"] > 0
