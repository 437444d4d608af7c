// OPT (TensorSLM's OPT-125M architecture) against a forward pass written out
// in this test from the formulas (llama.cpp has no OPT): learned positions
// offset by 2, pre-LayerNorm, biased projections, ReLU MLP, tied head; and
// OPT-350m's layout: a narrower table projected in and out (word_embed_proj_dim),
// LayerNorm after each residual add and no final norm (do_layer_norm_before false).
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;

constexpr int64_t V = 40, d = 16, H = 4, F = 24, L = 2, P = 32;

// OPT-350m's switches, at this test's size.
struct Layout {
    int64_t table_dim = d;  // word_embed_proj_dim
    bool post_norm = false; // do_layer_norm_before = false
};

// A random OPT directory under Hugging Face's names (model.decoder.*).
std::map<std::string, torch::Tensor> write_opt(const fs::path& dir, const nlohmann::json& extra = {},
                                               Layout layout = {})
{
    torch::manual_seed(5);
    std::map<std::string, torch::Tensor> w;
    auto r = [](std::vector<int64_t> shape, double scale) { return torch::randn(shape) * scale; };
    const int64_t e = layout.table_dim;
    w["model.decoder.embed_tokens.weight"] = r({V, e}, 0.5);
    w["model.decoder.embed_positions.weight"] = r({P + 2, d}, 0.5);
    if (!layout.post_norm) {
        w["model.decoder.final_layer_norm.weight"] = 1.0 + r({d}, 0.2);
        w["model.decoder.final_layer_norm.bias"] = r({d}, 0.2);
    }
    if (e != d) {
        w["model.decoder.project_in.weight"] = r({d, e}, 0.4);
        w["model.decoder.project_out.weight"] = r({e, d}, 0.4);
    }
    for (int64_t l = 0; l < L; ++l) {
        const std::string p = "model.decoder.layers." + std::to_string(l) + ".";
        for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
            w[p + "self_attn." + n + ".weight"] = r({d, d}, 0.3);
            w[p + "self_attn." + n + ".bias"] = r({d}, 0.3);
        }
        for (const char* n : {"self_attn_layer_norm", "final_layer_norm"}) {
            w[p + n + ".weight"] = 1.0 + r({d}, 0.2);
            w[p + n + ".bias"] = r({d}, 0.2);
        }
        w[p + "fc1.weight"] = r({F, d}, 0.3);
        w[p + "fc1.bias"] = r({F}, 0.3);
        w[p + "fc2.weight"] = r({d, F}, 0.3);
        w[p + "fc2.bias"] = r({d}, 0.3);
    }
    fs::create_directories(dir);
    std::vector<std::pair<std::string, torch::Tensor>> tensors(w.begin(), w.end());
    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
    nlohmann::json config = {{"model_type", "opt"},
                             {"vocab_size", V},
                             {"hidden_size", d},
                             {"num_hidden_layers", L},
                             {"num_attention_heads", H},
                             {"ffn_dim", F},
                             {"max_position_embeddings", P},
                             {"activation_function", "relu"},
                             {"do_layer_norm_before", !layout.post_norm},
                             {"word_embed_proj_dim", e},
                             {"tie_word_embeddings", true}};
    if (extra.is_object())
        config.update(extra);
    std::ofstream(dir / "config.json") << config.dump(1);
    return w;
}

// The OPT forward pass from its formulas (Hugging Face's OPTDecoder), on the raw tensors.
torch::Tensor reference_logits(std::map<std::string, torch::Tensor>& w, const torch::Tensor& ids,
                               Layout layout = {})
{
    const int64_t T = ids.size(0), hd = d / H;
    auto ln = [&](const torch::Tensor& x, const std::string& n) {
        return torch::layer_norm(x, {d}, w[n + ".weight"], w[n + ".bias"], 1e-5);
    };
    auto lin = [&](const torch::Tensor& x, const std::string& n) {
        return torch::matmul(x, w[n + ".weight"].t()) + w[n + ".bias"];
    };
    const bool pre = !layout.post_norm, projected = layout.table_dim != d;
    auto x = w["model.decoder.embed_tokens.weight"].index_select(0, ids);
    if (projected)
        x = torch::matmul(x, w["model.decoder.project_in.weight"].t());
    x = x + w["model.decoder.embed_positions.weight"].index_select(0, torch::arange(T) + 2);
    const auto mask = torch::ones({T, T}, torch::kBool).triu(1);
    for (int64_t l = 0; l < L; ++l) {
        const std::string p = "model.decoder.layers." + std::to_string(l) + ".";
        const auto h = pre ? ln(x, p + "self_attn_layer_norm") : x;
        auto q = lin(h, p + "self_attn.q_proj").view({T, H, hd}).transpose(0, 1) / std::sqrt(double(hd));
        auto k = lin(h, p + "self_attn.k_proj").view({T, H, hd}).transpose(0, 1);
        auto v = lin(h, p + "self_attn.v_proj").view({T, H, hd}).transpose(0, 1);
        auto scores = torch::matmul(q, k.transpose(1, 2)).masked_fill(mask, -INFINITY);
        auto attn = torch::matmul(torch::softmax(scores, -1), v).transpose(0, 1).reshape({T, d});
        x = x + lin(attn, p + "self_attn.out_proj");
        if (!pre)
            x = ln(x, p + "self_attn_layer_norm");
        x = x + lin(torch::relu(lin(pre ? ln(x, p + "final_layer_norm") : x, p + "fc1")), p + "fc2");
        if (!pre)
            x = ln(x, p + "final_layer_norm");
    }
    if (pre)
        x = ln(x, "model.decoder.final_layer_norm");
    if (projected)
        x = torch::matmul(x, w["model.decoder.project_out.weight"].t());
    return torch::matmul(x, w["model.decoder.embed_tokens.weight"].t());
}

TEST(Opt, MatchesTheWrittenOutForwardPass)
{
    test::TempDir tmp;
    auto w = write_opt(tmp.path() / "opt");
    const auto lm = load_model(tmp.path() / "opt", {.need_tokenizer = false});
    EXPECT_EQ(lm.model->config().type_name(), "opt");
    EXPECT_EQ(lm.model->max_context(), P);
    const auto ids = torch::tensor({3, 17, 5, 39, 0, 22, 8, 8, 11, 30}, torch::kLong);
    const auto ours = lm.model->logits(ids.unsqueeze(0))[0];
    const auto expected = reference_logits(w, ids);
    EXPECT_LT((ours - expected).abs().max().item<double>(), 1e-4);
    EXPECT_THROW(lm.model->logits(torch::zeros({1, P + 1}, torch::kLong)), InputError);
}

// Compressed and written back under OPT's own names, then read again; OPT-350m's
// projected table is what gets compressed, at its own width.
TEST(Opt, CompressedDirectoryRoundTrips)
{
    for (const Layout layout : {Layout{}, Layout{8, true}}) {
        test::TempDir tmp;
        write_opt(tmp.path() / "opt", {}, layout);
        CompressionRequest r;
        r.model = (tmp.path() / "opt").string();
        r.method = "svd";
        r.rank = layout.table_dim / 2;
        const auto run = run_compression(r);
        EXPECT_EQ(run.compressed_model().token_embedding().dim(), layout.table_dim);
        export_run(run, tmp.path() / "svd", {.dense = true});
        const auto ids = torch::tensor({{1, 2, 3, 4, 5, 6, 7}}, torch::kLong);
        const auto back = load_model(tmp.path() / "svd", {.need_tokenizer = false});
        EXPECT_LT((back.model->logits(ids) - run.compressed_model().logits(ids)).abs().max().item<double>(),
                  1e-5);
        const auto dense = load_model(tmp.path() / "svd" / "dense", {.need_tokenizer = false});
        EXPECT_LT((dense.model->logits(ids) - run.compressed_model().logits(ids)).abs().max().item<double>(),
                  1e-4);
    }
}

// OPT-350m: a table of width 8 projected to d = 16 and back, post-LayerNorm, no
// final norm; each switch alone and both, against the written-out pass.
TEST(Opt, ProjectedTableAndPostNormMatchTheWrittenOutForwardPass)
{
    const auto ids = torch::tensor({3, 17, 5, 39, 0, 22, 8, 8, 11, 30}, torch::kLong);
    for (const Layout layout : {Layout{8, false}, Layout{d, true}, Layout{8, true}}) {
        test::TempDir tmp;
        auto w = write_opt(tmp.path() / "opt", {}, layout);
        const auto lm = load_model(tmp.path() / "opt", {.need_tokenizer = false});
        EXPECT_EQ(lm.model->config().embedding_dim(), layout.table_dim);
        EXPECT_EQ(lm.model->token_embedding().dim(), layout.table_dim);
        const auto ours = lm.model->logits(ids.unsqueeze(0))[0];
        const auto expected = reference_logits(w, ids, layout);
        EXPECT_LT((ours - expected).abs().max().item<double>(), 1e-4)
            << "table width " << layout.table_dim << ", post-norm " << layout.post_norm;
        // Post-norm is not pre-norm: the same weights read the other way differ.
        if (layout.post_norm) {
            EXPECT_GT((ours - reference_logits(w, ids, {layout.table_dim, false})).abs().max().item<double>(),
                      1e-2);
        }
    }
}

// A projected table without its projections is named, not guessed.
TEST(Opt, MissingProjectionIsNamed)
{
    test::TempDir tmp;
    auto w = write_opt(tmp.path() / "opt", {}, {8, false});
    w.erase("model.decoder.project_out.weight");
    std::vector<std::pair<std::string, torch::Tensor>> tensors(w.begin(), w.end());
    write_safetensors(tmp.path() / "opt" / "model.safetensors", tensors, {{"format", "pt"}});
    try {
        load_model(tmp.path() / "opt", {.need_tokenizer = false});
        FAIL() << "loaded";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("project_out"), std::string::npos) << e.what();
    }
}

} // namespace
} // namespace embedlab
