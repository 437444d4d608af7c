"""Run.to_torch(): a run's compressed token table as a torch.nn.Module, for a user's own
PyTorch code (training, a custom model). Needs PyTorch for this interpreter (Debian:
python3-torch); the module itself never imports it otherwise.

Each supported method keeps the parameters it stores, and rebuilds rows in PyTorch as
EmbedLab's lookup does:
  pca, svd  rows = Z[ids] @ P (+ mu)                       parameters Z [V, k], P [k, d], mu [d]
  tt        the cores' product per token, mode 1 fastest   parameters core0..coreN-1 [V, r, I_k, r']
  tucker    G[ids] x_1 U_1 .. x_N U_N, mode 1 fastest      parameters core [V, r_1..r_N], factor0..
  lle*      common ids read common_rows [C, d]; a rare id's row is rebuilt as
            EmbedLab's rebuild_rare() does it (partial_sparse.cpp):
    lle     u = sum_j w_j x_j / ||x_j|| over its k common neighbours (a zero x_j adds
            nothing), row = norm u / ||u|| (a zero u gives a zero row), in float64
                                                         parameters weights [R, k], norms [R]
    lle-unk row = fallback                               parameter fallback [d]
    lle-pca row = mean + coords[slot] @ basis            parameters coords [R, k], basis [k, d], mean [d]
            The ids (common ids, lle's neighbours) are buffers, not parameters.
  tt, per-token ranks (eps without uniform_ranks): each token's packed cores held in the
            conventional layout padded with zeros to each position's largest rank (the zeros
            add nothing to a row); a gradient hook keeps the padding at zero, so training keeps
            each token's own ranks                   parameters core0.. [V, r, I_k, r'], buffers rank_mask0..
  fourier   the features T(p), x = 2p/(V-1) - 1, sin/cos((i/2 + 1) pi x) in float64, then
            E = T + MLP(T) (linear: T w_in^T + b_in; geglu: (gelu(gate) * value) w_out^T + b_out)
            and RMSNorm (eps 1e-6) with norm        parameters w_in, b_in (w_out, b_out, norm)
  aq        rows = sum_m codebooks[m, codes[ids, m]]  parameter codebooks [M, K, d], codes a buffer
  quant     the table dequantised (EmbedLab's decoder)     parameter rows [V, d] (factorised False)
flat (it compresses no token table) is refused, naming these; a method registered at run
time too: its rows as a dense table are torch.from_numpy(run.embedding_table()).
"""

import numpy as np

SUPPORTED = ("pca", "svd", "tt", "tucker", "lle", "lle-unk", "lle-pca", "fourier", "aq", "quant")
PARTIAL_SPARSE = ("lle", "lle-unk", "lle-pca")


def _torch():
    try:
        import torch
    except ImportError as e:
        from . import _install_hint

        raise ImportError(f"Run.to_torch needs PyTorch, which this interpreter cannot import ({e}); "
                          + _install_hint("torch")) from e
    return torch


def _refuse(why):
    from . import InputError

    raise InputError(f"Run.to_torch: {why}; to_torch builds {', '.join(SUPPORTED[:-1])} and {SUPPORTED[-1]}; "
                     "for the rows as a dense table use "
                     "torch.nn.Embedding.from_pretrained(torch.from_numpy(run.embedding_table()))")


def _check_supported(run, method, factors):
    if method not in SUPPORTED:
        _refuse(f"method '{method or 'none'}' is not supported")


def _partial_sparse_slots(factors, vocab):
    """Each id's place [V] as the engine's partition_slots(): >= 0 its common slot, < 0
    -(rare slot) - 1. The rare ids are the stored list if there is one (an earlier
    directory), else every id not common, ascending, as the fit makes them."""
    common = np.asarray(factors["common_ids"], dtype=np.int64)
    unset = np.iinfo(np.int64).min
    slot = np.full(vocab, unset, dtype=np.int64)
    slot[common] = np.arange(common.size)
    rare = np.asarray(factors["rare_ids"], dtype=np.int64) if "rare_ids" in factors else np.flatnonzero(slot == unset)
    slot[rare] = -np.arange(rare.size) - 1
    return slot


def _padded_tt_cores(factors, shape):
    """Per-token ranks: each packed core (1-D, token after token, each token's own
    [r_k, I_k, r_k+1] row-major) as [V, R_k, I_k, R_k+1] with zeros beyond the token's
    ranks (R: each position's largest), and the mask of the values it stores."""
    ranks = np.asarray(factors["token_ranks"], dtype=np.int64)  # [V, N - 1]: r_1..r_N-1
    vocab = ranks.shape[0]
    ranks = np.concatenate([np.ones((vocab, 1), np.int64), ranks, np.ones((vocab, 1), np.int64)], axis=1)
    largest = ranks.max(0)
    cores, masks = [], []
    for k, size in enumerate(shape):
        packed = np.asarray(factors[f"packed_core{k}"], dtype=np.float32)
        left, right = ranks[:, k], ranks[:, k + 1]
        counts = left * size * right
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        if counts.sum() != packed.size:
            from . import InputError

            raise InputError(f"Run.to_torch: tt packed_core{k} holds {packed.size} values, its tokens' ranks "
                             f"{counts.sum()}")
        core = np.zeros((vocab, largest[k], size, largest[k + 1]), np.float32)
        mask = np.zeros_like(core)
        for a, b in set(zip(left.tolist(), right.tolist())):  # the tokens of each rank pair at once
            tokens = np.flatnonzero((left == a) & (right == b))
            values = packed[starts[tokens, None] + np.arange(a * size * b)]
            core[tokens, :a, :, :b] = values.reshape(-1, a, size, b)
            mask[tokens, :a, :, :b] = 1
        cores.append(core)
        masks.append(mask)
    return cores, masks


def to_torch(run):
    """The run's token table as a torch.nn.Module: forward(ids) -> rows [..., d] float32,
    head(hidden) -> logits [..., V] through the same rows (a tied output head)."""
    torch = _torch()
    method = run.request.get("method", "")
    factors = run.factors_f32
    _check_supported(run, method, factors)
    from . import _embedlab

    _unpack_aq_codes = _embedlab._unpack_aq_codes  # aq's packed codes, by the engine's unpacking
    if method == "quant":  # the blocks decoded by the engine's own decoder
        from . import dequantize

        table = dequantize(run.factors["blocks"], run.factor_types["blocks"])
    param = lambda a: torch.nn.Parameter(torch.from_numpy(np.array(a, dtype=np.float32)))  # noqa: E731
    id_buffer = lambda a: torch.from_numpy(np.array(a, dtype=np.int64))  # noqa: E731

    class CompressedEmbedding(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.method = method
            self.factorised = method != "quant"
            self.mu = None
            if method in ("pca", "svd"):
                self.Z = param(factors["Z"])  # [V, k]
                self.P = param(factors["P"])  # [k, d]
                self.mu = param(factors["mu"]) if "mu" in factors else None  # [d] (pca)
            elif method == "tt" and "token_ranks" in factors:
                record = run.record  # a saved run's parameters, a run in memory's spec
                cores, masks = _padded_tt_cores(factors, record.get("parameters", record.get("spec"))["shape"])
                self.cores = torch.nn.ParameterList(param(c) for c in cores)
                for k, (core, mask) in enumerate(zip(self.cores, masks)):
                    self.register_buffer(f"rank_mask{k}", torch.from_numpy(mask))
                    core.register_hook(lambda grad, k=k: grad * getattr(self, f"rank_mask{k}"))
            elif method == "tt":
                self.cores = torch.nn.ParameterList(
                    param(factors[f"core{k}"]) for k in range(sum(n.startswith("core") for n in factors)))
            elif method == "fourier":
                self.vocab = run.record["accounting"]["vocab"]
                self.w_in = param(factors["w_in"])  # [d, d] linear, [2h, d] geglu
                self.b_in = param(factors["b_in"])
                self.geglu = "w_out" in factors
                if self.geglu:
                    self.w_out = param(factors["w_out"])  # [d, h]
                    self.b_out = param(factors["b_out"])  # [d]
                self.norm = param(factors["norm"]) if "norm" in factors else None  # RMSNorm's weight [d]
            elif method == "aq":
                self.codebooks = param(factors["codebooks"])  # [M, K, d]
                books, words = self.codebooks.shape[:2]
                codes = _unpack_aq_codes(run.factors["codes"], books, words)  # [V, M]
                self.register_buffer("codes", id_buffer(codes))
            elif method in PARTIAL_SPARSE:
                slot = _partial_sparse_slots(factors, run.record["accounting"]["vocab"])
                self.register_buffer("slot", id_buffer(slot))  # [V]
                self.register_buffer("common_ids", id_buffer(factors["common_ids"]))  # [C]
                self.common_rows = param(factors["common_rows"])  # [C, d]
                if method == "lle":  # the neighbours' token ids as their common slots [R, k]
                    neighbours = np.asarray(factors["neighbour_ids"], dtype=np.int64)
                    self.register_buffer("neighbour_slots", id_buffer(slot[neighbours]))
                    self.weights = param(factors["weights"])  # [R, k]
                    self.norms = param(factors["norms"])  # [R]
                elif method == "lle-unk":
                    self.fallback = param(factors["fallback"])  # [d]
                else:
                    self.coords = param(factors["coords"])  # [R, k]
                    self.basis = param(factors["basis"])  # [k, d]
                    self.mean = param(factors["mean"])  # [d]
            elif method == "tucker":
                self.core = param(factors["core"])  # [V, r_1..r_N]
                self.factors = torch.nn.ParameterList(
                    param(factors[f"factor{k}"]) for k in range(self.core.dim() - 1))  # [I_k, r_k]
            else:
                self.rows = param(table)  # [V, d]

        @property
        def vocab_size(self):
            if self.method == "fourier":
                return self.vocab
            return self.slot.shape[0] if self.method in PARTIAL_SPARSE else self._first().shape[0]

        def _first(self):
            return {"tt": lambda: self.cores[0], "tucker": lambda: self.core, "aq": lambda: self.codes,
                    "quant": lambda: self.rows}.get(self.method, lambda: self.Z)()

        def _rows(self, flat):
            """The rows [n, d] of flat ids [n], as EmbedLab's lookup builds them."""
            if self.method in ("pca", "svd"):
                rows = torch.nn.functional.embedding(flat, self.Z) @ self.P
                return rows + self.mu if self.mu is not None else rows
            if self.method == "quant":
                return torch.nn.functional.embedding(flat, self.rows)
            if self.method in PARTIAL_SPARSE:
                return self._partial_sparse_rows(flat)
            if self.method == "fourier":
                return self._fourier_rows(flat)
            if self.method == "aq":  # codeword c of book m is row m K + c of the books as [M K, d]
                books, words, dim = self.codebooks.shape
                offsets = torch.arange(books) * words
                picked = self.codebooks.reshape(books * words, dim)[self.codes[flat] + offsets]
                return picked.sum(1)
            if self.method == "tt":  # [n, I_1, r_1] then each core: [n, I_1..I_k, r_k]
                y = self.cores[0][flat][:, 0]
                for core in self.cores[1:]:
                    y = torch.einsum("n...a,naib->n...ib", y, core[flat])
                y = y[..., 0]
            else:  # tucker: each mode's product moves that mode last: [n, I_1..I_N]
                y = self.core[flat]
                for u in self.factors:
                    y = torch.tensordot(y, u, dims=([1], [1]))
            # Mode 1 varies fastest in EmbedLab's rows (little-endian, TensorSLM eq. 6).
            return y.permute(0, *range(y.dim() - 1, 0, -1)).reshape(flat.shape[0], -1)

        def _fourier_rows(self, flat):
            """E(p) = T + MLP(T) (RMSNorm'd with norm), T the features in float64 then float32."""
            dim = self.w_in.shape[1]
            theta = torch.pi * ((2 * flat).double() / (self.vocab - 1) - 1)  # [n]
            angles = theta[:, None] * torch.arange(1, (dim + 1) // 2 + 1, dtype=torch.float64)
            # Frequency j + 1 in columns 2j (sin) and 2j + 1 (cos).
            t = torch.stack([angles.sin(), angles.cos()], -1).reshape(flat.shape[0], -1)[:, :dim].float()
            linear = torch.nn.functional.linear
            if self.geglu:
                hidden = self.w_out.shape[1]
                gate_value = linear(t, self.w_in, self.b_in)
                mlp = linear(torch.nn.functional.gelu(gate_value[:, :hidden]) * gate_value[:, hidden:],
                             self.w_out, self.b_out)
            else:
                mlp = linear(t, self.w_in, self.b_in)
            e = t + mlp
            if self.norm is not None:
                e = e * torch.rsqrt(e.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
            return e

        def _partial_sparse_rows(self, flat):
            """lookup(): common rows read, only the looked-up rare rows rebuilt."""
            slot = self.slot[flat]
            common = (slot >= 0).nonzero().reshape(-1)
            rare = (slot < 0).nonzero().reshape(-1)
            out = self.common_rows.new_zeros(flat.shape[0], self.common_rows.shape[1])
            out = out.index_put((common,), self.common_rows[slot[common]])
            return out.index_put((rare,), self._rare_rows(-slot[rare] - 1))

        def _rare_rows(self, rare):
            """rebuild_rare() of rare slots [n] -> [n, d] float32."""
            if self.method == "lle-unk":
                return self.fallback.expand(rare.shape[0], -1)
            if self.method == "lle-pca":
                return torch.addmm(self.mean, self.coords[rare], self.basis)
            # lle, in float64 as the engine; a zero neighbour adds nothing and a zero sum
            # gives a zero row (the norms of 1 in their place keep the gradients finite).
            def norm_or_one(v):  # ||v|| over the last axis, and where it is zero
                square = v.pow(2).sum(-1)
                zero = square == 0
                return torch.where(zero, torch.ones_like(square), square).sqrt(), zero

            x = self.common_rows.double()[self.neighbour_slots[rare]]  # [n, k, d]
            nx, zero_x = norm_or_one(x)  # [n, k]
            a = torch.where(zero_x, torch.zeros_like(nx), self.weights[rare].double() / nx)
            u = (a.unsqueeze(-1) * x).sum(1)  # [n, d]
            nu, zero_u = norm_or_one(u)  # [n]
            scale = torch.where(zero_u, torch.zeros_like(nu), self.norms[rare].double() / nu)
            return (u * scale.unsqueeze(-1)).float()

        def table(self):
            """Every row [V, d]."""
            if self.method == "quant":
                return self.rows
            return self._rows(torch.arange(self.vocab_size))

        def forward(self, ids):
            flat = ids.reshape(-1)
            return self._rows(flat).reshape(*ids.shape, -1)

        def head(self, hidden):
            """hidden [..., d] -> logits [..., V] = hidden @ table().T, factorised where it is."""
            if self.method not in ("pca", "svd"):
                return hidden @ self.table().T
            logits = (hidden @ self.P.T) @ self.Z.T
            return logits + (hidden @ self.mu).unsqueeze(-1) if self.mu is not None else logits

        def extra_repr(self):
            shapes = {name: tuple(p.shape) for name, p in self.named_parameters()}
            return f"method={self.method}, factorised={self.factorised}, " + ", ".join(
                f"{k}={v}" for k, v in shapes.items())

    return CompressedEmbedding()
