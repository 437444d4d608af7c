"""Run.to_torch(): a run's compressed token table as a torch.nn.Module, for a user's own
PyTorch code (training, a custom model). Needs PyTorch for this interpreter (Debian:
python3-torch); the module itself never imports it otherwise.

pca and svd keep their factors as parameters (rows = Z[ids] @ P (+ mu)): the module has the
run's parameter count and trains as the factorisation. Every other method (tt, tucker, lle,
fourier, quant, ...) gives the rows its lookup rebuilds, as a dense table (a parameter
[V, d]): the same rows, not the same parameters. `factorised` says which.
"""

import numpy as np

LOW_RANK = ("pca", "svd")


def _torch():
    try:
        import torch
    except ImportError as e:
        from . import _install_hint

        raise ImportError(f"Run.to_torch needs PyTorch, which this interpreter cannot import ({e}); "
                          + _install_hint("torch")) from e
    return torch


def to_torch(run):
    """The run's token table as a torch.nn.Module: forward(ids) -> rows [..., d] float32,
    head(hidden) -> logits [..., V] through the same rows (a tied output head)."""
    torch = _torch()
    method = run.request.get("method", "")
    factors = run.factors_f32

    class CompressedEmbedding(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.method = method
            self.factorised = method in LOW_RANK
            param = lambda a: torch.nn.Parameter(torch.from_numpy(np.array(a, dtype=np.float32)))  # noqa: E731
            if self.factorised:
                self.Z = param(factors["Z"])  # [V, k]
                self.P = param(factors["P"])  # [k, d]
                self.mu = param(factors["mu"]) if "mu" in factors else None  # [d] (pca)
            else:
                self.rows = param(run.embedding_table())  # [V, d]

        @property
        def vocab_size(self):
            return (self.Z if self.factorised else self.rows).shape[0]

        def table(self):
            """Every row [V, d]."""
            if not self.factorised:
                return self.rows
            rows = self.Z @ self.P
            return rows + self.mu if self.mu is not None else rows

        def forward(self, ids):
            if not self.factorised:
                return torch.nn.functional.embedding(ids, self.rows)
            rows = torch.nn.functional.embedding(ids, self.Z) @ self.P
            return rows + self.mu if self.mu is not None else rows

        def head(self, hidden):
            """hidden [..., d] -> logits [..., V] = hidden @ table().T, factorised where it is."""
            if not self.factorised:
                return hidden @ self.rows.T
            logits = (hidden @ self.P.T) @ self.Z.T
            return logits + (hidden @ self.mu).unsqueeze(-1) if self.mu is not None else logits

        def extra_repr(self):
            shapes = {"Z": self.Z.shape, "P": self.P.shape} if self.factorised else {"rows": self.rows.shape}
            return f"method={self.method}, factorised={self.factorised}, " + ", ".join(
                f"{k}={tuple(v)}" for k, v in shapes.items())

    return CompressedEmbedding()
