// Additive quantisation (issue 38 part 3, Shu and Nakayama 2017): the packed codes,
// the fit (seeded, cancellable, its loss falling), lookup as the sum of codewords, the
// paper's code size in the accounting, a run through the experiment API reloaded from
// its export, and on tinyllama the LLE paper's Table 9 comparison: aq's rare rows
// against the <unk> baseline's on the same frequency split.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "embedlab/accounting.hpp"
#include "embedlab/additive_quantisation.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/model.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/resources.hpp"
#include "test_support.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

torch::Tensor clustered_table(int64_t V, int64_t d)
{
    // Rows near a few centres: what a sum of codewords can rebuild well.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    const auto centres = torch::randn({8, d}, gen);
    const auto which = torch::randint(8, {V}, gen, torch::kLong);
    return centres.index_select(0, which) + 0.05 * torch::randn({V, d}, gen);
}

double mean_cosine(const torch::Tensor& a, const torch::Tensor& b)
{
    return torch::cosine_similarity(a, b, 1, 1e-12).mean().item<double>();
}

} // namespace

TEST(AdditiveQuantisation, CodesPackToLog2KBitsAndBack)
{
    auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
    for (const auto& [M, K, bytes] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {32, 16, 16}, {5, 8, 2}, {3, 256, 3}, {7, 2, 1}}) {
        const auto codes = torch::randint(K, {40, M}, gen, torch::kLong).to(torch::kUInt8);
        const auto packed = pack_aq_codes(codes, K);
        EXPECT_EQ(packed.sizes().vec(), (std::vector<int64_t>{40, bytes})) << M << " x " << K;
        EXPECT_TRUE(torch::equal(unpack_aq_codes(packed, M, K), codes)) << M << " x " << K;
    }
    // Little-endian within the row: the first code's bits are the first byte's low bits.
    const auto one = torch::tensor({{3, 1}}, torch::kUInt8);
    EXPECT_EQ(pack_aq_codes(one, 16)[0][0].item<int>(), 3 + (1 << 4));
}

TEST(AdditiveQuantisation, FitIsSeededCancellableAndItsRowsAreSumsOfCodewords)
{
    const auto table = clustered_table(300, 24);
    const AqOptions o{.codebooks = 4, .codewords = 8, .steps = 150, .lr = 1e-2, .batch = 128, .seed = 5};
    const auto fit = fit_additive_quantisation(table, o);
    ASSERT_EQ(fit.loss_curve.size(), 150u);
    EXPECT_LT(fit.loss_curve.back(), 0.5 * fit.loss_curve.front()) << "the code learner learns";
    EXPECT_EQ(fit.codes.sizes().vec(), (std::vector<int64_t>{300, 4}));
    EXPECT_LT(fit.codes.max().item<int>(), 8);
    EXPECT_EQ(fit.codebooks.sizes().vec(), (std::vector<int64_t>{4, 8, 24}));
    const auto again = fit_additive_quantisation(table, o);
    EXPECT_TRUE(torch::equal(again.codes, fit.codes));
    EXPECT_TRUE(torch::equal(again.codebooks, fit.codebooks));

    const AdditiveQuantisedTokenEmbedding e(fit.codes, fit.codebooks);
    const auto ids = torch::tensor({0, 7, 299}, torch::kLong);
    auto want = torch::zeros({3, 24});
    for (int i = 0; i < 3; ++i)
        for (int m = 0; m < 4; ++m)
            want[i] += fit.codebooks[m][fit.codes[ids[i].item<int64_t>()][m].item<int64_t>()];
    EXPECT_TRUE(torch::allclose(e.lookup(ids), want, 1e-6, 1e-6));
    EXPECT_EQ(e.parameter_count(), 4 * 8 * 24 + 300 * 4);
    const auto hidden = torch::randn({2, 24});
    EXPECT_TRUE(torch::allclose(e.project(hidden), torch::matmul(hidden, e.rebuilt_rows().t()), 1e-5, 1e-5));
    EXPECT_GT(mean_cosine(e.rebuilt_rows(), table), 0.9) << "clustered rows are rebuilt closely";

    int calls = 0;
    EXPECT_THROW(fit_additive_quantisation(table, o, [&](int64_t, int64_t) { return ++calls < 3; }),
                 Cancelled);
    EXPECT_EQ(calls, 3);
    for (const auto& [bad, needle] : std::vector<std::pair<AqOptions, std::string>>{
             {{.codewords = 12, .steps = 1}, "power of two in 2..256, got 12"},
             {{.codebooks = 0, .steps = 1}, "codebooks (M) must lie in 1..1024, got 0"},
             {{.steps = 0}, "steps must be at least 1"}}) {
        const auto message = test::input_error_of([&] { fit_additive_quantisation(table, bad); }, "no error");
        EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
    const auto codes_too_large = test::input_error_of(
        [&] { AdditiveQuantisedTokenEmbedding(fit.codes.clone().fill_(9), fit.codebooks); }, "no error");
    EXPECT_NE(codes_too_large.find("below K = 8, found 9"), std::string::npos) << codes_too_large;
}

// The paper's setting, M = 32 and K = 16, stores 128 bits of codes a token.
TEST(AdditiveQuantisation, TheAccountingHasThePapersCodeSize)
{
    const auto a = account_aq(32000, 64, 32, 16);
    EXPECT_EQ(a.aq_code_bits_per_token, 128);
    EXPECT_EQ(a.index_values, 32000 * 32);
    EXPECT_EQ(a.index_bytes, 32000 * 16);
    EXPECT_EQ(a.params_after, 32 * 16 * 64 + 32000 * 32);
    EXPECT_THROW(account_aq(32000, 64, 32, 12), InputError);
}

// A run through the experiment API and its export: the directory reloads to the same
// rows, and stores the codes packed at the bytes the accounting counts.
TEST(AdditiveQuantisation, ARunExportsAndReloadsToTheSameRows)
{
    test::TempDir dir;
    const CompressionRequest r{
        .model = default_model_path().string(), .method = "aq", .steps = 30, .codebooks = 8, .codewords = 16};
    const auto run = run_compression(r);
    EXPECT_EQ(run.summary.parameters, "M 8, K 16, 30 steps");
    const auto manifest = export_run(run, dir / "aq");
    EXPECT_EQ(manifest["factor_tensors"]["wte.aq.codes"], (std::vector<int64_t>{50257, 4}));
    EXPECT_EQ(manifest["accounting"]["code_bits_per_token"], 32);
    auto back = load_model(dir / "aq");
    const auto ids = torch::arange(0, 50257, 13, torch::kLong);
    EXPECT_TRUE(
        torch::equal(back.model->token_embedding().lookup(ids), run.embedding->embedding->lookup(ids)));
}

// The LLE paper's Table 9 on tinyllama: the cosine of the rebuilt rare rows (keep ratio
// 0.5 of the frequency text's vocabulary) for aq at the paper's M = 32, K = 16 and for
// the <unk> baseline (every rare row the <unk> row) on the same split.
TEST(AdditiveQuantisation, BeatsTheUnkBaselineOnRareRowsOfTinyllama)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto model = (test::shared_dir() / "models/tinyllama").string();
    const auto text = (test::shared_dir() / "data/tinystories-heldout.txt").string();
    const auto unk =
        run_compression({.model = model, .method = "lle-unk", .freq_text = text, .keep_ratio = 0.5});
    const auto* partial = dynamic_cast<const PartialSparseTokenEmbedding*>(unk.embedding->embedding.get());
    ASSERT_NE(partial, nullptr);
    const int64_t V = partial->vocab_size();
    auto is_rare = torch::ones({V}, torch::kBool);
    is_rare.index_fill_(0, partial->fit().common_ids.to(torch::kLong), false);
    const auto rare = is_rare.nonzero().flatten();
    ASSERT_GT(rare.numel(), 1000);
    const auto table = load_model(model).model->token_embedding().lookup(rare);

    const auto aq =
        run_compression({.model = model, .method = "aq", .steps = 300, .lr = 3e-3, .fit_batch = 2048});
    const double aq_cosine = mean_cosine(aq.embedding->embedding->lookup(rare), table);
    const double unk_cosine = mean_cosine(partial->lookup(rare), table);
    RecordProperty("aq_rare_cosine", std::to_string(aq_cosine));
    RecordProperty("unk_rare_cosine", std::to_string(unk_cosine));
    EXPECT_GT(aq_cosine, unk_cosine + 0.2) << "aq " << aq_cosine << ", unk " << unk_cosine;
    EXPECT_EQ(aq.embedding->accounting.aq_code_bits_per_token, 128) << "the paper's 128 bits a token";
}
