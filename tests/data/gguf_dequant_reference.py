#!/usr/bin/env python3
"""Expected dequantised values from llama.cpp's gguf-py (quants.py), for
tests/gguf_quants_test.cpp. Usage:
  gguf_dequant_reference.py file MODEL.gguf OUT.json   first, second and last row of every tensor
  gguf_dequant_reference.py random OUT.json             random blocks of each block type
Values are float32, written with repr() so the C++ side can compare bit for bit."""
import json
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize


def rows_of(tensor):
    qtype = T(tensor.tensor_type)
    block, size = GGML_QUANT_SIZES[qtype]
    ne0 = int(tensor.shape[0])
    row_bytes = ne0 // block * size
    raw = np.asarray(tensor.data).view(np.uint8).reshape(-1)
    nrows = raw.size // row_bytes
    picks = sorted({0, min(1, nrows - 1), nrows - 1})
    out = []
    for r in picks:
        chunk = raw[r * row_bytes:(r + 1) * row_bytes]
        values = dequantize(chunk, qtype).astype(np.float32).reshape(-1)
        out.append({"row": r, "values": [float(v) for v in values]})
    return {"name": tensor.name, "type": int(qtype), "row_elems": ne0, "rows": out}


def from_file(path, out):
    reader = GGUFReader(path)
    tensors = [rows_of(t) for t in reader.tensors]
    json.dump({"tensors": tensors}, open(out, "w"))


def random_blocks(out):
    rng = np.random.default_rng(7)
    cases = []
    for qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K):
        block, size = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(4, size), dtype=np.uint8)
        # fp16 scales drawn as finite halves (K-quants: d, dmin first; Q6_K: d last)
        halves = rng.normal(0, 0.05, size=(4, 2)).astype(np.float16).view(np.uint8)
        if qtype == T.Q6_K:
            raw[:, size - 2:] = halves[:, :2]
        elif qtype in (T.Q4_1, T.Q5_1, T.Q4_K, T.Q5_K):
            raw[:, :4] = halves
        else:
            raw[:, :2] = halves[:, :2]
        values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        cases.append({"type": int(qtype), "name": qtype.name, "elems": 4 * block,
                      "bytes": raw.reshape(-1).tobytes().hex(), "values": [float(v) for v in values]})
    json.dump({"cases": cases}, open(out, "w"))


if __name__ == "__main__":
    if sys.argv[1] == "file":
        from_file(sys.argv[2], sys.argv[3])
    else:
        random_blocks(sys.argv[2])
