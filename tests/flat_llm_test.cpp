// FLAT-LLM (METHODS 3): IPRS, window sampling, the truncation theorem, the
// absorption into W_v/W_o, Nystrom MLPs, and the saved directory.
#include <gtest/gtest.h>

#include <numeric>

#include "embedlab/experiment_request.hpp"
#include "embedlab/flat_llm.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;

namespace {

double sum(const std::vector<double>& v)
{
    return std::accumulate(v.begin(), v.end(), 0.0);
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed = 3)
{
    torch::manual_seed(seed);
    auto t = torch::randint(0, vocab, {n}, torch::kLong);
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i)
        ids.push_back(static_cast<int32_t>(t[i].item<int64_t>()));
    return ids;
}

// Captures one layer's value outputs.
struct ValueCapture final : ForwardObserver {
    int64_t layer = 0;
    torch::Tensor v;
    void values(int64_t l, const torch::Tensor& x) override
    {
        if (l == layer)
            v = x.clone();
    }
};

double max_relative(const torch::Tensor& a, const torch::Tensor& b)
{
    return ((a - b).abs().max() / b.abs().max()).item<double>();
}

// Every weight of two models equal to float64 round-off (the MLP covariances summed
// in groups of layers are the same sums as in one pass).
void expect_same_weights(const LanguageModel& a, const LanguageModel& b, const std::string& what)
{
    ASSERT_EQ(a.weights().size(), b.weights().size()) << what;
    for (const auto& [name, t] : a.weights()) {
        const auto& u = b.weights().at(name);
        ASSERT_EQ(t.sizes(), u.sizes()) << what << ": " << name;
        EXPECT_TRUE(torch::allclose(t, u, /*rtol=*/1e-6, /*atol=*/1e-9)) << what << ": " << name;
    }
    EXPECT_EQ(a.config().mlp_widths, b.config().mlp_widths) << what;
    EXPECT_EQ(a.config().value_head_dims, b.config().value_head_dims) << what;
}

// Records progress reports; false (cancel) once `cancel_after` windows are done.
struct ProgressLog {
    std::vector<std::pair<int64_t, int64_t>> calls;
    int64_t cancel_after = -1;
    ProgressFn fn()
    {
        return [this](int64_t done, int64_t total) {
            calls.emplace_back(done, total);
            return cancel_after < 0 || done <= cancel_after;
        };
    }
};

} // namespace

TEST(Iprs, WorkedExampleClipsAndRedistributes)
{
    // B = 4 * 0.5 = 2; proportional gives 1.25 to the last layer: clipped to 1,
    // the remaining budget 1 is shared by the three equal layers.
    const auto w = iprs_allocation({1, 1, 1, 5}, 0.5);
    ASSERT_EQ(w.size(), 4u);
    EXPECT_DOUBLE_EQ(w[3], 1.0);
    for (int i = 0; i < 3; ++i)
        EXPECT_NEAR(w[i], 1.0 / 3.0, 1e-15);
}

TEST(Iprs, BudgetBoundsAndProportionality)
{
    const std::vector<double> t{0.05, 0.31, 0.12, 0.02, 0.4, 0.09, 0.2, 0.07};
    for (double remaining : {1e-6, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999999, 1.0}) {
        const auto w = iprs_allocation(t, remaining);
        EXPECT_NEAR(sum(w), t.size() * remaining, 1e-12) << remaining;
        double ratio = -1; // w / t, equal wherever w is not clipped
        for (size_t l = 0; l < t.size(); ++l) {
            EXPECT_GE(w[l], 0.0);
            EXPECT_LE(w[l], 1.0);
            if (w[l] < 1.0) {
                if (ratio < 0)
                    ratio = w[l] / t[l];
                EXPECT_NEAR(w[l] / t[l], ratio, 1e-9 * ratio) << "layer " << l << " at " << remaining;
            }
        }
        // A clipped layer never scores lower than an unclipped one.
        for (size_t a = 0; a < t.size(); ++a)
            for (size_t b = 0; b < t.size(); ++b)
                if (w[a] == 1.0 && w[b] < 1.0) {
                    EXPECT_GE(t[a], t[b]);
                }
    }
}

TEST(Iprs, EdgeCases)
{
    for (double x : iprs_allocation({0.2, 0.2, 0.2}, 0.4))
        EXPECT_NEAR(x, 0.4, 1e-15); // all equal: uniform
    for (double x : iprs_allocation({0.3, 0.1, 0.9}, 1.0))
        EXPECT_DOUBLE_EQ(x, 1.0); // s = 0 keeps everything
    const auto dom = iprs_allocation({100, 1, 1, 1}, 0.5);
    EXPECT_DOUBLE_EQ(dom[0], 1.0);
    EXPECT_NEAR(dom[1], 1.0 / 3.0, 1e-15);
    for (double x : iprs_allocation({0, 0, 0, 0}, 0.25))
        EXPECT_DOUBLE_EQ(x, 0.25);                       // no information: the budget in equal parts
    const auto zero_one = iprs_allocation({0, 1}, 0.75); // B = 1.5: 1 clipped, 0.5 to the zero layer
    EXPECT_DOUBLE_EQ(zero_one[1], 1.0);
    EXPECT_DOUBLE_EQ(zero_one[0], 0.5);
    EXPECT_TRUE(iprs_allocation({}, 0.5).empty());
}

TEST(Iprs, RefusesBadInput)
{
    for (double r : {0.0, -0.1, 1.0001, std::nan("")})
        EXPECT_THROW(iprs_allocation({1, 2}, r), InputError) << r;
    EXPECT_THROW(iprs_allocation({1, -2}, 0.5), InputError);
    EXPECT_THROW(iprs_allocation({1, std::nan("")}, 0.5), InputError);
    EXPECT_THROW(uniform_allocation(3, 0.0), InputError);
}

TEST(Iprs, RanksPerLayer)
{
    EXPECT_EQ(ranks_from_ratios({0.5, 1.0, 0.01, 1.0 / 3.0, 0.7}, 32),
              (std::vector<int64_t>{16, 32, 1, 10, 22}));
    EXPECT_EQ(rank_allocation_name(parse_rank_allocation("uniform")), std::string("uniform"));
    EXPECT_THROW(parse_rank_allocation("greedy"), InputError);
}

TEST(CalibrationWindows, DistinctSeededAndBounded)
{
    const auto a = calibration_window_starts(1000, 50, 100, 42);
    ASSERT_EQ(a.size(), 50u);
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
    EXPECT_EQ(std::adjacent_find(a.begin(), a.end()), a.end());
    EXPECT_GE(a.front(), 0);
    EXPECT_LE(a.back(), 900);
    EXPECT_EQ(a, calibration_window_starts(1000, 50, 100, 42));
    EXPECT_NE(a, calibration_window_starts(1000, 50, 100, 43));
    // Every window: all starts.
    const auto all = calibration_window_starts(20, 11, 10, 1);
    for (int64_t i = 0; i < 11; ++i)
        EXPECT_EQ(all[static_cast<size_t>(i)], i);
    try {
        calibration_window_starts(20, 12, 10, 1);
        FAIL() << "12 windows of 10 from 20 tokens";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("only 11 distinct windows"), std::string::npos) << e.what();
    }
    EXPECT_THROW(calibration_window_starts(5, 1, 10, 1), InputError);
    EXPECT_THROW(calibration_window_starts(50, 0, 10, 1), InputError);
}

TEST(FlatTheorem, TruncationErrorEqualsDroppedEigenvalues)
{
    torch::manual_seed(5);
    // Correlated values, as real heads have: a low-rank part plus noise.
    const auto Y =
        torch::matmul(torch::randn({300, 6}, torch::kFloat64), torch::randn({6, 16}, torch::kFloat64)) +
        0.1 * torch::randn({300, 16}, torch::kFloat64);
    const auto basis = eigen_basis(torch::matmul(Y.t(), Y));
    ASSERT_TRUE(
        (basis.eigenvalues.narrow(0, 0, 15) >= basis.eigenvalues.narrow(0, 1, 15)).all().item<bool>());
    for (int64_t r : {1, 3, 6, 10, 16}) {
        const auto Q = basis.eigenvectors.narrow(1, 0, r);
        const double err = (Y - Y.matmul(Q).matmul(Q.t())).pow(2).sum().item<double>();
        const double dropped = basis.eigenvalues.narrow(0, r, 16 - r).sum().item<double>();
        EXPECT_NEAR(err, dropped, 1e-9 * basis.eigenvalues.sum().item<double>()) << "rank " << r;
    }
}

class FlatTiny : public ::testing::TestWithParam<Architecture> {};

TEST_P(FlatTiny, FullRankIsExactAndValuesProjectOntoTheBasis)
{
    const auto c = test::tiny_config(GetParam());
    LanguageModel model(c, test::random_weights(c), "tiny");
    const auto ids = random_ids(400, c.vocab_size);
    const auto cal = calibrate(model, ids, {.samples = 12, .seqlen = 16, .seed = 1, .mlp = true, .batch = 5});
    ASSERT_EQ(cal.layers.size(), 2u);
    EXPECT_EQ(cal.tokens, 12 * 16);
    for (const auto& l : cal.layers) {
        EXPECT_GT(l.importance, 0.0);
        EXPECT_LE(l.importance, 0.5);
        // arccos is concave on [0, 1]: the paper's angle of the mean cosine is at
        // least the reference code's mean angle (Jensen), and both are angles / pi.
        EXPECT_GE(l.importance_eq9 + 1e-12, l.importance);
        EXPECT_LE(l.importance_eq9, 0.5);
        EXPECT_EQ(static_cast<int64_t>(l.value_covariance.size()), c.num_kv_heads);
    }
    const auto window = torch::tensor({{3, 14, 15, 9, 26, 5, 35, 8}}, torch::kLong);
    const auto reference = model.logits(window);

    // Remaining 1: the full orthonormal basis, absorbed exactly (MLP too: C_SS^-1 C_S: = I).
    for (bool mlp : {false, true}) {
        const auto full = flat_compress(model, cal, {.remaining = 1.0, .mlp = mlp});
        EXPECT_LT(max_relative(full.model->logits(window), reference), 1e-5) << "mlp " << mlp;
        EXPECT_EQ(full.after.total(), full.before.total());
    }

    // Remaining 0.5: layer 0 sees the same input, so its values are exactly the
    // original values in the kept basis.
    const auto half = flat_compress(model, cal, {.remaining = 0.5, .allocation = RankAllocation::Uniform});
    const int64_t r = half.layers[0].rank, hd = c.head_dim();
    EXPECT_EQ(r, hd / 2);
    ValueCapture before, after;
    model.hidden_states(window, &before);
    half.model->hidden_states(window, &after);
    ASSERT_EQ(after.v.size(3), r);
    for (int64_t g = 0; g < c.num_kv_heads; ++g) {
        const auto Q =
            eigen_basis(cal.layers[0].value_covariance[static_cast<size_t>(g)]).eigenvectors.narrow(1, 0, r);
        const auto projected = torch::matmul(before.v.select(2, g).to(torch::kFloat64), Q);
        EXPECT_LT(max_relative(after.v.select(2, g).to(torch::kFloat64), projected), 1e-5) << "head " << g;
    }
    // Parameters: v and o lose (hd - r) per head in each layer.
    const int64_t per_layer = (c.num_kv_heads + c.num_heads) * (hd - r) * c.hidden_size +
                              (GetParam() == Architecture::GPT2 ? c.num_heads * (hd - r) : 0);
    EXPECT_EQ(half.before.attention - half.after.attention, c.num_layers * per_layer);
    EXPECT_GT(half.layers[0].dropped_share, 0.0);
    EXPECT_LT(half.layers[0].dropped_share, 1.0);
}

TEST_P(FlatTiny, RefusesWhatItCannotDo)
{
    const auto c = test::tiny_config(GetParam());
    LanguageModel model(c, test::random_weights(c), "tiny");
    const auto ids = random_ids(100, c.vocab_size);
    EXPECT_THROW(calibrate(model, ids, {.samples = 2, .seqlen = 33}), InputError); // context is 32
    EXPECT_THROW(calibrate(model, ids, {.samples = 90, .seqlen = 16}), InputError);
    const auto cal = calibrate(model, ids, {.samples = 4, .seqlen = 8});
    EXPECT_THROW(flat_compress(model, cal, {.remaining = 0.0}), InputError);
    EXPECT_THROW(flat_compress(model, cal, {.remaining = 1.5}), InputError);
    // Parallel calibration takes the MLP covariances from the calibration, which has none
    // (sequential sums its own, layer by layer).
    EXPECT_THROW(
        flat_compress(model, cal, {.remaining = 0.5, .mlp = true, .calibration = FlatCalibration::Parallel}),
        InputError);
    const auto flat = flat_compress(model, cal, {.remaining = 0.5});
    EXPECT_THROW(flat_compress(*flat.model, cal, {.remaining = 0.5}), InputError); // already flat

    // Issue 20, item 6: 8 calibration tokens cannot determine the covariance of
    // 12 or 32 kept MLP channels; refused by layer instead of solved into huge weights.
    const auto few = calibrate(model, ids, {.samples = 2, .seqlen = 4, .mlp = true});
    try {
        flat_compress(model, few, {.remaining = 0.5, .allocation = RankAllocation::Uniform, .mlp = true});
        ADD_FAILURE() << "a singular MLP covariance was solved";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("layer 0: the MLP covariance"), std::string::npos) << msg;
        EXPECT_NE(msg.find("calibration of 8 tokens"), std::string::npos) << msg;
    }
    // Enough tokens: the same request gives finite, modest weights.
    const auto many =
        calibrate(model, random_ids(400, c.vocab_size), {.samples = 12, .seqlen = 16, .mlp = true});
    const auto mlp =
        flat_compress(model, many, {.remaining = 0.5, .allocation = RankAllocation::Uniform, .mlp = true});
    const auto logits = mlp.model->logits(torch::tensor({{3, 14, 15, 9}}, torch::kLong));
    EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
}

// Issue 20 item 7: the MLP covariances summed and consumed in groups of layers within
// a memory budget give the same model as all of them from the calibration pass.
TEST_P(FlatTiny, MlpCovarianceGroupsWithinTheBudgetGiveTheSameModel)
{
    auto c = test::tiny_config(GetParam());
    c.num_layers = 3;
    LanguageModel model(c, test::random_weights(c), "tiny");
    const auto ids = random_ids(400, c.vocab_size);
    const int64_t layer_bytes = c.intermediate_size * c.intermediate_size * 8;
    const CalibrationOptions base{.samples = 12, .seqlen = 16, .seed = 1, .mlp = true, .batch = 5};
    const auto all = calibrate(model, ids, base); // the default budget: one pass
    for (const auto& l : all.layers)
        EXPECT_TRUE(l.mlp_covariance.defined());
    // Parallel: the MLP covariances of the calibration (sequential sums its own per layer).
    const FlatOptions options{.remaining = 0.5, .mlp = true, .calibration = FlatCalibration::Parallel};
    const auto reference = flat_compress(model, all, options);
    EXPECT_EQ(reference.mlp_calibration_passes, 1);
    EXPECT_EQ(reference.mlp_covariance_peak_bytes, 3 * layer_bytes);

    // A budget below one layer: one layer per group; two layers' worth: {0, 1}, {2}.
    for (const auto& [budget, passes] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {2 * layer_bytes, 2}}) {
        auto grouped_options = base;
        grouped_options.mlp_covariance_budget = budget;
        const auto grouped = calibrate(model, ids, grouped_options);
        for (size_t l = 0; l < grouped.layers.size(); ++l) {
            EXPECT_FALSE(grouped.layers[l].mlp_covariance.defined()); // none held by the calibration
            EXPECT_EQ(grouped.layers[l].importance, all.layers[l].importance);
            EXPECT_TRUE(
                torch::equal(grouped.layers[l].value_covariance[0], all.layers[l].value_covariance[0]));
        }
        ProgressLog log;
        const auto flat = flat_compress(model, grouped, options, log.fn());
        const std::string what = "budget " + std::to_string(budget);
        EXPECT_EQ(flat.mlp_calibration_passes, passes) << what;
        EXPECT_GT(flat.mlp_calibration_passes, 1) << what;
        EXPECT_EQ(flat.mlp_covariance_peak_bytes, (passes == 3 ? 1 : 2) * layer_bytes) << what;
        expect_same_weights(*flat.model, *reference.model, what);
        for (size_t l = 0; l < flat.layers.size(); ++l)
            EXPECT_NEAR(flat.layers[l].mlp_leverage_kept, reference.layers[l].mlp_leverage_kept, 1e-12);
        // Progress: windows over every pass, never going back, ending at the total.
        ASSERT_FALSE(log.calls.empty());
        for (size_t i = 0; i < log.calls.size(); ++i) {
            EXPECT_EQ(log.calls[i].second, passes * base.samples) << what;
            if (i > 0) {
                EXPECT_GE(log.calls[i].first, log.calls[i - 1].first) << what;
            }
        }
        EXPECT_EQ(log.calls.back().first, passes * base.samples) << what;

        // Cancelling in the second pass stops the compression.
        ProgressLog cancel{.cancel_after = base.samples + 1};
        EXPECT_THROW(flat_compress(model, grouped, options, cancel.fn()), Cancelled) << what;
        EXPECT_LE(cancel.calls.back().first, 2 * base.samples) << what;
    }
    // Without --mlp the budget changes nothing and no pass runs (parallel: sequential
    // runs its value passes whatever the budget).
    auto small = base;
    small.mlp_covariance_budget = 1;
    ProgressLog none;
    const auto attention_only =
        flat_compress(model, calibrate(model, ids, small),
                      {.remaining = 0.5, .calibration = FlatCalibration::Parallel}, none.fn());
    EXPECT_EQ(attention_only.mlp_calibration_passes, 0);
    EXPECT_TRUE(none.calls.empty());
    small.mlp_covariance_budget = 0;
    EXPECT_THROW(calibrate(model, ids, small), InputError);
}

INSTANTIATE_TEST_SUITE_P(Arch, FlatTiny, ::testing::Values(Architecture::GPT2, Architecture::Llama),
                         [](const auto& info) { return std::string(architecture_name(info.param)); });

// compute_rank.py: r = (target (3 dmlp + dq + dk + dv + do) - (dq + dk)) / (3 dmlp + dv + do),
// with its Llama-2-7B and Mistral-7B (grouped-query) sizes.
TEST(FlatTarget, RemainingFollowsComputeRank)
{
    ModelConfig c;
    c.arch = Architecture::Llama;
    c.hidden_size = 4096;
    c.num_layers = 32;
    c.num_heads = 32;
    c.num_kv_heads = 32;
    c.intermediate_size = 11008;
    const double dq = 4096.0 * 4096, dmlp = 4096.0 * 11008;
    for (double target : {0.9, 0.8, 0.6}) {
        const double r = (target * (3 * dmlp + 4 * dq) - 2 * dq) / (3 * dmlp + 2 * dq);
        EXPECT_NEAR(remaining_for_target(c, target, true), r, 1e-12) << target;
    }
    c.num_kv_heads = 8; // Mistral-7B: dk = dv = 4096 x 1024
    c.intermediate_size = 14336;
    const double dk = 4096.0 * 1024, dmlp_m = 4096.0 * 14336;
    const double r = (0.7 * (3 * dmlp_m + 2 * dq + 2 * dk) - (dq + dk)) / (3 * dmlp_m + dq + dk);
    EXPECT_NEAR(remaining_for_target(c, 0.7, true), r, 1e-12);
    // Without the MLP only V and O shrink: 0.7 of the decoder is out of reach.
    const double no_mlp = (0.95 * (3 * dmlp_m + 2 * dq + 2 * dk) - (dq + dk) - 3 * dmlp_m) / (dq + dk);
    EXPECT_NEAR(remaining_for_target(c, 0.95, false), no_mlp, 1e-12);
    try {
        remaining_for_target(c, 0.7, false);
        FAIL() << "an unreachable target was accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("reachable targets lie in (0.903846, 1]"), std::string::npos)
            << e.what();
    }
    EXPECT_DOUBLE_EQ(remaining_for_target(c, 1.0, false), 1.0);
    EXPECT_THROW(remaining_for_target(c, 0.0, true), InputError);
    EXPECT_THROW(remaining_for_target(c, 1.5, true), InputError);
}

TEST(FlatConfig, LayerDimsAreChecked)
{
    auto c = test::tiny_config(Architecture::Llama);
    auto weights = test::random_weights(c);
    c.value_head_dims = {4, 4, 4}; // three entries for two layers
    try {
        LanguageModel m(c, weights, "tiny");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("value_head_dims lists 3 layers"), std::string::npos)
            << e.what();
    }
    c.value_head_dims = {4, 5}; // head_dim is 4
    EXPECT_THROW(LanguageModel(c, weights, "tiny"), InputError);
    c.value_head_dims = {2, 4}; // tensors still at 4
    try {
        LanguageModel m(c, weights, "tiny");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("v_proj.weight' has shape [8, 16], expected [4, 16]"),
                  std::string::npos)
            << e.what();
    }
}

// The bundled tinyllama (4 layers, d_int 352): one layer per pass and a single pass
// give the same compressed model, and the manifest records the passes.
TEST(FlatMlpGroups, TinyllamaOneLayerPerPassMatchesOnePass)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto lm = load_model(test::shared_dir() / "models/tinyllama");
    const auto& model = *lm.model;
    const auto text = test::read_text(test::shared_dir() / "data/tinystories-heldout.txt").substr(0, 20000);
    const auto ids = lm.tokenizer->encode(text);
    CalibrationOptions options{.samples = 16, .seqlen = 64, .mlp = true};
    const auto one_pass = calibrate(model, ids, options);
    options.mlp_covariance_budget = 1;
    const auto by_layer = calibrate(model, ids, options);
    // Parallel: the MLP covariances of the calibration pass (sequential sums its own per layer).
    const FlatOptions flat_options{.remaining = 0.6, .mlp = true, .calibration = FlatCalibration::Parallel};
    const auto a = flat_compress(model, one_pass, flat_options);
    const auto b = flat_compress(model, by_layer, flat_options);
    EXPECT_EQ(a.mlp_calibration_passes, 1);
    EXPECT_EQ(b.mlp_calibration_passes, model.config().num_layers);
    EXPECT_EQ(a.mlp_covariance_peak_bytes, 4 * 352 * 352 * 8);
    EXPECT_EQ(b.mlp_covariance_peak_bytes, 352 * 352 * 8);
    expect_same_weights(*b.model, *a.model, "tinyllama");
    const auto window = torch::tensor({{1, 450, 2217, 29871, 338, 263}}, torch::kLong);
    EXPECT_TRUE(torch::allclose(b.model->logits(window), a.model->logits(window), 1e-6, 1e-6));

    test::TempDir dir;
    const auto manifest = save_flat_model(lm, b, by_layer, dir / "flat");
    EXPECT_EQ(manifest["calibration"]["mlp_passes"], 4);
    EXPECT_EQ(manifest["calibration"]["mlp_covariance_budget"], 1);
    EXPECT_EQ(manifest["calibration"]["mlp_covariance_peak_bytes"], 352 * 352 * 8);
}

// Issue 36 item 5: the guard before the Nystrom solve estimates C_SS's condition
// number from its eigenvalues. The Cholesky diagonal's (max / min)^2 it used is a
// lower bound: for this 200 x 200 matrix of condition 1e14 it is far below the 1e12
// limit, so the solve ran and wrote ~1e14-amplified noise into W_down.
TEST(FlatNystrom, NearSingularKeptCovarianceIsRefused)
{
    const int64_t n = 200;
    torch::manual_seed(36);
    const auto Q = std::get<0>(torch::linalg_qr(torch::randn({n, n}, torch::kFloat64)));
    const auto lam = torch::logspace(4, -10, n, 10, torch::kFloat64); // condition 1e14
    const auto A = torch::matmul(Q * lam.unsqueeze(0), Q.t());
    const auto C_SS = (A + A.t()) / 2;
    // One more, nearly dead channel (leverage ~1e-20), so the 200 above are the ones kept.
    auto C = torch::zeros({n + 1, n + 1}, torch::kFloat64);
    C.narrow(0, 0, n).narrow(1, 0, n).copy_(C_SS);
    C[n][n] = 1e-20;
    const auto [L, info] = torch::linalg_cholesky_ex(C_SS);
    ASSERT_EQ(info.item<int64_t>(), 0); // positive definite as far as Cholesky can tell
    const double diag_bound = (L.diagonal().max() / L.diagonal().min()).pow(2).item<double>();
    EXPECT_LT(diag_bound, kNystromMaxCondition) << "the old estimate would have let it pass";
    const auto eig = torch::linalg_eigvalsh(C_SS);
    EXPECT_GT((eig[-1] / eig[0]).item<double>(), 1e13);
    RecordProperty("cholesky_diagonal_estimate", std::to_string(diag_bound));
    RecordProperty("eigenvalue_condition", std::to_string((eig[-1] / eig[0]).item<double>()));
    try {
        nystrom_selection(C, n, 1.0, "layer 3", 4096);
        ADD_FAILURE() << "a covariance of condition 1e14 was solved";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("layer 3: the MLP covariance of the 200 kept channels"), std::string::npos) << msg;
        EXPECT_NE(msg.find("condition number"), std::string::npos) << msg;
    }
    // Well conditioned (1e6): solved, the kept channels' condition reported, and the
    // map reproduces the kept channels exactly (C_SS^-1 C_SS = I on S).
    const auto good_lam = torch::logspace(4, -2, n, 10, torch::kFloat64);
    auto G = torch::zeros({n + 1, n + 1}, torch::kFloat64);
    G.narrow(0, 0, n).narrow(1, 0, n).copy_(torch::matmul(Q * good_lam.unsqueeze(0), Q.t()));
    G[n][n] = 1e-20;
    G = (G + G.t()) / 2;
    const auto sel = nystrom_selection(G, n, 1.0, "layer 0", 4096);
    EXPECT_EQ(sel.keep.numel(), n);
    EXPECT_EQ(sel.keep[-1].item<int64_t>(), n - 1); // the dead channel is the one dropped
    EXPECT_NEAR(sel.condition, 1e6, 1e3);
    EXPECT_TRUE(torch::allclose(sel.projection.narrow(1, 0, n), torch::eye(n, torch::kFloat64), 1e-6, 1e-6));
}

namespace {

// Sums each KV head's value Gram matrix of `layer` over the calibration windows.
struct ValueGram final : ForwardObserver {
    int64_t layer = 0;
    std::vector<torch::Tensor> gram;
    void values(int64_t l, const torch::Tensor& v) override
    {
        if (l != layer)
            return;
        const auto y = v.reshape({-1, v.size(2), v.size(3)}).to(torch::kFloat64).transpose(0, 1);
        const auto c = torch::bmm(y.transpose(1, 2), y);
        if (gram.empty())
            for (int64_t h = 0; h < c.size(0); ++h)
                gram.push_back(torch::zeros_like(c[h]));
        for (size_t h = 0; h < gram.size(); ++h)
            gram[h] += c[static_cast<int64_t>(h)];
    }
};

// Largest off-diagonal entry over the largest diagonal one.
double off_diagonal(const torch::Tensor& g)
{
    const auto diag = torch::diag(g.diagonal());
    return ((g - diag).abs().max() / g.diagonal().abs().max()).item<double>();
}

} // namespace

// Issue 36 item 2: the default calibration is sequential, as the reference's
// prune_flatllm: layer l's value basis diagonalises the values layer l sees in the
// compressed model (its input comes through the compressed layers before it). The
// parallel calibration (the only one before) takes it from the uncompressed model.
TEST_P(FlatTiny, SequentialCalibrationFitsEachLayerToTheCompressedInput)
{
    const auto c = test::tiny_config(GetParam());
    LanguageModel model(c, test::random_weights(c), "tiny");
    const auto ids = random_ids(400, c.vocab_size);
    const auto cal = calibrate(model, ids, {.samples = 12, .seqlen = 16, .seed = 1, .batch = 5});
    const FlatOptions options{.remaining = 0.5, .allocation = RankAllocation::Uniform};
    EXPECT_EQ(options.calibration, FlatCalibration::Sequential);
    const auto sequential = flat_compress(model, cal, options);
    auto parallel_options = options;
    parallel_options.calibration = FlatCalibration::Parallel;
    const auto parallel = flat_compress(model, cal, parallel_options);
    EXPECT_EQ(sequential.sequential_passes, c.num_layers - 1);
    EXPECT_EQ(parallel.sequential_passes, 0);
    auto gram_of = [&](const LanguageModel& m, int64_t layer) {
        ValueGram g;
        g.layer = layer;
        m.hidden_states(cal.windows, &g);
        return g.gram;
    };
    // Layer 0 sees the original input either way: the same basis.
    for (const auto& g : gram_of(*sequential.model, 0))
        EXPECT_LT(off_diagonal(g), 1e-5);
    const int64_t last = c.num_layers - 1;
    const auto seq = gram_of(*sequential.model, last), par = gram_of(*parallel.model, last);
    ASSERT_EQ(seq.size(), static_cast<size_t>(c.num_kv_heads));
    double worst_parallel = 0;
    for (size_t h = 0; h < seq.size(); ++h) {
        // The kept values are the principal directions of what the layer now sees, their
        // energies the reported spectrum's top r.
        EXPECT_LT(off_diagonal(seq[h]), 1e-5) << "head " << h;
        const auto& spectrum = sequential.layers[static_cast<size_t>(last)].head_spectra[h];
        for (int64_t i = 0; i < seq[h].size(0); ++i)
            EXPECT_NEAR(seq[h][i][i].item<double>(), spectrum[static_cast<size_t>(i)], 1e-5 * spectrum[0]);
        worst_parallel = std::max(worst_parallel, off_diagonal(par[h]));
    }
    EXPECT_GT(worst_parallel, 1e-4); // the parallel basis was fitted to other inputs

    // The manifest says which calibration ran.
    test::TempDir dir;
    const auto src_dir = test::write_tiny_hf_model(dir / "src", GetParam());
    const auto lm = load_model(src_dir, {.need_tokenizer = false});
    const auto cal2 = calibrate(*lm.model, ids, {.samples = 12, .seqlen = 16, .seed = 1, .batch = 5});
    const auto flat = flat_compress(*lm.model, cal2, options);
    const auto manifest = save_flat_model(lm, flat, cal2, dir / "flat");
    EXPECT_EQ(manifest["parameters"]["calibration"], "sequential");
    EXPECT_EQ(manifest["calibration"]["mode"], "sequential");
    EXPECT_EQ(manifest["calibration"]["sequential_passes"], c.num_layers - 1);
}

namespace {

// Sums one layer's MLP (down-projection input) covariance over the windows, `batch`
// windows per forward pass, as the calibration does.
struct MlpGram final : ForwardObserver {
    int64_t layer = 0;
    torch::Tensor gram;
    void mlp_activations(int64_t l, const torch::Tensor& a) override
    {
        if (l != layer)
            return;
        const auto a64 = a.to(torch::kFloat64);
        if (!gram.defined())
            gram = torch::zeros({a64.size(1), a64.size(1)}, torch::kFloat64);
        gram.addmm_(a64.t(), a64);
    }
};

torch::Tensor mlp_gram(const LanguageModel& m, const torch::Tensor& windows, int64_t batch, int64_t layer)
{
    MlpGram g;
    g.layer = layer;
    for (int64_t b0 = 0; b0 < windows.size(0); b0 += batch)
        m.hidden_states(windows.narrow(0, b0, std::min(batch, windows.size(0) - b0)), &g);
    return g.gram;
}

bool layer_tensor(const std::string& name, int64_t layer)
{
    const std::string n = std::to_string(layer);
    return name.rfind("h." + n + ".", 0) == 0 || name.rfind("model.layers." + n + ".", 0) == 0;
}

// The model as the reference's prune_flatllm runs layer l's calibration pass: layers < l
// as `compressed` holds them, layer l and above as the original.
LanguageModel compressed_below(const LanguageModel& original, const LanguageModel& compressed, int64_t l)
{
    ModelConfig c = original.config();
    WeightMap w = compressed.weights();
    for (const auto& [name, t] : original.weights())
        for (int64_t k = l; k < c.num_layers; ++k)
            if (layer_tensor(name, k))
                w[name] = t;
    for (int64_t k = 0; k < c.num_layers; ++k) {
        const bool done = k < l;
        c.value_head_dims.push_back(done ? compressed.config().value_dim(k) : original.config().value_dim(k));
        c.mlp_widths.push_back(done ? compressed.config().mlp_width(k) : original.config().mlp_width(k));
    }
    return LanguageModel(c, std::move(w), "layers below " + std::to_string(l) + " compressed");
}

// Layer l's narrowed down projection in `flat`, and the one the Nystrom step makes
// from covariance C with the same width and lambda, as float32 [d, m] (llama layout).
std::pair<torch::Tensor, torch::Tensor>
down_projections(const LanguageModel& original, const FlatResult& flat, int64_t l, const torch::Tensor& C)
{
    const bool gpt2 = original.config().arch == Architecture::GPT2;
    const std::string name = gpt2 ? "h." + std::to_string(l) + ".mlp.c_proj.weight"
                                  : "model.layers." + std::to_string(l) + ".mlp.down_proj.weight";
    const auto sel = nystrom_selection(C, flat.layers[static_cast<size_t>(l)].mlp_width,
                                       flat.options.mlp_lambda, "layer " + std::to_string(l), 1 << 20);
    const auto W = original.weights().at(name).to(torch::kFloat64);
    const auto expected =
        gpt2 ? torch::matmul(sel.projection, W).t() : torch::matmul(W, sel.projection.t()); // [d, m]
    const auto got = flat.model->weights().at(name).to(torch::kFloat64);
    return {gpt2 ? got.t() : got, expected};
}

} // namespace

// Issue 62: as the reference's prune_flatllm, layer l's MLP covariance comes from the
// same pass as its value covariances, layer l itself still uncompressed (layers < l
// compressed); EmbedLab took it after narrowing layer l's attention, which remains as
// mlp_calibration after_attention.
TEST_P(FlatTiny, SequentialMlpCovarianceIsTakenWithTheLayerUncompressed)
{
    auto c = test::tiny_config(GetParam());
    c.num_layers = 3;
    LanguageModel model(c, test::random_weights(c), "tiny");
    const auto ids = random_ids(600, c.vocab_size);
    const auto cal = calibrate(model, ids, {.samples = 24, .seqlen = 16, .seed = 1, .batch = 5});
    const FlatOptions options{.remaining = 0.5, .allocation = RankAllocation::Uniform, .mlp = true};
    EXPECT_EQ(options.calibration, FlatCalibration::Sequential);
    EXPECT_EQ(options.mlp_calibration, FlatMlpCalibration::Reference);
    const auto flat = flat_compress(model, cal, options);
    auto after_options = options;
    after_options.mlp_calibration = FlatMlpCalibration::AfterAttention;
    const auto after = flat_compress(model, cal, after_options);

    double worst_after = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const auto below = compressed_below(model, *flat.model, l);
        const auto C = mlp_gram(below, cal.windows, cal.options.batch, l);
        const auto [got, expected] = down_projections(model, flat, l, C);
        ASSERT_EQ(got.sizes(), expected.sizes()) << "layer " << l;
        EXPECT_LT(max_relative(got, expected), 1e-5) << "layer " << l;
        // after_attention fits layer l's MLP to the covariance with its attention narrowed.
        const auto below_after = compressed_below(model, *after.model, l);
        const auto [got_after, expected_after] =
            down_projections(model, after, l, mlp_gram(below_after, cal.windows, cal.options.batch, l));
        if (got_after.sizes() == expected_after.sizes())
            worst_after = std::max(worst_after, max_relative(got_after, expected_after));
        else
            worst_after = 1;
    }
    EXPECT_GT(worst_after, 1e-3); // the order tells apart, so the check above has teeth

    // One pass per layer (layer 0's MLP has its own: the calibration holds no MLP
    // covariance); after_attention adds an MLP pass per layer.
    EXPECT_EQ(flat.sequential_passes, c.num_layers);
    EXPECT_EQ(after.sequential_passes, 2 * c.num_layers - 1);
    EXPECT_EQ(flat.mlp_calibration_passes, c.num_layers);
    // Layer 0's MLP covariance from a calibration that holds it: the same model, one pass fewer.
    const auto cal_mlp =
        calibrate(model, ids, {.samples = 24, .seqlen = 16, .seed = 1, .mlp = true, .batch = 5});
    const auto flat2 = flat_compress(model, cal_mlp, options);
    EXPECT_EQ(flat2.sequential_passes, c.num_layers - 1);
    expect_same_weights(*flat2.model, *flat.model, "layer 0's MLP covariance from the calibration");

    // The request field, its check, and the flag's name come from the registry.
    CompressionRequest r;
    r.method = "flat";
    r.remaining = 0.5;
    r.calib_text = "calib.txt";
    EXPECT_EQ(r.mlp_calibration, "reference");
    EXPECT_NO_THROW(check_request(r));
    r.mlp_calibration = "after_attention";
    EXPECT_THROW(check_request(r), InputError); // the MLP is not compressed: nothing to calibrate
    r.compress_mlp = true;
    EXPECT_NO_THROW(check_request(r));
    EXPECT_EQ(describe_request(r), "flat remaining 0.5, iprs, mlp, mlp after attention");
    EXPECT_EQ(parse_flat_mlp_calibration(r.mlp_calibration), FlatMlpCalibration::AfterAttention);
    r.calibration = "parallel"; // takes every covariance from the uncompressed model
    EXPECT_THROW(check_request(r), InputError);
    r.calibration = "sequential";
    r.mlp_calibration = "before";
    EXPECT_THROW(check_request(r), InputError);
    EXPECT_THROW(parse_flat_mlp_calibration("before"), InputError);
}
