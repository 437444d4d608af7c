"""Run.to_torch() (issue 64): the compressed token table as a torch.nn.Module whose rows
and tied-head logits are EmbedLab's, factorised for pca and svd (the run's parameter
count), the rebuilt rows for the other methods. Skipped without PyTorch for this
interpreter (Debian: python3-torch)."""

import sys

import numpy as np
import pytest

import embedlab


@pytest.fixture(scope="module")
def stories_model(stories):
    return embedlab.load(stories)


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
    ("tt", {"eps": 0.5}, False),
    ("quant", {"type": "q4_0"}, False),
])
def test_to_torch_gives_embedlabs_rows_and_logits(stories_model, stories, method, fields, factorised):
    torch = pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(stories, method, **fields)
    module = run.to_torch()
    assert isinstance(module, torch.nn.Module) and module.factorised == factorised
    V, d = stories_model.vocab_size, stories_model.dim
    parameters = sum(p.numel() for p in module.parameters())
    assert parameters == (run.record["accounting"]["params_after"] if factorised else V * d)
    ids = torch.arange(V)
    with torch.no_grad():
        rows = module(ids)
        assert rows.dtype == torch.float32 and tuple(rows.shape) == (V, d)
        np.testing.assert_allclose(rows.numpy(), run.embedding_table(), rtol=0, atol=1e-6)
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
