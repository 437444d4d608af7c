#!/usr/bin/python3
"""Random-weight encoder fixtures (BERT, DistilBERT, sentence-transformers MiniLM) with a WordPiece vocab
built from GLUE dev texts, their GGUF conversions by llama.cpp's converter, and reference numbers.

Needs Debian's /usr/bin/python3 (torch 1.13, numpy); no transformers, safetensors or network.
Run from anywhere; everything is written next to this file (tests/data/encoders/).

  make_encoders.py vocab                      # tokenizers/{uncased,cased}/ (vocab.txt, tokenizer*.json, special_tokens_map.json)
  node tokenize_reference.mjs                 # wordpiece_expected.json (transformers.js; see README.md)
  make_encoders.py gen                        # bert-cls/ distilbert-cls/ distilbert-mlm/ minilm-st/ (HF directories)
  make_encoders.py convert --llama-cpp SRC    # <name>.gguf (F32) + minilm-st-q8_0.gguf (llama-quantize)
  make_encoders.py ref --embed BIN            # reference.json (PyTorch forward below + llama.cpp harness BIN)

The PyTorch forward (section "reference forward") is written from the equations of Hugging Face's
modeling_bert.py / modeling_distilbert.py and sentence-transformers' Pooling/Normalize, in float64.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPO = HERE.parents[2]
GLUE = REPO.parent / "shared" / "data" / "glue"  # the code sees shared data as ../shared
SEED = 42

# ----------------------------------------------------------------------------------------------
# WordPiece vocabulary

N_UNUSED = 10  # [PAD]=0, [unused0..9]=1..10, [UNK]=11, [CLS]=12, [SEP]=13, [MASK]=14 (bert-base order, fewer unused)
SPECIALS = ["[PAD]"] + [f"[unused{i}]" for i in range(N_UNUSED)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ADDED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # what BertTokenizer lists in added_tokens_decoder
VOCAB_SIZE = 2000
N_WORDS = 1150      # frequent whole words
N_PREFIX = 200      # frequent word-initial pieces of out-of-vocab words
MIN_CHAR_COUNT = 2  # characters seen once are left out, so a few GLUE words come out [UNK]


def glue_texts() -> list[str]:
    """SST-2 dev sentences, then STS-B dev sentence1/sentence2 (the texts the tokenizer tests use)."""
    out = []
    rows = (GLUE / "SST-2" / "dev.tsv").read_text(encoding="utf-8").split("\n")[1:]
    out += [r.split("\t")[0] for r in rows if r]
    rows = (GLUE / "STS-B" / "dev.tsv").read_text(encoding="utf-8").split("\n")[1:]
    for r in rows:
        if r:
            c = r.split("\t")
            out += [c[7], c[8]]
    return out


def _is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text: str, lower: bool) -> list[str]:
    """BERT's BasicTokenizer (clean, CJK split, lower + strip accents if lower, punctuation split).
    Only used to choose vocabulary entries; the expected ids come from transformers.js."""
    t = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            t.append(" ")
        elif _is_cjk(cp):
            t.append(f" {ch} ")
        else:
            t.append(ch)
    out = []
    for w in "".join(t).split():
        if lower:
            w = "".join(c for c in unicodedata.normalize("NFD", w.lower()) if unicodedata.category(c) != "Mn")
        cur = ""
        for c in w:
            if _is_punct(c):
                if cur:
                    out.append(cur)
                out.append(c)
                cur = ""
            else:
                cur += c
        if cur:
            out.append(cur)
    return out


def build_vocab(lower: bool) -> list[str]:
    words = collections.Counter()
    for t in glue_texts():
        words.update(basic_tokenize(t, lower))
    chars = collections.Counter()
    for w, n in words.items():
        for c in w:
            chars[c] += n
    kept = sorted(c for c, n in chars.items() if n >= MIN_CHAR_COUNT)
    keep = set(kept)
    vocab = list(SPECIALS) + kept
    seen = set(vocab)

    def ok(w):
        return all(c in keep for c in w)

    by_freq = sorted(((n, w) for w, n in words.items() if len(w) > 1 and n >= 2 and ok(w)), key=lambda x: (-x[0], x[1]))
    for _, w in by_freq[:N_WORDS]:
        if w not in seen:
            vocab.append(w)
            seen.add(w)
    oov = {w: n for w, n in words.items() if w not in seen and len(w) > 3 and ok(w)}
    pre = collections.Counter()
    suf = collections.Counter()
    for w, n in oov.items():
        for L in range(2, min(6, len(w) - 1) + 1):
            pre[w[:L]] += n
        for i in range(1, len(w) - 1):
            for L in range(2, min(5, len(w) - i) + 1):
                suf[w[i:i + L]] += n
    for p, _ in sorted(pre.items(), key=lambda x: (-x[1], x[0]))[:N_PREFIX]:
        if p not in seen:
            vocab.append(p)
            seen.add(p)
    vocab += ["##" + c for c in kept]
    seen.update("##" + c for c in kept)
    for s, _ in sorted(suf.items(), key=lambda x: (-x[1], x[0])):
        if len(vocab) >= VOCAB_SIZE:
            break
        if "##" + s not in seen:
            vocab.append("##" + s)
            seen.add("##" + s)
    return vocab


def tokenizer_json(vocab: list[str], lower: bool) -> dict:
    """tokenizer.json as tokenizers' BertTokenizerFast.save_pretrained writes it."""
    ids = {t: i for i, t in enumerate(vocab)}
    added = [{"id": ids[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in ADDED]
    cls, sep = ids["[CLS]"], ids["[SEP]"]
    tok = lambda k, t: {"SpecialToken": {"id": k, "type_id": t}}  # noqa: E731
    seq = lambda k, t: {"Sequence": {"id": k, "type_id": t}}  # noqa: E731
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": lower},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0)],
            "pair": [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0), seq("B", 1), tok("[SEP]", 1)],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [sep], "tokens": ["[SEP]"]}},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }


def tokenizer_config(vocab: list[str], lower: bool) -> dict:
    """tokenizer_config.json as BertTokenizer(Fast).save_pretrained writes it (transformers 4.4x)."""
    ids = {t: i for i, t in enumerate(vocab)}
    return {
        "added_tokens_decoder": {str(ids[t]): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                               "single_word": False, "special": True} for t in ADDED},
        "clean_up_tokenization_spaces": True,
        "cls_token": "[CLS]",
        "do_basic_tokenize": True,
        "do_lower_case": lower,
        "extra_special_tokens": {},
        "mask_token": "[MASK]",
        "model_max_length": 128,
        "never_split": None,
        "pad_token": "[PAD]",
        "sep_token": "[SEP]",
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "tokenizer_class": "BertTokenizer",
        "unk_token": "[UNK]",
    }


SPECIAL_MAP = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]", "unk_token": "[UNK]"}


def write_json(path: Path, obj, indent=2):
    path.write_text(json.dumps(obj, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")


def write_tokenizer(d: Path, vocab: list[str], lower: bool):
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    write_json(d / "tokenizer.json", tokenizer_json(vocab, lower))
    write_json(d / "tokenizer_config.json", tokenizer_config(vocab, lower))
    write_json(d / "special_tokens_map.json", SPECIAL_MAP)


def cmd_vocab(args):
    for name, lower in (("uncased", True), ("cased", False)):
        v = build_vocab(lower)
        assert len(v) == len(set(v)), "duplicate vocab entry"
        write_tokenizer(HERE / "tokenizers" / name, v, lower)
        print(f"vocab {name}: {len(v)} entries -> tokenizers/{name}/")


def load_vocab(name="uncased") -> list[str]:
    return (HERE / "tokenizers" / name / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]


# ----------------------------------------------------------------------------------------------
# minimal safetensors writer (F32), header keys sorted like safetensors does

def save_safetensors(tensors: dict[str, torch.Tensor], path: Path):
    header = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name in sorted(tensors):
        raw = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(data[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(v["shape"])
    return out


# ----------------------------------------------------------------------------------------------
# random-weight HF directories

H, L, NH, FF, MAXPOS = 64, 2, 4, 128, 128
TF_VERSION = "4.46.3"  # the transformers version whose save_pretrained layout config.json imitates
LABELS = {"0": "negative", "1": "positive"}
FIXTURES = {
    "bert-cls": "BertForSequenceClassification: bert.* body + pooler (tanh) + classifier, 2 labels",
    "distilbert-cls": "DistilBertForSequenceClassification: no token types, pre_classifier + ReLU + classifier on h[0]",
    "distilbert-mlm": "DistilBertForMaskedLM: vocab_transform + GELU + vocab_layer_norm + vocab_projector (tied to word embeddings, own bias)",
    "minilm-st": "sentence-transformers: BertModel body (no prefix, with pooler), mean pooling, Normalize",
}


class Gen:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def mat(self, *shape):  # matrices and embeddings N(0, 0.2)
        return torch.randn(*shape, generator=self.g) * 0.2

    def bias(self, n):  # biases (LayerNorm biases too) N(0, 0.1)
        return torch.randn(n, generator=self.g) * 0.1

    def norm(self, n):  # LayerNorm weights U[0.5, 1.5]
        return 0.5 + torch.rand(n, generator=self.g)


def bert_tensors(g: Gen, V: int, prefix: str, pooler=True) -> dict:
    t = {}
    p = prefix + "embeddings."
    t[p + "word_embeddings.weight"] = g.mat(V, H)
    t[p + "position_embeddings.weight"] = g.mat(MAXPOS, H)
    t[p + "token_type_embeddings.weight"] = g.mat(2, H)
    t[p + "LayerNorm.weight"] = g.norm(H)
    t[p + "LayerNorm.bias"] = g.bias(H)
    for i in range(L):
        p = f"{prefix}encoder.layer.{i}."
        for n in ("query", "key", "value"):
            t[p + f"attention.self.{n}.weight"] = g.mat(H, H)
            t[p + f"attention.self.{n}.bias"] = g.bias(H)
        t[p + "attention.output.dense.weight"] = g.mat(H, H)
        t[p + "attention.output.dense.bias"] = g.bias(H)
        t[p + "attention.output.LayerNorm.weight"] = g.norm(H)
        t[p + "attention.output.LayerNorm.bias"] = g.bias(H)
        t[p + "intermediate.dense.weight"] = g.mat(FF, H)
        t[p + "intermediate.dense.bias"] = g.bias(FF)
        t[p + "output.dense.weight"] = g.mat(H, FF)
        t[p + "output.dense.bias"] = g.bias(H)
        t[p + "output.LayerNorm.weight"] = g.norm(H)
        t[p + "output.LayerNorm.bias"] = g.bias(H)
    if pooler:
        t[prefix + "pooler.dense.weight"] = g.mat(H, H)
        t[prefix + "pooler.dense.bias"] = g.bias(H)
    return t


def distilbert_tensors(g: Gen, V: int) -> dict:
    t = {}
    p = "distilbert.embeddings."
    t[p + "word_embeddings.weight"] = g.mat(V, H)
    t[p + "position_embeddings.weight"] = g.mat(MAXPOS, H)
    t[p + "LayerNorm.weight"] = g.norm(H)
    t[p + "LayerNorm.bias"] = g.bias(H)
    for i in range(L):
        p = f"distilbert.transformer.layer.{i}."
        for n in ("q_lin", "k_lin", "v_lin", "out_lin"):
            t[p + f"attention.{n}.weight"] = g.mat(H, H)
            t[p + f"attention.{n}.bias"] = g.bias(H)
        t[p + "sa_layer_norm.weight"] = g.norm(H)
        t[p + "sa_layer_norm.bias"] = g.bias(H)
        t[p + "ffn.lin1.weight"] = g.mat(FF, H)
        t[p + "ffn.lin1.bias"] = g.bias(FF)
        t[p + "ffn.lin2.weight"] = g.mat(H, FF)
        t[p + "ffn.lin2.bias"] = g.bias(H)
        t[p + "output_layer_norm.weight"] = g.norm(H)
        t[p + "output_layer_norm.bias"] = g.bias(H)
    return t


def bert_config(V, arch, labels: bool) -> dict:
    c = {"architectures": [arch], "attention_probs_dropout_prob": 0.1, "classifier_dropout": None,
         "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": H, "initializer_range": 0.02,
         "intermediate_size": FF, "layer_norm_eps": 1e-12, "max_position_embeddings": MAXPOS, "model_type": "bert",
         "num_attention_heads": NH, "num_hidden_layers": L, "pad_token_id": 0, "position_embedding_type": "absolute",
         "torch_dtype": "float32", "transformers_version": TF_VERSION, "type_vocab_size": 2, "use_cache": True,
         "vocab_size": V}
    if labels:
        c["id2label"] = dict(LABELS)
        c["label2id"] = {v: int(k) for k, v in LABELS.items()}
    return dict(sorted(c.items()))


def distilbert_config(V, arch, labels: bool) -> dict:
    c = {"activation": "gelu", "architectures": [arch], "attention_dropout": 0.1, "dim": H, "dropout": 0.1,
         "hidden_dim": FF, "initializer_range": 0.02, "max_position_embeddings": MAXPOS, "model_type": "distilbert",
         "n_heads": NH, "n_layers": L, "pad_token_id": 0, "qa_dropout": 0.1, "seq_classif_dropout": 0.2,
         "sinusoidal_pos_embds": False, "tie_weights_": True, "torch_dtype": "float32",
         "transformers_version": TF_VERSION, "vocab_size": V}
    if labels:
        c["id2label"] = dict(LABELS)
        c["label2id"] = {v: int(k) for k, v in LABELS.items()}
    return dict(sorted(c.items()))


def make_fixture(name: str, V: int):
    g = Gen(SEED * 100 + list(FIXTURES).index(name))
    if name == "bert-cls":
        t = bert_tensors(g, V, "bert.")
        t["classifier.weight"] = g.mat(2, H)
        t["classifier.bias"] = g.bias(2)
        return bert_config(V, "BertForSequenceClassification", True), t
    if name == "minilm-st":
        return bert_config(V, "BertModel", False), bert_tensors(g, V, "")
    t = distilbert_tensors(g, V)
    if name == "distilbert-cls":
        t["pre_classifier.weight"] = g.mat(H, H)
        t["pre_classifier.bias"] = g.bias(H)
        t["classifier.weight"] = g.mat(2, H)
        t["classifier.bias"] = g.bias(2)
        return distilbert_config(V, "DistilBertForSequenceClassification", True), t
    # MLM: vocab_projector.weight is tied to the word embeddings, so save_pretrained leaves it out
    t["vocab_transform.weight"] = g.mat(H, H)
    t["vocab_transform.bias"] = g.bias(H)
    t["vocab_layer_norm.weight"] = g.norm(H)
    t["vocab_layer_norm.bias"] = g.bias(H)
    t["vocab_projector.bias"] = g.bias(V)
    return distilbert_config(V, "DistilBertForMaskedLM", False), t


def cmd_gen(args):
    V = len(load_vocab())
    for name in FIXTURES:
        cfg, t = make_fixture(name, V)
        d = HERE / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir()
        write_json(d / "config.json", cfg)
        save_safetensors(t, d / "model.safetensors")
        for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            shutil.copy(HERE / "tokenizers" / "uncased" / f, d / f)
        if name == "minilm-st":
            write_json(d / "modules.json", [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
            (d / "1_Pooling").mkdir()
            write_json(d / "1_Pooling" / "config.json", {
                "word_embedding_dimension": H, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True})
            write_json(d / "sentence_bert_config.json", {"max_seq_length": 128, "do_lower_case": False})
            write_json(d / "config_sentence_transformers.json", {
                "__version__": {"sentence_transformers": "3.2.1", "transformers": TF_VERSION, "pytorch": "2.5.1"},
                "prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"})
        print(f"gen {name}: {sum(v.numel() for v in t.values())} params, {len(t)} tensors")


# ----------------------------------------------------------------------------------------------
# GGUF conversion with llama.cpp's convert_hf_to_gguf.py (offline)

from convert_stubs import STUB_CONVERT, STUB_TQDM, STUB_TRANSFORMERS  # noqa: E402

CONVERT = ["bert-cls", "distilbert-cls", "distilbert-mlm", "minilm-st"]
COMMITTED_GGUF = ("minilm-st",)  # the other F32 GGUFs go to --scratch (size budget of this directory, ~6 MB)


def gguf_path(name: str, args) -> Path:
    return (HERE if name in COMMITTED_GGUF else Path(args.scratch)) / f"{name}.gguf"


def cmd_convert(args):
    stub = Path(tempfile.mkdtemp(prefix="enc-stub-"))
    (stub / "transformers").mkdir()
    (stub / "transformers" / "__init__.py").write_text(STUB_TRANSFORMERS)
    (stub / "tqdm").mkdir()
    (stub / "tqdm" / "__init__.py").write_text(STUB_TQDM)
    (stub / "convert_wrapper.py").write_text(STUB_CONVERT)
    log = {}
    try:
        for name in CONVERT:
            out = gguf_path(name, args)
            out.parent.mkdir(parents=True, exist_ok=True)
            r = subprocess.run([sys.executable, str(stub / "convert_wrapper.py"), args.llama_cpp, str(HERE / name),
                                "--outtype", "f32", "--outfile", str(out)], capture_output=True, text=True)
            ok = r.returncode == 0
            log[name] = "ok" if ok else (r.stderr.strip().splitlines() or ["?"])[-1]
            print(f"convert {name}: {log[name]}")
            if not ok:
                sys.stderr.write(r.stderr[-3000:])
                out.unlink(missing_ok=True)
    finally:
        shutil.rmtree(stub)
    q = Path(args.quantize)
    if (HERE / "minilm-st.gguf").exists():
        r = subprocess.run([str(q), str(HERE / "minilm-st.gguf"), str(HERE / "minilm-st-q8_0.gguf"), "Q8_0", "2"],
                           capture_output=True, text=True, env={**os.environ, "LD_LIBRARY_PATH": args.lib_dir})
        print("quantize minilm-st Q8_0:", "ok" if r.returncode == 0 else r.stderr[-2000:])


# ----------------------------------------------------------------------------------------------
# reference forward (float64), from the Hugging Face modelling equations

DT = torch.float64


def gelu_erf(x):  # ACT2FN["gelu"]
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_ggml(x):  # what llama.cpp's CPU backend does for GGML_OP_GELU: tanh form on an fp16-rounded input, fp16 table
    xf = x.to(torch.float16).to(torch.float32)
    y = 0.5 * xf * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * xf * (1.0 + 0.044715 * xf * xf)))
    y = torch.where(xf <= -10, torch.zeros_like(y), torch.where(xf >= 10, x.to(torch.float32), y.to(torch.float16).to(torch.float32)))
    return y.to(x.dtype)


def layer_norm(x, w, b, eps=1e-12):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def linear(x, W, b):
    return x @ W.T + b


def attention(h, mask, Wq, bq, Wk, bk, Wv, bv, Wo, bo):
    """BertSelfAttention + output projection; mask [B,T] 1/0 -> additive (1-mask)*finfo.min."""
    B, T, _ = h.shape
    dh = H // NH
    split = lambda x: x.view(B, T, NH, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(linear(h, Wq, bq)), split(linear(h, Wk, bk)), split(linear(h, Wv, bv))
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    s = s + ((1.0 - mask.to(DT)) * torch.finfo(DT).min)[:, None, None, :]
    ctx = torch.softmax(s, -1) @ v
    return linear(ctx.transpose(1, 2).reshape(B, T, H), Wo, bo)


def bert_body(w, p, ids, tt, mask, act):
    T = ids.shape[1]
    e = w[p + "embeddings.word_embeddings.weight"][ids] + w[p + "embeddings.position_embeddings.weight"][:T][None] \
        + w[p + "embeddings.token_type_embeddings.weight"][tt]
    h = layer_norm(e, w[p + "embeddings.LayerNorm.weight"], w[p + "embeddings.LayerNorm.bias"])
    for i in range(L):
        q = f"{p}encoder.layer.{i}."
        a = attention(h, mask, *(w[q + f"attention.self.{n}.{x}"] for n in ("query", "key", "value") for x in ("weight", "bias")),
                      w[q + "attention.output.dense.weight"], w[q + "attention.output.dense.bias"])
        h = layer_norm(a + h, w[q + "attention.output.LayerNorm.weight"], w[q + "attention.output.LayerNorm.bias"])
        f = act(linear(h, w[q + "intermediate.dense.weight"], w[q + "intermediate.dense.bias"]))
        h = layer_norm(linear(f, w[q + "output.dense.weight"], w[q + "output.dense.bias"]) + h,
                       w[q + "output.LayerNorm.weight"], w[q + "output.LayerNorm.bias"])
    return h


def distilbert_body(w, ids, mask, act):
    p = "distilbert."
    T = ids.shape[1]
    e = w[p + "embeddings.word_embeddings.weight"][ids] + w[p + "embeddings.position_embeddings.weight"][:T][None]
    h = layer_norm(e, w[p + "embeddings.LayerNorm.weight"], w[p + "embeddings.LayerNorm.bias"])
    for i in range(L):
        q = f"{p}transformer.layer.{i}."
        a = attention(h, mask, *(w[q + f"attention.{n}_lin.{x}"] for n in ("q", "k", "v", "out") for x in ("weight", "bias")))
        h = layer_norm(a + h, w[q + "sa_layer_norm.weight"], w[q + "sa_layer_norm.bias"])
        f = linear(act(linear(h, w[q + "ffn.lin1.weight"], w[q + "ffn.lin1.bias"])), w[q + "ffn.lin2.weight"], w[q + "ffn.lin2.bias"])
        h = layer_norm(f + h, w[q + "output_layer_norm.weight"], w[q + "output_layer_norm.bias"])
    return h


def forward(name, w, ids, tt, mask, act=gelu_erf) -> dict:
    """ids/tt/mask [B,T] -> dict of float64 tensors (batch kept)."""
    out = {}
    m = mask.to(DT)
    if name in ("bert-cls", "minilm-st"):
        p = "bert." if name == "bert-cls" else ""
        h = bert_body(w, p, ids, tt, mask, act)
        out["hidden"] = h
        pooler = torch.tanh(linear(h[:, 0], w[p + "pooler.dense.weight"], w[p + "pooler.dense.bias"]))
        out["pooler_output"] = pooler
        if name == "bert-cls":
            out["pooled"] = h[:, 0]
            out["logits"] = linear(pooler, w["classifier.weight"], w["classifier.bias"])
        else:
            mean = (h * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1e-9)
            out["mean"] = mean
            out["pooled"] = torch.nn.functional.normalize(mean, p=2, dim=1)
    else:
        h = distilbert_body(w, ids, mask, act)
        out["hidden"] = h
        out["pooled"] = h[:, 0]
        if name == "distilbert-cls":
            x = torch.relu(linear(h[:, 0], w["pre_classifier.weight"], w["pre_classifier.bias"]))
            out["pre_classifier"] = x
            out["logits"] = linear(x, w["classifier.weight"], w["classifier.bias"])
        else:
            x = act(linear(h, w["vocab_transform.weight"], w["vocab_transform.bias"]))
            x = layer_norm(x, w["vocab_layer_norm.weight"], w["vocab_layer_norm.bias"])
            out["mlm_logits"] = linear(x, w["distilbert.embeddings.word_embeddings.weight"], w["vocab_projector.bias"])
    if name != "minilm-st":
        out["mean"] = (h * m[..., None]).sum(1) / m.sum(1, keepdim=True)
    return out


# ----------------------------------------------------------------------------------------------
# reference.json

def r9(x):
    if isinstance(x, torch.Tensor):
        x = x.tolist()
    if isinstance(x, list):
        return [r9(v) for v in x]
    return float(f"{x:.9g}")


def rel(a, b) -> float:
    a, b = torch.as_tensor(a, dtype=DT), torch.as_tensor(b, dtype=DT)
    return float((a - b).abs().max() / b.abs().max())


def torch_entry(name, res, i, T) -> dict:
    """One input's torch numbers (row i of a batch, first T positions)."""
    e = {"hidden": r9(res["hidden"][i, :T]), "pooled": r9(res["pooled"][i])}
    if "mean" in res:
        e["mean"] = r9(res["mean"][i])
    if "pooler_output" in res:
        e["pooler_output"] = r9(res["pooler_output"][i])
    if "pre_classifier" in res:
        e["pre_classifier"] = r9(res["pre_classifier"][i])
    if "logits" in res:
        e["logits"] = r9(res["logits"][i])
    if "mlm_logits" in res:
        lg = res["mlm_logits"][i, :T]
        e["mlm"] = {"first16": r9(lg[:, :16]), "logsumexp": r9(torch.logsumexp(lg, -1)),
                    "argmax": [int(v) for v in lg.argmax(-1)], "max": r9(lg.max(-1).values)}
    return e


def pick_inputs(wp: dict) -> list[dict]:
    """4 GLUE dev sentences (short, ~40 tokens, one with [UNK], one STS-B) + the 2-token [CLS] [SEP]."""
    u = wp["variants"]["uncased"]
    unk, cls, sep = u["unk_id"], u["cls_id"], u["sep_id"]
    sst, sts = u["glue"]["sst2_dev"], u["glue"]["stsb_dev_sentence1"]
    first = lambda ids, ok: next(i for i, x in enumerate(ids) if ok(x))  # noqa: E731
    picks = [
        ("short", sst, first(sst["ids"], lambda x: 6 <= len(x) <= 9 and unk not in x)),
        ("long", sst, first(sst["ids"], lambda x: 38 <= len(x) <= 42 and unk not in x)),
        ("unk", sst, first(sst["ids"], lambda x: unk in x and len(x) <= 40)),
        ("stsb", sts, first(sts["ids"], lambda x: 10 <= len(x) <= 16 and unk not in x)),
    ]
    out = [{"name": n, "source": {"file": src["file"], "row": r, "column": src["column"]}, "text": src_text(src, r),
            "ids": [cls] + src["ids"][r] + [sep]} for n, src, r in picks]
    out.append({"name": "empty", "source": None, "text": "", "ids": [cls, sep]})
    return out


def src_text(src, row) -> str:
    rows = (GLUE / src["file"]).read_text(encoding="utf-8").split("\n")[1:]
    return rows[row].split("\t")[src["col_index"]]


def run_embed(binary, gguf: Path, inputs: list[list[int]], threads: int, fa: str = "0") -> dict:
    """fa "0": flash attention off (the stored numbers); "auto": llama.cpp's default, which on CPU runs
    attention with F16 K/V and costs ~2e-3 relative (reported as agreement only)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for ids in inputs:
            f.write(" ".join(map(str, ids)) + "\n")
    try:
        env = {k: v for k, v in os.environ.items() if k != "LLAMA_EMBED_FA"}
        if fa != "auto":
            env["LLAMA_EMBED_FA"] = fa
        r = subprocess.run([str(binary), str(gguf), f.name, "all", str(threads)], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-2000:])
        return json.loads(r.stdout)
    finally:
        os.unlink(f.name)


def tokenizer_agreement(binary, gguf: Path, wp: dict) -> dict:
    """llama.cpp's own WPM tokenizer (llama_tokenize, add_special) vs transformers.js + [CLS]/[SEP]."""
    u = wp["variants"]["uncased"]
    items = [(k, i, None) for k, gl in u["glue"].items() for i in range(gl["rows"])]
    items += [("tricky", i, t["name"]) for i, t in enumerate(u["tricky"])]
    texts, want = [], []
    for k, i, _ in items:
        if k == "tricky":
            texts.append(u["tricky"][i]["text"])
            want.append([u["cls_id"]] + u["tricky"][i]["ids"] + [u["sep_id"]])
        else:
            texts.append(src_text(u["glue"][k], i))
            want.append([u["cls_id"]] + u["glue"][k]["ids"][i] + [u["sep_id"]])
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
    try:
        r = subprocess.run([str(binary), str(gguf), "--tokenize", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    got = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(got) == len(texts), r.stderr[-2000:]
    out = {"gguf": gguf.name, "call": "llama_tokenize(add_special=true, parse_special=false)",
           "glue_total": 0, "glue_agree": 0, "glue_differ": [], "tricky_total": 0, "tricky_agree": 0, "tricky_differ": []}
    for (k, i, nm), g, w in zip(items, got, want):
        grp = "tricky" if k == "tricky" else "glue"
        out[grp + "_total"] += 1
        if g == w:
            out[grp + "_agree"] += 1
        else:
            out[grp + "_differ"].append({"source": k, "row": i, **({"name": nm} if nm else {}), "llamacpp": g, "transformers_js": w})
    return out


def dump_compact(obj, path: Path):
    """JSON with one line per leaf array (numbers), indented objects: small and still diffable."""
    def enc(o, ind):
        pad = " " * ind
        if isinstance(o, dict):
            if not o:
                return "{}"
            items = [f'{pad} {json.dumps(k)}: {enc(v, ind + 1)}' for k, v in o.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(o, list) and o and isinstance(o[0], (dict, list)) and not _is_matrix(o):
            return "[\n" + ",\n".join(pad + " " + enc(v, ind + 1) for v in o) + "\n" + pad + "]"
        return json.dumps(o, ensure_ascii=False, separators=(",", ":"))
    path.write_text(enc(obj, 0) + "\n", encoding="utf-8")


def _is_matrix(o):
    return all(isinstance(r, list) and all(isinstance(v, (int, float)) for v in r) for r in o)


def cmd_ref(args):
    wp = json.loads((HERE / "wordpiece_expected.json").read_text(encoding="utf-8"))
    u = wp["variants"]["uncased"]
    pad_id, cls, sep = u["pad_id"], u["cls_id"], u["sep_id"]
    inputs = pick_inputs(wp)
    pair = u["pair"]
    b0, b1 = inputs[0]["ids"], inputs[3]["ids"]
    Tb = max(len(b0), len(b1))
    batch = {"input_ids": [b + [pad_id] * (Tb - len(b)) for b in (b0, b1)],
             "attention_mask": [[1] * len(b) + [0] * (Tb - len(b)) for b in (b0, b1)],
             "token_type_ids": [[0] * Tb, [0] * Tb], "lengths": [len(b0), len(b1)],
             "from_inputs": [inputs[0]["name"], inputs[3]["name"]]}
    commit = subprocess.run(["git", "-C", args.llama_cpp, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() \
        if args.llama_cpp else ""
    ref = {"meta": {
        "llama_cpp_commit": commit or "de3ff815ea7d559ee917f063901b8986f038abc6", "threads": args.threads,
        "llama_cpp_flash_attn": "disabled (LLAMA_EMBED_FA=0)",
        "torch": torch.__version__, "torch_dtype": "float64", "seed": SEED,
        "transformers_js": wp["meta"]["transformers_js"],
        "notes": "hidden = final layer output per token, un-normalised; rel = max|a-b|/max|b| per tensor"},
        "inputs": inputs, "pair": {k: pair[k] for k in ("text", "text_pair", "input_ids", "token_type_ids")},
        "batch": batch, "fixtures": {}}
    summary = []
    for name in FIXTURES:
        w = {k: v.to(DT) for k, v in load_safetensors(HERE / name / "model.safetensors").items()}
        cfg = json.loads((HERE / name / "config.json").read_text())
        fx = {"hf_dir": name, "architecture": cfg["architectures"][0], "what": FIXTURES[name],
              "gguf": f"{name}.gguf", "gguf_committed": name in COMMITTED_GGUF, "inputs": []}
        g = gguf_path(name, args)
        lc = run_embed(args.embed, g, [x["ids"] for x in inputs], args.threads) if g.exists() else None
        lc_auto = run_embed(args.embed, g, [x["ids"] for x in inputs], args.threads, "auto") if g.exists() else None
        agree = {"hidden": 0.0, "mean": 0.0, "cls": 0.0, "hidden_vs_ggml_gelu_torch": 0.0, "hidden_flash_attn_auto": 0.0}
        for k, x in enumerate(inputs):
            ids = torch.tensor([x["ids"]])
            ones = torch.ones_like(ids)
            res = forward(name, w, ids, torch.zeros_like(ids), ones)
            e = {"name": x["name"], "ids": x["ids"], "torch": torch_entry(name, res, 0, len(x["ids"]))}
            if lc:
                li = lc["inputs"][k]
                assert li["ids"] == x["ids"]
                e["llamacpp"] = {"hidden": li["hidden"], "mean": li["mean"], "cls": li["cls"]}
                if "rank" in li and "ForSequenceClassification" in fx["architecture"]:
                    # llama.cpp's RANK head: no BERT pooler (the converter drops it), tanh after DistilBERT's
                    # pre_classifier (HF: ReLU): so it is NOT the HF logits; kept to document the difference
                    e["llamacpp"]["rank"] = li["rank"]
                agree["hidden"] = max(agree["hidden"], rel(li["hidden"], res["hidden"][0]))
                agree["mean"] = max(agree["mean"], rel(li["mean"], res["mean"][0]))
                agree["cls"] = max(agree["cls"], rel(li["cls"], res["hidden"][0, 0]))
                emu = forward(name, w, ids, torch.zeros_like(ids), ones, act=gelu_ggml)
                agree["hidden_vs_ggml_gelu_torch"] = max(agree["hidden_vs_ggml_gelu_torch"], rel(li["hidden"], emu["hidden"][0]))
                agree["hidden_flash_attn_auto"] = max(agree["hidden_flash_attn_auto"],
                                                      rel(lc_auto["inputs"][k]["hidden"], res["hidden"][0]))
            fx["inputs"].append(e)
        # sentence pair (segment ids 0/1) and padded batch: torch only (llama.cpp hard-codes token type 0)
        pids = torch.tensor([pair["input_ids"]])
        res = forward(name, w, pids, torch.tensor([pair["token_type_ids"]]), torch.ones_like(pids))
        fx["pair"] = {"torch": torch_entry(name, res, 0, pids.shape[1])}
        bi = torch.tensor(batch["input_ids"])
        res = forward(name, w, bi, torch.tensor(batch["token_type_ids"]), torch.tensor(batch["attention_mask"]))
        fx["batch"] = {"torch": [torch_entry(name, res, i, Tb) for i in range(2)]}
        # the batch rows at their real length must equal the single-input numbers (masking check)
        for i, src in ((0, 0), (1, 3)):
            single = forward(name, w, torch.tensor([inputs[src]["ids"]]), torch.zeros(1, len(inputs[src]["ids"]), dtype=torch.long),
                             torch.ones(1, len(inputs[src]["ids"]), dtype=torch.long))
            n = len(inputs[src]["ids"])
            assert rel(res["hidden"][i, :n], single["hidden"][0]) < 1e-12 and rel(res["pooled"][i], single["pooled"][0]) < 1e-12
        if lc:
            fx["agreement_llamacpp_vs_torch"] = {k: float(f"{v:.3g}") for k, v in agree.items()}
        ref["fixtures"][name] = fx
        summary.append(f"{name}: " + (", ".join(f"{k} {v:.2e}" for k, v in agree.items()) if lc else "torch only"))
    g = gguf_path("minilm-st", args)
    if g.exists():
        ref["llamacpp_tokenizer"] = tokenizer_agreement(args.embed, g, wp)
        t = ref["llamacpp_tokenizer"]
        summary.append(f"llama.cpp tokenizer vs transformers.js (uncased): glue {t['glue_agree']}/{t['glue_total']}, "
                       f"tricky {t['tricky_agree']}/{t['tricky_total']}")
    dump_compact(ref, HERE / "reference.json")
    print("\n".join(summary))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["vocab", "gen", "convert", "ref"])
    ap.add_argument("--llama-cpp", default="/work/llama-src", help="llama.cpp source tree (convert_hf_to_gguf.py, gguf-py)")
    ap.add_argument("--quantize", default=str(REPO.parent / "shared" / "tools" / "llama.cpp" / "llama-quantize"))
    ap.add_argument("--embed", default="/work/llama-embed/llamacpp-embed", help="llamacpp_embed.cpp built")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--scratch", default="/work/llama-embed/gguf", help="where the uncommitted DistilBERT GGUFs go")
    ap.add_argument("--lib-dir", default="/work/llama-embed/lib",
                    help="LD_LIBRARY_PATH for llama-quantize (real soname links to the prebuilt libraries)")
    args = ap.parse_args()
    {"vocab": cmd_vocab, "gen": cmd_gen, "convert": cmd_convert, "ref": cmd_ref}[args.cmd](args)


if __name__ == "__main__":
    main()
