"""Run.to_torch() (issue 64): the compressed token table as a torch.nn.Module whose rows
and tied-head logits are EmbedLab's, factorised for pca, svd, tt, tucker, lle, lle-unk and
lle-pca (the run's parameter count less its stored ids, rows rebuilt in PyTorch), quant's
table dequantised; other methods are refused naming these. Skipped without PyTorch for
this interpreter (Debian: python3-torch)."""

import sys

import numpy as np
import pytest

import embedlab


def test_to_torch_without_torch_says_what_to_install(stories_model, monkeypatch):
    run = embedlab.compress(stories_model, "pca", rank=4)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(ImportError, match=r"Run.to_torch needs PyTorch, which this interpreter cannot import "
                                          r"\(.*\); Debian: apt-get install python3-torch"):
        run.to_torch()


@pytest.mark.parametrize("method, fields, factorised", [
    ("pca", {"rank": 16}, True),
    ("pca", {"rank": 16, "store": "f16"}, True),
    ("svd", {"rank": 8}, True),
    ("tt", {"shape": [4, 2, 8], "ranks": [1, 3, 5, 1]}, True),
    ("tt", {"shape": [8, 8], "ranks": [1, 4, 1], "store": "bf16"}, True),
    ("tt", {"eps": 0.5, "uniform_ranks": True}, True),
    ("tucker", {"shape": [4, 2, 8], "ranks": [3, 2, 5]}, True),
    ("lle", {"keep_ratio": 0.3, "k": 4}, True),
    ("lle", {"keep_ratio": 0.1, "k": 8, "store": "bf16"}, True),
    ("lle-unk", {"keep_ratio": 0.3}, True),
    ("lle-pca", {"keep_ratio": 0.3, "k": 8}, True),
    ("quant", {"type": "q4_0"}, False),
    ("quant", {"type": "q8_0"}, False),
])
def test_to_torch_gives_embedlabs_rows_and_logits(stories_model, stories, heldout, method, fields, factorised):
    torch = pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    if method.startswith("lle"):
        fields = dict(fields, freq_text=heldout)
    run = embedlab.compress(stories, method, **fields)
    module = run.to_torch()
    assert isinstance(module, torch.nn.Module) and module.factorised == factorised
    V, d = stories_model.vocab_size, stories_model.dim
    parameters = sum(p.numel() for p in module.parameters())
    # The stored ids (lle's common and neighbour ids) are buffers, not parameters.
    ids = sum(a.size for name, a in run.factors.items() if name.endswith("_ids"))
    assert parameters == (run.record["accounting"]["params_after"] - ids if factorised else V * d)
    ids = torch.arange(V)
    with torch.no_grad():
        rows = module(ids)
        assert rows.dtype == torch.float32 and tuple(rows.shape) == (V, d)
        np.testing.assert_allclose(rows.numpy(), run.embedding_table(), rtol=0, atol=1e-6)
        some = torch.tensor([[3, 1, 4], [1, 5, 9]])  # any shape of ids: rows [..., d]
        np.testing.assert_allclose(module(some).numpy(), run.embedding_table()[some.numpy()], rtol=0, atol=1e-6)
        np.testing.assert_allclose(module.table().numpy(), run.embedding_table(), rtol=0, atol=1e-6)
        # The tied head on the compressed model's own final hidden states gives its logits.
        text_ids = stories_model.tokenize("Once upon a time there was a little cat named Tom.")
        hidden = torch.from_numpy(run.model.hidden_states(text_ids))
        np.testing.assert_allclose(module.head(hidden).numpy(), run.model.logits(text_ids), rtol=1e-4, atol=1e-4)


def test_to_torch_trains_as_the_factorisation(stories_model):
    torch = pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(stories_model, "pca", rank=8)
    module = run.to_torch()
    loss = module(torch.tensor([[1, 2, 3]])).pow(2).sum()
    loss.backward()
    assert {name for name, p in module.named_parameters() if p.grad is not None} == {"Z", "P", "mu"}
    assert module.Z.grad[1].abs().sum() > 0 and module.Z.grad[4].abs().sum() == 0  # rows read only
    # The module owns copies: training it leaves the run alone.
    with torch.no_grad():
        module.Z.zero_()
    assert np.abs(run.factors_f32["Z"]).sum() > 0


@pytest.mark.parametrize("method, fields, why", [
    ("fourier", {"steps": 2}, "method 'fourier' is not supported"),
    ("tt", {"eps": 0.5}, r"this tt run has per-token ranks \(packed cores\), which are not supported"),
])
def test_to_torch_refuses_what_it_cannot_rebuild_naming_what_it_can(stories_model, method, fields, why):
    pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(stories_model, method, **fields)
    with pytest.raises(embedlab.InputError, match=rf"Run.to_torch: {why}; to_torch builds pca, svd, tt, tucker, "
                                                  r"lle, lle-unk, lle-pca and quant \(tt with uniform ranks\); for "
                                                  r"the rows as a dense "
                                                  r"table use torch.nn.Embedding.from_pretrained"):
        run.to_torch()


def test_to_torch_tucker_trains_its_core_rows_and_shared_factors(stories_model):
    torch = pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(stories_model, "tucker", shape=[4, 2, 8], ranks=[3, 2, 5])
    module = run.to_torch()
    module(torch.tensor([2, 7])).pow(2).sum().backward()
    assert module.core.grad[2].abs().sum() > 0 and module.core.grad[3].abs().sum() == 0  # rows read only
    assert all(u.grad.abs().sum() > 0 for u in module.factors)


def test_to_torch_lle_trains_its_common_rows_and_rare_codes(stories_model, heldout):
    """A rare id's row reads its k neighbours' common rows and its own weights and norm;
    the ids stay buffers, and the rows and weights it does not read get no gradient."""
    torch = pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(stories_model, "lle", freq_text=heldout, keep_ratio=0.3, k=4)
    module = run.to_torch()
    assert {name for name, _ in module.named_parameters()} == {"common_rows", "weights", "norms"}
    assert {name for name, _ in module.named_buffers()} == {"slot", "common_ids", "neighbour_slots"}
    common = run.factors["common_ids"].astype(np.int64)
    rare = np.setdiff1d(np.arange(stories_model.vocab_size), common)  # ascending: rare slot order
    token, slot = int(rare[5]), 5
    module(torch.tensor([token])).pow(2).sum().backward()
    neighbours = [int(np.flatnonzero(common == n)[0]) for n in run.factors["neighbour_ids"][slot]]
    read = torch.zeros(common.size, dtype=torch.bool)
    read[neighbours] = True
    assert (module.common_rows.grad[read].abs().sum(1) > 0).all()
    assert module.common_rows.grad[~read].abs().sum() == 0
    assert module.weights.grad[slot].abs().sum() > 0 and module.norms.grad[slot] != 0
    assert module.weights.grad.abs().sum() == module.weights.grad[slot].abs().sum()
    # A common id reads its stored row only.
    module.zero_grad()
    module(torch.tensor([int(common[0])])).sum().backward()
    assert module.common_rows.grad[0].abs().sum() > 0 and module.common_rows.grad[1:].abs().sum() == 0
    assert module.weights.grad.abs().sum() == 0
