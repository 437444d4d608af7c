"""Stand-ins written to a temporary folder so llama.cpp's convert_hf_to_gguf.py runs offline on the
encoder fixtures (used by make_encoders.py convert). Kept apart so make_encoders.py stays readable.

- transformers: AutoConfig (config.json as parsed, id2label keys made int like PretrainedConfig) and an
  AutoTokenizer serving vocab.txt (.vocab, get_vocab(), the 5 specials as added tokens).
- tqdm: no-op.
- convert_wrapper.py: float8 dtype aliases for torch 1.13, and the one monkeypatch: get_vocab_base_pre
  returns "default" instead of hashing tokenizer.encode(chktxt) against known upstream vocabularies.
"""

STUB_TRANSFORMERS = '''"""Offline stand-in for `transformers`, just what llama.cpp's converter calls for BERT/DistilBERT.
AutoConfig: config.json as parsed (id2label keys made int, as PretrainedConfig does).
AutoTokenizer: a WordPiece vocab.txt served as .vocab / get_vocab(); the specials listed in
tokenizer_config.json's added_tokens_decoder are its added tokens (as BertTokenizer reports them)."""
import json as _json, os as _os
__version__ = "0.0.0-stub"
class _Cfg:
    def __init__(self, d): self._d = d
    def to_dict(self): return dict(self._d)
    def __getattr__(self, k):
        try: return self._d[k]
        except KeyError: raise AttributeError(k)
class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kw):
        with open(_os.path.join(str(path), "config.json"), "r", encoding="utf-8") as f:
            d = _json.load(f)
        if "id2label" in d:
            d["id2label"] = {int(k): v for k, v in d["id2label"].items()}
        return _Cfg(d)
class _Added:
    def __init__(self, d): self.content = d["content"]; self.special = d.get("special", False); self.normalized = d.get("normalized", False)
class _WordPiece:
    def __init__(self, path):
        with open(_os.path.join(path, "vocab.txt"), encoding="utf-8") as f:
            toks = f.read().split("\\n")[:-1]
        self.vocab = {t: i for i, t in enumerate(toks)}
        self.vocab_size = len(toks)
        cfg = {}
        p = _os.path.join(path, "tokenizer_config.json")
        if _os.path.exists(p):
            with open(p, encoding="utf-8") as f: cfg = _json.load(f)
        self.added_tokens_decoder = {int(k): _Added(v) for k, v in cfg.get("added_tokens_decoder", {}).items()}
    def get_vocab(self): return dict(self.vocab)
    def get_added_vocab(self): return {a.content: i for i, a in self.added_tokens_decoder.items()}
    def encode(self, text, add_special_tokens=True, **kw):
        # only called on added tokens (encode/decode round trip of un-normalized specials): they map to themselves
        if text in self.get_added_vocab(): return [self.vocab[text]]
        raise NotImplementedError("stub tokenizer: get_vocab_base_pre is patched instead")
    def decode(self, ids, **kw):
        inv = {i: t for t, i in self.vocab.items()}
        return " ".join(inv[i] for i in ids)
class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **kw): return _WordPiece(str(path))
'''

STUB_TQDM = '''"""No-op stand-in for tqdm."""
class tqdm:
    def __init__(self, iterable=None, *a, **kw): self.iterable = iterable
    def __iter__(self): return iter(self.iterable or [])
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def update(self, n=1): pass
    def set_description(self, *a, **kw): pass
    def set_postfix(self, *a, **kw): pass
    def write(self, *a, **kw): pass
    def close(self): pass
'''

STUB_CONVERT = '''"""usage: convert_wrapper.py LLAMA_CPP_DIR [convert_hf_to_gguf.py args...]"""
import os, runpy, sys
here = os.path.dirname(os.path.abspath(__file__))
lc = os.path.abspath(sys.argv[1])
sys.path[:0] = [here, os.path.join(lc, "gguf-py"), lc]
import torch
for _n in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, _n):
        setattr(torch, _n, torch.uint8)  # torch 1.13: only named in lookup tables
import conversion.base as _b
# The pre-tokenizer check hashes tokenizer.encode(chktxt) against known upstream vocabs; a fixture vocab
# can never match, and tokenizer.ggml.pre is only read for BPE vocabs (WPM ignores it): write "default".
_b.TextModel.get_vocab_base_pre = lambda self, tokenizer: "default"
sys.argv = [os.path.join(lc, "convert_hf_to_gguf.py")] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''
