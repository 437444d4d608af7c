// Tucker embeddings (TensorSLM's baseline, METHODS.md 5; issue 20 item 13): exactness at
// full ranks, orthonormal factors, the HOSVD truncation computed independently here from
// SVDs of the unfoldings, the stored-value count, save -> load, bad shapes and ranks, and
// a run of the experiment API on the bundled model.
#include <cmath>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "embedlab/accounting.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/resources.hpp"
#include "embedlab/tucker.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

torch::Tensor seeded_table(int64_t V, int64_t d, uint64_t seed = 7)
{
    torch::manual_seed(seed);
    // Rows of unequal scale, as embedding tables have.
    return torch::randn({V, d}, torch::kFloat32) * torch::linspace(0.5, 2.0, V).unsqueeze(1);
}

torch::Tensor all_rows(const TokenEmbedding& e)
{
    return e.lookup(torch::arange(e.vocab_size(), torch::kLong));
}

std::string input_error(const std::function<void()>& call)
{
    return test::input_error_of(call, "no error");
}

// HOSVD written out for an order-3 table V x I_1 x I_2, independently of tucker.cpp: the
// row x is X[i_1, i_2] = x[i_1 + i_2 I_1], so the row-major view [V, I_2, I_1] permuted
// to [V, I_1, I_2] is the conventional tensor; U_k from linalg_svd of each unfolding.
torch::Tensor hosvd_reconstruction(const torch::Tensor& table, int64_t I1, int64_t I2, int64_t r1, int64_t r2)
{
    const int64_t V = table.size(0);
    const auto x = table.to(torch::kDouble).view({V, I2, I1}).permute({0, 2, 1}); // [V, I_1, I_2]
    const auto unfold1 = x.permute({1, 0, 2}).reshape({I1, -1});
    const auto unfold2 = x.permute({2, 0, 1}).reshape({I2, -1});
    const auto u1 = std::get<0>(torch::linalg_svd(unfold1, false)).narrow(1, 0, r1);
    const auto u2 = std::get<0>(torch::linalg_svd(unfold2, false)).narrow(1, 0, r2);
    const auto core = torch::einsum("vab,ai,bj->vij", {x, u1, u2});
    const auto back = torch::einsum("vij,ai,bj->vab", {core, u1, u2}); // [V, I_1, I_2]
    return back.permute({0, 2, 1}).reshape({V, I1 * I2});
}

} // namespace

TEST(Tucker, FullRanksReconstructTheTableExactly)
{
    const auto table = seeded_table(50, 24);
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{4, 6}, std::vector<int64_t>{2, 3, 4}}) {
        const auto fit = fit_tucker(table, {.shape = shape, .ranks = shape});
        const TuckerTokenEmbedding e(fit);
        EXPECT_TRUE(torch::allclose(all_rows(e), table, 1e-5, 1e-5)) << shape.size() << " modes";
        EXPECT_EQ(e.kind(), "tucker");
        EXPECT_EQ(e.dim(), 24);
        EXPECT_EQ(e.vocab_size(), 50);
    }
}

TEST(Tucker, FactorsAreOrthonormal)
{
    const auto fit = fit_tucker(seeded_table(60, 48), {.shape = {4, 3, 4}, .ranks = {3, 2, 2}});
    ASSERT_EQ(fit.factors.size(), 3u);
    for (size_t k = 0; k < fit.factors.size(); ++k) {
        const auto& u = fit.factors[k];
        EXPECT_EQ(u.sizes().vec(), (std::vector<int64_t>{fit.shape[k], fit.ranks[k]}));
        EXPECT_TRUE(torch::allclose(u.t().mm(u), torch::eye(fit.ranks[k]), 1e-5, 1e-5)) << "U_" << k + 1;
        // Eigenvalues descending and non-negative (a Gram matrix's).
        for (size_t j = 1; j < fit.eigenvalues[k].size(); ++j)
            EXPECT_GE(fit.eigenvalues[k][j - 1], fit.eigenvalues[k][j]);
        EXPECT_GE(fit.eigenvalues[k].back(), -1e-9);
    }
}

TEST(Tucker, TruncationEqualsAnIndependentHosvd)
{
    const auto table = seeded_table(40, 24, 11);
    const auto fit = fit_tucker(table, {.shape = {4, 6}, .ranks = {2, 3}});
    const TuckerTokenEmbedding e(fit);
    const auto expected = hosvd_reconstruction(table, 4, 6, 2, 3);
    const auto rows = all_rows(e).to(torch::kDouble);
    EXPECT_LT((rows - expected).abs().max().item<double>(), 1e-5);
    // The reported error is this truncation's.
    const double expected_error =
        ((expected - table.to(torch::kDouble)).norm() / table.norm()).item<double>();
    const auto m = measure_reconstruction(table, e);
    EXPECT_NEAR(m.relative_frobenius, expected_error, 1e-5);
    EXPECT_GT(m.relative_frobenius, 0.1); // really truncated
    // Tied head: hidden E^T of the reconstructed rows, computed in core space.
    const auto hidden = torch::randn({5, 24});
    EXPECT_TRUE(torch::allclose(e.project(hidden), hidden.mm(all_rows(e).t()), 1e-4, 1e-4));
    // Lookups keep the ids' shape.
    EXPECT_EQ(e.lookup(torch::tensor({{1, 2, 3}, {4, 5, 6}}, torch::kLong)).sizes().vec(),
              (std::vector<int64_t>{2, 3, 24}));
}

TEST(Tucker, ParameterCountIsCoresPlusFactors)
{
    const int64_t V = 50257;
    const auto a = account_tucker(V, {8, 16}, {4, 8});
    EXPECT_EQ(a.params_after, V * 4 * 8 + 8 * 4 + 16 * 8);
    EXPECT_EQ(a.params_before, V * 128);
    EXPECT_DOUBLE_EQ(a.ratio, double(a.params_after) / double(V * 128));
    EXPECT_EQ(a.core_values_per_token, 32);
    EXPECT_EQ(a.factor_values, 160);
    // Lookup: mode 1 2 * 8 * 4 * 8, mode 2 2 * 8 * 16 * 8; head: projection
    // 2 * 4 * 8 * 16 + 2 * 4 * 8 * 16, then 2 V * 32.
    EXPECT_EQ(a.flops_lookup, 512 + 2048);
    EXPECT_EQ(a.flops_head, 1024 + 1024 + 2 * V * 32);
    EXPECT_EQ(accounting_json(a)["ranks"], nlohmann::ordered_json({4, 8}));
    // The embedding counts the same values.
    const auto c =
        compress_table(seeded_table(30, 24), {.method = "tucker", .shape = {2, 3, 4}, .ranks = {1, 2, 3}});
    EXPECT_EQ(c.embedding->parameter_count(), 30 * 6 + 2 + 6 + 12);
    EXPECT_EQ(c.accounting.params_after, c.embedding->parameter_count());
}

TEST(Tucker, SaveAndLoadGiveIdenticalLookups)
{
    test::TempDir tmp;
    for (const auto arch : {Architecture::GPT2, Architecture::Llama}) {
        const auto name = std::string(architecture_name(arch));
        LoadOptions o;
        o.need_tokenizer = false;
        auto src = load_model(test::write_tiny_hf_model(tmp / ("src-" + name), arch), o);
        const auto& table =
            src.model->weights().at(arch == Architecture::GPT2 ? "wte.weight" : "model.embed_tokens.weight");
        const auto c = compress_table(table, {.method = "tucker", .shape = {4, 4}, .ranks = {2, 3}},
                                      src.model->parameter_breakdown().total());
        const auto manifest = save_compressed_model(src, c, tmp / ("out-" + name), {.dense = true});
        EXPECT_EQ(manifest["method"], "tucker");
        EXPECT_EQ(manifest["parameters"]["ranks"], nlohmann::ordered_json({2, 3}));
        auto back = load_model(tmp / ("out-" + name), o);
        ASSERT_EQ(back.model->token_embedding().kind(), "tucker") << name;
        const auto ids = torch::arange(table.size(0), torch::kLong);
        EXPECT_TRUE(torch::equal(back.model->token_embedding().lookup(ids), c.embedding->lookup(ids)))
            << name;
        EXPECT_EQ(back.model->parameter_breakdown().token_embedding, c.accounting.params_after);
        // The dense export holds the reconstructed table.
        auto dense = load_model(tmp / ("out-" + name) / "dense", o);
        EXPECT_TRUE(
            torch::allclose(dense.model->token_embedding().lookup(ids), c.embedding->lookup(ids), 1e-6, 1e-6))
            << name;
    }
}

TEST(Tucker, BadShapesAndRanksAreNamed)
{
    const auto table = seeded_table(10, 24);
    auto fit_error = [&](std::vector<int64_t> shape, std::vector<int64_t> ranks) {
        return input_error([&] { fit_tucker(table, {.shape = shape, .ranks = ranks}); });
    };
    EXPECT_NE(fit_error({4, 5}, {2, 2}).find("has product 20, not d = 24"), std::string::npos);
    EXPECT_NE(fit_error({}, {}).find("needs a shape"), std::string::npos);
    // tt-style ranks with boundary 1s: the count is named.
    const auto tt_style = fit_error({4, 6}, {1, 2, 1});
    EXPECT_NE(tt_style.find("needs 2 ranks r_1..r_N, got 3"), std::string::npos) << tt_style;
    EXPECT_NE(tt_style.find("no boundary 1s"), std::string::npos) << tt_style;
    const auto too_big = fit_error({4, 6}, {2, 7});
    EXPECT_NE(too_big.find("r_2 = 7 is outside [1, 6]"), std::string::npos) << too_big;
    EXPECT_NE(fit_error({4, 6}, {0, 2}).find("r_1 = 0"), std::string::npos);
    // A stored tensor that disagrees with the shape.
    const auto fit = fit_tucker(table, {.shape = {4, 6}, .ranks = {2, 3}});
    const auto bad_factor = input_error([&] {
        TuckerTokenEmbedding(fit.shape, fit.core, {fit.factors[0], fit.factors[0]});
    });
    EXPECT_NE(bad_factor.find("U_2"), std::string::npos) << bad_factor;
    // The request checks name the field.
    auto request_error = [](const char* json) {
        return input_error([&] { request_from_json(nlohmann::ordered_json::parse(json)); });
    };
    EXPECT_NE(request_error(R"({"model": "m", "method": "tucker", "ranks": [2, 3]})").find("shape"),
              std::string::npos);
    EXPECT_NE(request_error(R"({"model": "m", "method": "tucker", "shape": [4, 6]})").find("ranks"),
              std::string::npos);
    EXPECT_NE(request_error(R"({"model": "m", "method": "tucker", "shape": [4, 6], "ranks": [1, 2, 3, 1]})")
                  .find("needs 2 ranks"),
              std::string::npos);
    EXPECT_NE(
        request_error(R"({"model": "m", "method": "tucker", "shape": [4, 6], "ranks": [2, 3], "eps": 0.5})")
            .find("eps"),
        std::string::npos);
    const auto wrong_d = input_error([] {
        check_request({.model = "m", .method = "tucker", .shape = {4, 6}, .ranks = {2, 3}}, 128);
    });
    EXPECT_NE(wrong_d.find("not d = 128"), std::string::npos) << wrong_d;
}

TEST(Tucker, RunsThroughTheExperimentApiOnTheBundledModel)
{
    CompressionRequest r{.model = default_model_path().string(), .method = "tucker"};
    r.shape = {8, 16};
    r.ranks = {4, 8};
    r.eval_text = default_sample_text_path().string();
    r.eval_tokens = 512;
    r.ctx = 64;
    const auto run = run_compression(r);
    const auto& s = run.summary;
    EXPECT_EQ(s.method, "tucker");
    EXPECT_TRUE(std::isfinite(s.ppl)) << s.ppl;
    EXPECT_GT(s.ppl, 1.0);
    EXPECT_EQ(s.params_after, 50257 * 32 + 8 * 4 + 16 * 8);
    EXPECT_GT(s.mean_cosine, 0.5);
    EXPECT_LT(s.mean_cosine, 1.0);
    EXPECT_EQ(run.embedding->accounting.flops_head, 1024 + 1024 + 2 * 50257 * 32);
}

TEST(Tucker, OneModeIsTheTruncatedSvd)
{
    // Shape [d]: the row is its own tensor, U_1 the table's top right singular vectors.
    const auto table = seeded_table(80, 24, 3);
    const auto tucker = compress_table(table, {.method = "tucker", .shape = {24}, .ranks = {5}});
    const auto svd = compress_table(table, {.method = "svd", .rank = 5});
    EXPECT_EQ(tucker.accounting.params_after, svd.accounting.params_after);
    EXPECT_TRUE(torch::allclose(all_rows(*tucker.embedding), all_rows(*svd.embedding), 1e-4, 1e-4));
}

TEST(Tucker, CliCompressEvalAndAccount)
{
    test::TempDir tmp;
    const auto text = tmp / "short.txt";
    {
        std::ofstream out(text);
        out << test::read_text(default_sample_text_path()).substr(0, 3000);
    }
    const auto out = tmp / "tucker";
    const auto c = test::cli({"compress", default_model_path().string(), "--method", "tucker", "--shape",
                              "8,16", "--ranks", "4,8", "--out", out.string(), "--quiet"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_NE(c.out.find("ratio 0.2500"), std::string::npos) << c.out;
    const auto e = test::cli({"eval", out.string(), "--text", text.string(), "--json"});
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_TRUE(std::isfinite(nlohmann::json::parse(e.out)["ppl"].get<double>())) << e.out;
    // tt's ranks (boundary 1s) are refused, naming the count.
    const auto bad = test::cli({"compress", default_model_path().string(), "--method", "tucker", "--shape",
                                "8,16", "--ranks", "1,4,1", "--out", (tmp / "bad").string()});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("needs 2 ranks r_1..r_N, got 3"), std::string::npos) << bad.err;
    const auto a = test::cli({"account", "--method", "tucker", "--vocab", "50257", "--shape", "8,16",
                              "--ranks", "4,8:2,4", "--json"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const auto j = nlohmann::json::parse(a.out);
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][0]["params_after"], 50257 * 32 + 160);
    EXPECT_EQ(j["results"][1]["params_after"], 50257 * 8 + 8 * 2 + 16 * 4);
}
