"""Run.to_torch() (issue 64): the compressed token table as a torch.nn.Module whose rows
and tied-head logits are EmbedLab's, factorised for pca, svd, tt, tucker, lle, lle-unk and
lle-pca, tt with per-token ranks, fourier and aq (the run's parameter count less its stored ids,
rows rebuilt in PyTorch), quant's table dequantised; flat is refused naming these. Skipped without PyTorch for
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
    ("tt", {"eps": 0.5}, True),  # per-token ranks: packed cores
    ("tt", {"eps": 0.3, "store": "f16"}, True),
    ("fourier", {"steps": 20}, True),  # linear, whose engine head folds the MLP into the hidden states
    ("fourier", {"steps": 20, "mlp": "geglu", "norm": True}, True),
    ("fourier", {"steps": 20, "mlp": "geglu", "hidden_ratio": 0.5, "store": "bf16"}, True),
    ("aq", {"codebooks": 4, "codewords": 16, "steps": 50}, True),
    ("aq", {"codebooks": 3, "codewords": 8, "steps": 50}, True),  # 3-bit codes across bytes
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
    # The stored ids (lle's common and neighbour ids, aq's codes, tt's per-token ranks) are
    # buffers, not parameters; per-token tt cores are held padded, their stored values masked.
    ids = sum(a.size for name, a in run.factors.items() if name.endswith("_ids") or name == "token_ranks")
    if method == "aq":
        ids = module.codes.numel()
        assert module.codes.shape == (V, fields["codebooks"]) and int(module.codes.max()) < fields["codewords"]
    if "token_ranks" in run.factors:
        parameters = int(sum(b.sum() for name, b in module.named_buffers() if name.startswith("rank_mask")))
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


def test_to_torch_refuses_what_has_no_token_table_naming_what_it_builds(stories_model, heldout):
    pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(stories_model, "flat", remaining=0.5, calib_text=heldout, samples=2, seqlen=16)
    with pytest.raises(embedlab.InputError, match=r"Run.to_torch: method 'flat' is not supported; to_torch builds "
                                                  r"pca, svd, tt, tucker, lle, lle-unk, lle-pca, fourier, aq and "
                                                  r"quant; for the rows as a dense table use "
                                                  r"torch.nn.Embedding.from_pretrained"):
        run.to_torch()


def test_to_torch_of_a_per_token_tt_run_read_back_is_the_runs(gpt2, tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(gpt2, "tt", shape=[4, 4, 8], eps=0.6)
    run.export(tmp_path / "tt")  # its record names the shape in parameters, not spec
    with torch.no_grad():
        table = run.to_torch().table().numpy()
        np.testing.assert_array_equal(embedlab.load_run(tmp_path / "tt").to_torch().table().numpy(), table)
    np.testing.assert_allclose(table, run.embedding_table(), rtol=0, atol=1e-6)


def test_to_torch_per_token_tt_trains_within_each_tokens_ranks(stories_model):
    torch = pytest.importorskip("torch", reason="PyTorch is not importable (Debian: python3-torch)")
    run = embedlab.compress(stories_model, "tt", eps=0.5)
    module = run.to_torch()
    ranks = run.factors["token_ranks"]
    assert len({tuple(r) for r in ranks}) > 1  # the tokens' ranks differ
    masks = [module.rank_mask0, module.rank_mask1, module.rank_mask2]
    assert all(m.min() == 0 for m in masks[1:])  # padding held
    module(torch.arange(40)).pow(2).sum().backward()
    for core, mask in zip(module.cores, masks):
        assert core.grad[:40].abs().sum() > 0 and core.grad[40:].abs().sum() == 0
        assert (core.grad * (1 - mask)).abs().sum() == 0  # the padding stays zero
    # Token 7's first core as stored, unpacked: its own r_1 values, then zeros.
    r1 = int(ranks[7, 0])
    np.testing.assert_array_equal(module.cores[0][7, 0, :, r1:].detach().numpy(), 0)


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
