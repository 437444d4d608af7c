// ONNX export of the compressed token embeddings' own lookups (TokenEmbedding::onnx_lookup,
// onnx_project): for each method, export_onnx_embedding writes no more than the method
// stores (plus a small graph), and ONNX Runtime's `rows` and `logits` equal lookup() and
// project() within 1e-5 of their largest value (quant: bit for bit).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "embedlab/additive_quantisation.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/onnx_export.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/quantised_table.hpp"
#include "embedlab/tensor_train.hpp"
#include "embedlab/tucker.hpp"
#include "io/onnx_graph.hpp"
#include "onnx_runtime.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;

torch::Tensor random_table(int64_t V, int64_t d, uint64_t seed = 3)
{
    torch::manual_seed(static_cast<int64_t>(seed));
    return (torch::randn({V, d}) * torch::linspace(1.5, 0.2, d) + 0.3).contiguous();
}

// Every id once, shuffled, then some again (first, last, repeats).
torch::Tensor test_ids(int64_t V)
{
    torch::manual_seed(7);
    return torch::cat(
        {torch::randperm(V, torch::kLong), torch::tensor({int64_t{0}, V - 1, V - 1, int64_t{1}})});
}

double max_abs(const torch::Tensor& t)
{
    return t.abs().max().item<double>();
}

struct Case {
    std::string name;
    std::shared_ptr<TokenEmbedding> embedding;
    int64_t stored_bytes = 0;    // what the method stores (parameters at their own widths)
    double row_tolerance = 1e-5; // of the largest value
};

// The graph's tensors: those holding the method's values (named embed.*) and the rest
// (shapes, axes, bit positions).
std::pair<int64_t, int64_t> graph_bytes(const TokenEmbedding& e)
{
    onnx::Graph g;
    EXPECT_FALSE(e.onnx_lookup(g, "ids").empty());
    EXPECT_FALSE(e.onnx_project(g, "hidden").empty());
    EXPECT_TRUE(g.notes().empty()) << g.notes().front();
    int64_t values = 0, constants = 0;
    for (const auto& t : g.initializers())
        (t.name.rfind("embed.", 0) == 0 ? values : constants) += static_cast<int64_t>(t.bytes());
    return {values, constants};
}

// Exports `c` and checks the file against the method's bytes; then, when ONNX Runtime is
// installed, its rows and logits against lookup() and project(): the byte checks run
// without it.
void check_export(const Case& c)
{
    SCOPED_TRACE(c.name);
    test::TempDir dir;
    const auto path = dir / (c.name + ".onnx");
    const auto& e = *c.embedding;
    ModelExportReport report;
    ASSERT_NO_THROW(report = export_onnx_embedding(e, path, {})) << c.name;
    EXPECT_EQ(report.embedding_type, e.kind());
    const auto bytes = static_cast<int64_t>(fs::file_size(path));
    EXPECT_EQ(static_cast<int64_t>(report.bytes), bytes);
    // Exactly what the method stores (no dense table, no padding, nothing twice), a few
    // constants, and the graph.
    const auto [values, constants] = graph_bytes(e);
    EXPECT_EQ(values, c.stored_bytes);
    EXPECT_LE(constants, 4096);
    EXPECT_GE(bytes, c.stored_bytes);
    EXPECT_LE(bytes, static_cast<int64_t>(1.05 * static_cast<double>(c.stored_bytes)) + 16 * 1024)
        << "ONNX file " << bytes << " bytes for " << c.stored_bytes << " stored";
    std::cout << "[ onnx     ] " << c.name << ": file " << bytes << " bytes, " << c.stored_bytes
              << " stored by the method (" << static_cast<double>(bytes) / static_cast<double>(c.stored_bytes)
              << "x), constants " << constants << "\n";

    if (!test::have_onnxruntime())
        GTEST_SKIP() << test::onnxruntime_skip_reason();
    const auto ids = test_ids(e.vocab_size());
    torch::manual_seed(9);
    const auto hidden = torch::randn({5, e.dim()});
    const auto run = test::run_onnx(path, {{"ids", ids}, {"hidden", hidden}}, {"rows", "logits"});
    const auto rows = run.outputs.at("rows"), logits = run.outputs.at("logits");
    const auto want_rows = e.lookup(ids), want_logits = e.project(hidden);
    ASSERT_EQ(rows.sizes(), want_rows.sizes());
    ASSERT_EQ(logits.sizes(), want_logits.sizes());
    const double row_error = max_abs(rows - want_rows), logit_error = max_abs(logits - want_logits);
    std::cout << "[ onnx     ] " << c.name << ": rows max error " << row_error << " (of "
              << max_abs(want_rows) << "), logits " << logit_error << " (of " << max_abs(want_logits)
              << ")\n";
    EXPECT_LE(row_error, c.row_tolerance * max_abs(want_rows));
    EXPECT_LE(logit_error, 1e-5 * max_abs(want_logits));
}

// --- partial sparse (lle, lle-unk, lle-pca) ------------------------------------------

FrequencySplit split_of(int64_t V, int64_t every)
{
    FrequencySplit s;
    s.counts.assign(static_cast<size_t>(V), 0);
    for (int64_t v = 0; v < V; ++v)
        (v % every == 0 ? s.common : s.rare).push_back(v);
    return s;
}

Case partial_sparse_case(const std::string& name, const torch::Tensor& table, const FrequencySplit& split,
                         const PartialSparseOptions& o)
{
    auto e = std::make_shared<PartialSparseTokenEmbedding>(fit_partial_sparse(table, split, o));
    const int64_t index = e->index_values(); // ids at int16 or int32, the rest float32
    return {name, e, (e->parameter_count() - index) * 4 + index * index_bytes_for(e->vocab_size())};
}

TEST(OnnxEmbedding, PartialSparse)
{
    const int64_t V = 300, d = 32;
    auto table = random_table(V, d);
    table[7].zero_(); // a zero rare row (its rebuilt row is zero)
    table[9].zero_(); // a zero common neighbour candidate
    const auto split = split_of(V, 3);
    check_export(partial_sparse_case("lle", table, split, {.kind = PartialSparseKind::LLE, .k = 5}));
    check_export(partial_sparse_case("lle-unk", table, split, {.kind = PartialSparseKind::Unk, .unk_id = 4}));
    check_export(partial_sparse_case("lle-unk-mean", table, split, {.kind = PartialSparseKind::Unk}));
    check_export(partial_sparse_case("lle-pca", table, split, {.kind = PartialSparseKind::PCA, .k = 6}));
    // The last id common, and a split whose common ids are not the small ones.
    auto late = split_of(V, 1);
    late.common.assign({299, 150, 3, 4, 5, 6});
    late.rare.clear();
    for (int64_t v = 0; v < V; ++v)
        if (std::find(late.common.begin(), late.common.end(), v) == late.common.end())
            late.rare.push_back(v);
    std::sort(late.common.begin(), late.common.end());
    check_export(partial_sparse_case("lle-late", table, late, {.kind = PartialSparseKind::LLE, .k = 3}));
}

TEST(OnnxEmbedding, PartialSparseBeyondInt16Ids)
{
    // V > 32768: ids stored as int32.
    const int64_t V = 33000, d = 4;
    const auto table = random_table(V, d, 5);
    check_export(
        partial_sparse_case("lle-int32", table, split_of(V, 2), {.kind = PartialSparseKind::LLE, .k = 2}));
}

// --- tensor train ------------------------------------------------------------------

Case tt_case(const std::string& name, TensorTrainFit fit)
{
    auto e = std::make_shared<TensorTrainTokenEmbedding>(std::move(fit));
    return {name, e, e->parameter_count() * 4}; // float32 core values, int32 ranks
}

TEST(OnnxEmbedding, TensorTrain)
{
    const auto table = random_table(200, 64);
    check_export(tt_case("tt-uniform", fit_tensor_train(table, {.shape = {4, 4, 4}, .ranks = {1, 3, 4, 1}})));
    auto per_token = fit_tensor_train(table, {.shape = {4, 4, 4}, .eps = 0.35});
    ASSERT_TRUE(per_token.token_ranks.defined());
    const auto ranks = per_token.token_ranks.to(torch::kLong);
    EXPECT_GT(ranks.max().item<int64_t>(), ranks.min().item<int64_t>()) << "ranks differ between tokens";
    check_export(tt_case("tt-per-token", std::move(per_token)));
    auto four = fit_tensor_train(random_table(120, 48, 4), {.shape = {2, 3, 2, 4}, .eps = 0.2});
    ASSERT_TRUE(four.token_ranks.defined());
    check_export(tt_case("tt-per-token-4", std::move(four)));
    check_export(tt_case("tt-uniform-eps",
                         fit_tensor_train(table, {.shape = {8, 8}, .eps = 0.3, .uniform_ranks = true})));
}

// --- tucker ------------------------------------------------------------------------

TEST(OnnxEmbedding, Tucker)
{
    for (const auto& [shape, ranks] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{4, 8}, {3, 5}}, {{4, 3, 4}, {3, 2, 2}}, {{48}, {7}}}) {
        int64_t d = 1;
        for (auto f : shape)
            d *= f;
        const auto e = std::make_shared<TuckerTokenEmbedding>(
            fit_tucker(random_table(150, d, 6), {.shape = shape, .ranks = ranks}));
        check_export({"tucker-" + std::to_string(shape.size()) + "-modes", e, e->parameter_count() * 4});
    }
}

// --- fourier -----------------------------------------------------------------------

FourierParams random_params(FourierMlp mlp, int64_t V, int64_t d, bool norm, int64_t h = 5)
{
    torch::manual_seed(11);
    FourierParams p;
    p.mlp = mlp;
    p.vocab = V;
    p.dim = d;
    p.norm = norm;
    if (mlp == FourierMlp::Linear) {
        p.w_in = 0.3 * torch::randn({d, d});
        p.b_in = 0.1 * torch::randn({d});
    } else {
        p.hidden = h;
        p.w_in = 0.3 * torch::randn({2 * h, d});
        p.b_in = 0.1 * torch::randn({2 * h});
        p.w_out = 0.3 * torch::randn({d, h});
        p.b_out = 0.1 * torch::randn({d});
    }
    if (norm)
        p.norm_weight = 1 + 0.1 * torch::randn({d});
    return p;
}

TEST(OnnxEmbedding, Fourier)
{
    for (const auto mlp : {FourierMlp::Linear, FourierMlp::GeGLU})
        for (const bool norm : {false, true})
            for (const int64_t d : {24, 15}) {
                const auto e = std::make_shared<FourierTokenEmbedding>(random_params(mlp, 5000, d, norm));
                check_export({std::string("fourier-") + fourier_mlp_name(mlp) + (norm ? "-norm-" : "-") +
                                  std::to_string(d),
                              e, e->parameter_count() * 4});
            }
    // A fitted one.
    const auto table = random_table(400, 16);
    const auto fit = fit_fourier_embedding(
        table, {.mlp = FourierMlp::GeGLU, .norm = true, .steps = 30, .lr = 1e-2, .batch = 128, .seed = 1});
    const auto e = std::make_shared<FourierTokenEmbedding>(fit.params);
    check_export({"fourier-fitted", e, e->parameter_count() * 4});
}

// --- additive quantisation ---------------------------------------------------------

Case aq_case(const std::string& name, const torch::Tensor& codes, const torch::Tensor& codebooks)
{
    auto e = std::make_shared<AdditiveQuantisedTokenEmbedding>(codes, codebooks);
    const int64_t K = codebooks.size(1);
    return {name, e, codebooks.numel() * 4 + pack_aq_codes(codes, K).numel()}; // codes packed to log2 K bits
}

TEST(OnnxEmbedding, AdditiveQuantisation)
{
    const int64_t V = 700, d = 16;
    torch::manual_seed(13);
    for (const auto& [M, K] :
         std::vector<std::pair<int64_t, int64_t>>{{4, 8}, {5, 16}, {3, 256}, {7, 2}, {6, 32}}) {
        const auto codes = torch::randint(K, {V, M}, torch::kLong).to(torch::kUInt8);
        check_export(
            aq_case("aq-" + std::to_string(M) + "x" + std::to_string(K), codes, torch::randn({M, K, d})));
    }
    const auto fit = fit_additive_quantisation(
        random_table(V, d), {.codebooks = 4, .codewords = 16, .steps = 20, .batch = 128, .seed = 2});
    check_export(aq_case("aq-fitted", fit.codes, fit.codebooks));
}

// --- quant -------------------------------------------------------------------------

// N(0, 0.02) rows and the corners: a zero row, tiny values, an outlier, one-signed rows.
torch::Tensor awkward_table(int64_t V, int64_t d)
{
    torch::manual_seed(3);
    auto t = 0.02 * torch::randn({V, d});
    t[0].zero_();
    t[1] *= 1e-6;
    t[2][5] = 3.0;
    t[3] = -t[3].abs();
    t[4] = t[4].abs();
    t[5].fill_(0.5);
    return t.contiguous();
}

TEST(OnnxEmbedding, QuantEveryType)
{
    const auto table = awkward_table(64, 512);
    for (const char* type :
         {"f16", "bf16", "q8_0", "q6_k", "q5_k", "q5_1", "q5_0", "q4_k", "q4_1", "q4_0", "q3_k", "q2_k"}) {
        const auto e = quantise_table(table, type);
        // Dequantised with the same float32 operations: the rows equal bit for bit.
        check_export({std::string("quant-") + type, e, e->blocks().numel(), 0.0});
    }
}

} // namespace
} // namespace embedlab
