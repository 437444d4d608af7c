"""progress=True: what a call shows while the engine works.

A tqdm bar (tqdm.auto: a widget in a notebook with ipywidgets, text otherwise) when tqdm
is importable; otherwise one line on stderr, rewritten in place at most every half
second. The bar runs over the whole call (the engine's `overall`, 0 to 1); its label is
the stage ("eval original", "compress pca") and the stage's own done/total.
The module makes one Bar per call and closes it when the call ends, however it ends.
"""

import sys
import time

STEPS = 1000  # the bar's resolution: `overall` in thousandths


def _tqdm():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


class Bar:
    def __init__(self, call):
        self.call = call
        self.stage = None
        self.last_line = 0.0
        tqdm = _tqdm()
        self.bar = tqdm(total=STEPS, desc=call, dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]") if tqdm else None

    def __call__(self, stage, done, total, overall):
        counts = f" {done}/{total}" if total > 0 else ""
        if self.bar is not None:
            self.bar.set_description_str(f"{self.call} {stage}{counts}", refresh=False)
            self.bar.update(max(0, round(overall * STEPS) - self.bar.n))
        else:
            now = time.monotonic()
            if stage != self.stage or now - self.last_line >= 0.5 or overall >= 1:
                self.last_line = now
                sys.stderr.write(f"\r{self.call}: {stage}{counts} ({overall:.0%})\x1b[K")
                sys.stderr.flush()
        self.stage = stage
        return None

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.stage is not None:
            sys.stderr.write("\n")
            sys.stderr.flush()
