// OPT (TensorSLM's OPT-125M architecture) against a forward pass written out
// in this test from the formulas (llama.cpp has no OPT): learned positions
// offset by 2, pre-LayerNorm, biased projections, ReLU MLP, tied head.
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

// A random OPT directory under Hugging Face's names (model.decoder.*).
std::map<std::string, torch::Tensor> write_opt(const fs::path& dir, const nlohmann::json& extra = {})
{
    torch::manual_seed(5);
    std::map<std::string, torch::Tensor> w;
    auto r = [](std::vector<int64_t> shape, double scale) { return torch::randn(shape) * scale; };
    w["model.decoder.embed_tokens.weight"] = r({V, d}, 0.5);
    w["model.decoder.embed_positions.weight"] = r({P + 2, d}, 0.5);
    w["model.decoder.final_layer_norm.weight"] = 1.0 + r({d}, 0.2);
    w["model.decoder.final_layer_norm.bias"] = r({d}, 0.2);
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
                             {"do_layer_norm_before", true},
                             {"word_embed_proj_dim", d},
                             {"tie_word_embeddings", true}};
    if (extra.is_object())
        config.update(extra);
    std::ofstream(dir / "config.json") << config.dump(1);
    return w;
}

// The OPT forward pass from its formulas, on the raw tensors.
torch::Tensor reference_logits(std::map<std::string, torch::Tensor>& w, const torch::Tensor& ids)
{
    const int64_t T = ids.size(0), hd = d / H;
    auto ln = [&](const torch::Tensor& x, const std::string& n) {
        return torch::layer_norm(x, {d}, w[n + ".weight"], w[n + ".bias"], 1e-5);
    };
    auto lin = [&](const torch::Tensor& x, const std::string& n) {
        return torch::matmul(x, w[n + ".weight"].t()) + w[n + ".bias"];
    };
    auto x = w["model.decoder.embed_tokens.weight"].index_select(0, ids) +
             w["model.decoder.embed_positions.weight"].index_select(0, torch::arange(T) + 2);
    const auto mask = torch::ones({T, T}, torch::kBool).triu(1);
    for (int64_t l = 0; l < L; ++l) {
        const std::string p = "model.decoder.layers." + std::to_string(l) + ".";
        const auto h = ln(x, p + "self_attn_layer_norm");
        auto q = lin(h, p + "self_attn.q_proj").view({T, H, hd}).transpose(0, 1) / std::sqrt(double(hd));
        auto k = lin(h, p + "self_attn.k_proj").view({T, H, hd}).transpose(0, 1);
        auto v = lin(h, p + "self_attn.v_proj").view({T, H, hd}).transpose(0, 1);
        auto scores = torch::matmul(q, k.transpose(1, 2)).masked_fill(mask, -INFINITY);
        auto attn = torch::matmul(torch::softmax(scores, -1), v).transpose(0, 1).reshape({T, d});
        x = x + lin(attn, p + "self_attn.out_proj");
        x = x + lin(torch::relu(lin(ln(x, p + "final_layer_norm"), p + "fc1")), p + "fc2");
    }
    return torch::matmul(ln(x, "model.decoder.final_layer_norm"), w["model.decoder.embed_tokens.weight"].t());
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

// Compressed and written back under OPT's own names, then read again.
TEST(Opt, CompressedDirectoryRoundTrips)
{
    test::TempDir tmp;
    write_opt(tmp.path() / "opt");
    CompressionRequest r;
    r.model = (tmp.path() / "opt").string();
    r.method = "svd";
    r.rank = 8;
    const auto run = run_compression(r);
    export_run(run, tmp.path() / "svd", {.dense = true});
    const auto ids = torch::tensor({{1, 2, 3, 4, 5, 6, 7}}, torch::kLong);
    const auto back = load_model(tmp.path() / "svd", {.need_tokenizer = false});
    EXPECT_LT((back.model->logits(ids) - run.compressed_model().logits(ids)).abs().max().item<double>(),
              1e-5);
    const auto dense = load_model(tmp.path() / "svd" / "dense", {.need_tokenizer = false});
    EXPECT_LT((dense.model->logits(ids) - run.compressed_model().logits(ids)).abs().max().item<double>(),
              1e-4);
}

TEST(Opt, ProjectedEmbeddingsAreRefusedByName)
{
    test::TempDir tmp;
    write_opt(tmp.path() / "opt", {{"word_embed_proj_dim", 8}});
    try {
        load_model(tmp.path() / "opt", {.need_tokenizer = false});
        FAIL() << "loaded";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("word_embed_proj_dim differs from hidden_size"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
} // namespace embedlab
