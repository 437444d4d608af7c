#include <algorithm>
#include <cmath>

#include "embedlab/accounting.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/error.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/table_method.hpp"
#include "methods/table_method_support.hpp"
#include "test_support.hpp"

using namespace embedlab;

namespace {

// The PCA paper's Table II (GPT-2 small: V = 50257, d = 768), to the printed 0.01M.
TEST(Accounting, PcaReproducesTableTwo)
{
    const struct {
        int64_t k;
        double params_m, flops_m;
    } table[] = {{64, 3.27, 6.53}, {128, 6.53, 13.06}, {256, 13.06, 26.13}, {512, 26.13, 52.25}};
    for (const auto& row : table) {
        const auto a = account_low_rank(LowRankKind::PCA, 50257, 768, row.k);
        EXPECT_EQ(a.params_after, 50257 * row.k + 768 * row.k + 768);
        EXPECT_NEAR(a.params_after / 1e6, row.params_m, 0.005) << "k=" << row.k;
        EXPECT_NEAR(a.flops_per_token / 1e6, row.flops_m, 0.005) << "k=" << row.k;
        EXPECT_NEAR(a.params_before / 1e6, 38.60, 0.005);
        EXPECT_DOUBLE_EQ(a.ratio, static_cast<double>(a.params_after) / (50257.0 * 768));
        EXPECT_DOUBLE_EQ(a.eta_emb, 1.0 - a.ratio);
    }
}

// Issue 20: an untied model's head is not compressed, so a token pays its lookup only;
// TensorSLM's eta_emb (F.3) has the position table in its denominator.
TEST(Accounting, UntiedHeadCountsTheLookupAndPositionsEnterEtaEmb)
{
    auto pca = account_low_rank(LowRankKind::PCA, 32000, 128, 64); // tinyllama
    EXPECT_EQ(pca.flops_head, 2 * pca.params_after);
    EXPECT_EQ(pca.flops_per_token, pca.flops_head); // tied unless told
    apply_model_context(pca, /*tied_head=*/false, 0);
    EXPECT_EQ(pca.flops_lookup, 16512); // 2 d k + d: z_t P + mu
    EXPECT_EQ(pca.flops_per_token, pca.flops_lookup);
    EXPECT_EQ(pca.flops_per_token_dense, 0);
    EXPECT_DOUBLE_EQ(pca.eta_emb_with_positions, pca.eta_emb);

    auto svd = account_low_rank(LowRankKind::SVD, 1000, 64, 8);
    EXPECT_EQ(svd.flops_lookup, 2 * 64 * 8);

    // A row of 8x8x12 / 1,4,4,1 contracts cores 2 and 3 onto the first: 2(8*4*8*4) + 2(64*4*12*1).
    auto tt = account_tensor_train(50257, {8, 8, 12}, {1, 4, 4, 1});
    EXPECT_EQ(tt.flops_lookup, 2 * 8 * 4 * 8 * 4 + 2 * 64 * 4 * 12);
    EXPECT_EQ(tt.flops_head, 50257 * (tt.flops_lookup + 2 * 768));
    apply_model_context(tt, false, 0);
    EXPECT_EQ(tt.flops_per_token, tt.flops_lookup);
    EXPECT_LT(tt.flops_per_token * 1000, tt.flops_head); // overstated ~V times before

    // GPT-2 small: 38.60M token values, 39.38M with the 1024 x 768 position table.
    auto gpt2 = account_low_rank(LowRankKind::PCA, 50257, 768, 128);
    apply_model_context(gpt2, true, 1024 * 768);
    EXPECT_EQ(gpt2.flops_per_token, gpt2.flops_head);
    EXPECT_NEAR((gpt2.params_before + gpt2.position_params) / 1e6, 39.38, 0.005);
    EXPECT_DOUBLE_EQ(gpt2.eta_emb_with_positions,
                     (50257.0 * 768 - gpt2.params_after) / (50257.0 * 768 + 1024 * 768));
    EXPECT_LT(gpt2.eta_emb_with_positions, gpt2.eta_emb);
}

// TensorSLM Table 1 presets: midpoints, and omega bounded by the ranges' corners.
TEST(Accounting, EnergyDevicePresetsBoundOmega)
{
    const auto pi = energy_options_for_device("raspberry-pi-5");
    EXPECT_DOUBLE_EQ(pi.nu, (70.0 + 260.0) / 2);
    EXPECT_DOUBLE_EQ(pi.tau, 2.0);
    EXPECT_EQ(pi.device, "raspberry-pi-5");
    EXPECT_THROW(energy_options_for_device("pi"), InputError);
    for (const auto& device : energy_devices()) {
        const auto o = energy_options_for_device(device.name);
        auto tt = account_tensor_train(50257, {8, 8, 12}, {1, 4, 4, 1}, o);
        EXPECT_LE(tt.energy.omega_low, tt.energy.omega) << device.name;
        EXPECT_GE(tt.energy.omega_high, tt.energy.omega) << device.name;
        EXPECT_LT(tt.energy.omega_low, tt.energy.omega_high) << device.name;
        // The corners are the plain model at the extreme tau / nu.
        EnergyOptions cheap{.nu = device.nu_high, .tau = device.tau_low};
        EnergyOptions dear{.nu = device.nu_low, .tau = device.tau_high};
        const double a = tt_energy(50257, 768, {8, 8, 12}, {1, 4, 4, 1}, cheap).omega,
                     b = tt_energy(50257, 768, {8, 8, 12}, {1, 4, 4, 1}, dear).omega;
        EXPECT_DOUBLE_EQ(tt.energy.omega_low, std::min(a, b));
        EXPECT_DOUBLE_EQ(tt.energy.omega_high, std::max(a, b));
        // apply_energy recomputes what the constructor computed.
        auto pca = account_low_rank(LowRankKind::PCA, 50257, 768, 128);
        EXPECT_EQ(pca.energy.omega_high, 0); // no device: no range
        apply_energy(pca, o);
        EXPECT_DOUBLE_EQ(pca.energy.omega, svd_energy(50257, 768, 128, o).omega);
        EXPECT_GT(pca.energy.omega_high, 0);
    }
}

TEST(Accounting, SvdHasNoMeanAndWholeModelEta)
{
    const auto a = account_low_rank(LowRankKind::SVD, 1000, 64, 8, {}, 100000);
    EXPECT_EQ(a.params_after, 1000 * 8 + 64 * 8);
    EXPECT_EQ(a.model_params_before, 100000);
    EXPECT_EQ(a.model_params_after, 100000 - 64000 + 8512);
    EXPECT_DOUBLE_EQ(a.eta, (100000.0 - a.model_params_after) / a.model_params_after);
}

TEST(Accounting, RankOutsideOneToDIsAnError)
{
    EXPECT_THROW(account_low_rank(LowRankKind::PCA, 100, 16, 0), InputError);
    EXPECT_THROW(account_low_rank(LowRankKind::PCA, 100, 16, 17), InputError);
    EXPECT_NO_THROW(account_low_rank(LowRankKind::PCA, 100, 16, 16));
}

TEST(Accounting, TensorTrainParamsPerTokenAndEtaTtd)
{
    const auto a = account_tensor_train(50257, {8, 8, 12}, {1, 4, 4, 1});
    EXPECT_EQ(a.params_per_token, 1 * 8 * 4 + 4 * 8 * 4 + 4 * 12 * 1); // 208
    EXPECT_EQ(a.params_after, 50257 * 208);
    EXPECT_NEAR(a.eta_ttd, 768.0 / 208.0 - 1.0, 1e-12);
    EXPECT_EQ(a.dim, 768);
    // Equal-size SVD rank: V k + d k closest to the TT's stored values.
    EXPECT_EQ(a.svd_equal_size_rank, std::llround(50257.0 * 208 / (50257 + 768)));
}

TEST(Accounting, TensorTrainCapsAndShapeErrors)
{
    EXPECT_EQ(tt_rank_caps({8, 8, 12}), (std::vector<int64_t>{1, 8, 12, 1}));
    EXPECT_EQ(tt_rank_caps({4, 4, 6, 8}), (std::vector<int64_t>{1, 4, 16, 8, 1}));
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> bad = {
        {{8, 8, 10}, {1, 4, 4, 1}},  // product 640, not 768
        {{8, 8, 12}, {1, 4, 1}},     // wrong rank count
        {{8, 8, 12}, {2, 4, 4, 1}},  // r_0 != 1
        {{8, 8, 12}, {1, 9, 4, 1}},  // r_1 above its cap of 8
        {{8, 8, 12}, {1, 4, 13, 1}}, // r_2 above its cap of 12
        {{768}, {1, 1}},             // one factor
    };
    for (const auto& [shape, ranks] : bad)
        EXPECT_THROW(check_tt_shape_and_ranks(768, shape, ranks), InputError);
    try {
        check_tt_shape_and_ranks(768, {8, 8, 12}, {1, 9, 4, 1});
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("r_1 = 9"), std::string::npos) << e.what();
    }
    // A lying manifest's factor near 2^62 must not overflow the product (UBSan).
    try {
        check_tt_shape_and_ranks(768, {2, int64_t{1} << 62, 3}, {1, 2, 2, 1});
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("has product greater than d"), std::string::npos) << e.what();
    }
}

TEST(Accounting, ShapeHelperListsEveryFactorisation)
{
    const auto three = tt_shapes(768, 3);
    EXPECT_NE(std::find(three.begin(), three.end(), std::vector<int64_t>{8, 8, 12}), three.end());
    const auto four = tt_shapes(768, 4);
    EXPECT_NE(std::find(four.begin(), four.end(), std::vector<int64_t>{4, 4, 6, 8}), four.end());
    for (const auto& s : four) {
        int64_t p = 1;
        for (int64_t f : s) {
            EXPECT_GE(f, 2);
            p *= f;
        }
        EXPECT_EQ(p, 768);
    }
    EXPECT_EQ(tt_shapes(12, 2), (std::vector<std::vector<int64_t>>{{2, 6}, {3, 4}, {4, 3}, {6, 2}}));
    EXPECT_TRUE(tt_shapes(7, 2).empty()); // a prime has no 2-factor shape
}

// Eqs. 2-5 written out by hand for small numbers.
TEST(Accounting, EnergyModelMatchesTheEquations)
{
    EnergyOptions o;
    o.nu = 5;
    o.tau = 1;
    o.tokens = 10;
    const auto svd = svd_energy(100, 8, 2, o);
    EXPECT_DOUBLE_EQ(svd.original_nu, 5.0 * (8 * 100 + 10 * 8));
    EXPECT_DOUBLE_EQ(svd.compressed_nu, 5.0 * (2 * (100 + 16 + 10 + 1) + 10 * 8));
    EXPECT_DOUBLE_EQ(svd.compressed_tau, 1.0 * (2 * 10 * 8 * 2 - 10 * 8 + 2 * 8));
    EXPECT_DOUBLE_EQ(svd.omega, (svd.compressed_nu + svd.compressed_tau) / svd.original_nu);
    // Uniform TT (I = 4, r = 2, N = 3): N I r^2 = 48.
    const auto tt = tt_energy(100, 64, {4, 4, 4}, {1, 2, 2, 1}, o);
    EXPECT_DOUBLE_EQ(tt.compressed_nu, 5.0 * (100 * 48 + 10 * 48 + 10 * 64));
    EXPECT_DOUBLE_EQ(tt.compressed_tau, 48.0);
}

} // namespace

// Issue 19: bits per stored value from the type (ggml's block bytes x 8 / values per
// block), and the bytes a table takes before and after compression.
TEST(Accounting, StorageCountsBitsPerStoredValue)
{
    EXPECT_DOUBLE_EQ(embedlab::stored_bits_per_value("F32"), 32);
    EXPECT_DOUBLE_EQ(embedlab::stored_bits_per_value("BF16"), 16);
    EXPECT_DOUBLE_EQ(embedlab::stored_bits_per_value("Q8_0"), 34.0 * 8 / 32);   // 8.5
    EXPECT_DOUBLE_EQ(embedlab::stored_bits_per_value("Q4_K"), 144.0 * 8 / 256); // 4.5
    EXPECT_DOUBLE_EQ(embedlab::stored_bits_per_value("Q6_K"), 210.0 * 8 / 256); // 6.5625
    EXPECT_EQ(embedlab::stored_bits_per_value("mixed"), 0);
    EXPECT_EQ(embedlab::stored_bits_per_value(""), 0);

    // PCA at a quarter of the values, in float32, of a Q6_K table: more bytes than before.
    auto a = embedlab::account_low_rank(embedlab::LowRankKind::PCA, 32000, 256, 56);
    embedlab::apply_storage(a, "Q6_K");
    EXPECT_EQ(a.stored_type_before, "Q6_K");
    EXPECT_DOUBLE_EQ(a.bytes_before, 32000.0 * 256 * 6.5625 / 8);
    EXPECT_DOUBLE_EQ(a.bytes_after, double(a.params_after) * 4);
    EXPECT_NEAR(a.bytes_ratio, a.ratio * 32 / 6.5625, 1e-12);
    EXPECT_GT(a.bytes_ratio, 1.0);
    EXPECT_LT(a.ratio, 0.25);
    const auto j = embedlab::accounting_json(a);
    EXPECT_DOUBLE_EQ(j["storage"]["bytes_ratio"].get<double>(), a.bytes_ratio);

    // Unknown storage records nothing rather than a guess.
    auto unknown = embedlab::account_low_rank(embedlab::LowRankKind::PCA, 100, 8, 2);
    embedlab::apply_storage(unknown, "mixed");
    EXPECT_EQ(unknown.bits_per_value_before, 0);
    EXPECT_FALSE(embedlab::accounting_json(unknown).contains("storage"));
}

// Issue 36 item 4: the accounting conventions are named and counted as executed.
TEST(Accounting, ConventionsAreNamedAndCountedAsExecuted)
{
    // The dense baseline both ways: the PCA paper's Table II lookup (0) and the tied head (2 V d).
    auto a = embedlab::account_low_rank(embedlab::LowRankKind::PCA, 50257, 768, 128);
    auto j = embedlab::accounting_json(a);
    EXPECT_EQ(j["flops_dense_lookup"], 0);
    EXPECT_EQ(j["flops_dense_with_head"], int64_t{2} * 50257 * 768);
    EXPECT_NE(j["flops_convention"].get<std::string>().find("Table II"), std::string::npos);
    embedlab::apply_model_context(a, /*tied_head=*/false, 0);
    EXPECT_EQ(a.flops_per_token_dense, 0);
    EXPECT_EQ(a.flops_dense_with_head, int64_t{2} * 50257 * 768);

    // TT energy: eq. 3's r_max^2 sum I_k beside the values stored (8x16, ranks 1,4,1:
    // 16 x 24 = 384 against 1*8*4 + 4*16*1 = 96 per token).
    const auto t = embedlab::account_tensor_train(1000, {8, 16}, {1, 4, 1});
    EXPECT_DOUBLE_EQ(t.energy_size, 384);
    EXPECT_DOUBLE_EQ(t.energy_size_stored, 96);
    EXPECT_DOUBLE_EQ(t.energy_stored.omega, embedlab::tt_energy(1000, 128, 96.0, {}).omega);
    EXPECT_LT(t.energy_stored.omega, t.energy.omega);
    j = embedlab::accounting_json(t);
    EXPECT_EQ(j["energy_size_stored"], 96.0);
    EXPECT_DOUBLE_EQ(j["energy_stored"]["omega"].get<double>(), t.energy_stored.omega);
    // Per-token ranks: the mean of the core values each token stores (ranks aside).
    const auto p = embedlab::account_tensor_train_per_token(2, {8, 16}, {1, 4});
    EXPECT_DOUBLE_EQ(p.energy_size_stored, ((8 + 16) + (32 + 64)) / 2.0);
    EXPECT_DOUBLE_EQ(p.energy_size, (1 * 24 + 16 * 24) / 2.0);

    // A device preset says what ratio it is: the Raspberry Pi 5's nu/tau is 82.5, not 5.
    auto pi = t;
    embedlab::apply_energy(pi, embedlab::energy_options_for_device("raspberry-pi-5", 200));
    j = embedlab::accounting_json(pi);
    EXPECT_DOUBLE_EQ(j["energy_model"]["nu_over_tau"].get<double>(), 82.5);
    EXPECT_EQ(j["energy_model"]["tokens"], 200);

    // LLE lookup FLOPs as the rebuild runs them: each neighbour row normalised and added
    // (4 k d), then the sum's norm and the rescale (3 d); not 2 k d.
    const int64_t V = 40, d = 16, k = 3;
    torch::manual_seed(1);
    const auto table = torch::randn({V, d});
    auto split = std::make_shared<embedlab::FrequencySplit>();
    split->counts.assign(V, 0);
    for (int64_t v = 0; v < V; ++v)
        (v % 4 == 0 ? split->common : split->rare).push_back(v);
    const auto lle = embedlab::compress_table(table, {.method = "lle", .split = split, .k = k});
    EXPECT_EQ(lle.accounting.flops_lookup, 4 * k * d + 3 * d);
    EXPECT_EQ(lle.accounting.flops_head, 30 * (4 * k * d + 3 * d) + 2 * V * d);

    // Issue 62 item 7: where a count departs from METHODS.md's formula it says so, in the
    // record: lle's |V_C| common ids beside 2k + 1 per rare token (10 ids here), per-token
    // TT's N-1 stored ranks, FLAT's floor with 1e-9.
    EXPECT_EQ(lle.accounting.params_after, 10 * d + 10 + 30 * (2 * k + 1));
    j = embedlab::accounting_json(lle.accounting);
    EXPECT_NE(j["conventions"]["params"].get<std::string>().find("|V_C| ids"), std::string::npos) << j;
    EXPECT_EQ(j["conventions"]["flops"], j["flops_convention"]);
    j = embedlab::accounting_json(p);
    EXPECT_NE(j["conventions"]["params"].get<std::string>().find("N-1 inner ranks"), std::string::npos) << j;
    EXPECT_FALSE(embedlab::accounting_json(t)["conventions"].contains("params"))
        << "uniform ranks: the formula";
    EXPECT_NE(std::string(embedlab::kFlatRankConvention).find("floor(w_l d_head + 1e-9)"), std::string::npos);
}

// Issue 57 item 4: V d of 2^40 x 2^24 wrapped to 0 (ratio inf), tt gave 0 and NaN, and
// embedlab.account('pca', 2**62, 2**62, rank=8) reported params_before 0. Every method's
// accounting now gives the right number or an InputError naming the terms and the limit.
namespace {

constexpr int64_t kTwo40 = int64_t{1} << 40, kTwo24 = int64_t{1} << 24, kTwo62 = int64_t{1} << 62;

// The InputError's message, or "" when `f` returned.
template <class F> std::string refusal(F&& f)
{
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}

void expect_beyond_limit(const std::string& message, const std::string& terms)
{
    EXPECT_NE(message.find("exceeds what EmbedLab counts (2^62)"), std::string::npos) << message;
    EXPECT_NE(message.find(terms), std::string::npos) << "wanted '" << terms << "' in: " << message;
}

} // namespace

TEST(Accounting, EveryMethodRefusesCountsBeyondTwoToThe62)
{
    // The table: 2^64 values. Then 2^62 x 2^62 (the Python module's), and d one more.
    for (auto kind : {LowRankKind::PCA, LowRankKind::SVD, LowRankKind::LRF}) {
        expect_beyond_limit(refusal([&] { account_low_rank(kind, kTwo40, kTwo24, 8); }),
                            "vocab x dim = 1099511627776 x 16777216 = 18446744073709551616 parameters");
        expect_beyond_limit(refusal([&] { account_low_rank(kind, kTwo62, kTwo62, 8); }),
                            "vocab x dim = 4611686018427387904 x 4611686018427387904 = "
                            "21267647932558653966460912964485513216 parameters");
        expect_beyond_limit(refusal([&] { account_low_rank(kind, kTwo40, kTwo24 + 1, 8); }), "vocab x dim");
    }
    expect_beyond_limit(refusal([] {
                            account_tensor_train(kTwo40, {4096, 4096}, {1, 8, 1});
                        }),
                        "vocab x dim");
    expect_beyond_limit(refusal([] {
                            account_tensor_train_per_token(kTwo62, {4, 4, 8}, {2, 2});
                        }),
                        "vocab x inner ranks");
    expect_beyond_limit(refusal([] { account_tucker(kTwo40, {4096, 4096}, {2, 2}); }), "vocab x dim");
    expect_beyond_limit(refusal([] { account_aq(kTwo40, kTwo24, 8, 256); }), "vocab x dim");
    // A shape whose product alone is beyond the limit never wraps into a small d.
    expect_beyond_limit(refusal([] {
                            account_tensor_train(2, {kTwo40, kTwo40}, {1, 2, 1});
                        }),
                        "I_1 x I_2 = 1099511627776 x 1099511627776");
    expect_beyond_limit(refusal([] { account_tucker(2, {kTwo40, kTwo40}, {1, 1}); }), "I_1 x I_2");
    EXPECT_NE(refusal([] { tt_rank_caps({kTwo40, kTwo40, 8}); }).find("2^62"), std::string::npos);
    // V d fits, the dense head's 2 V d does not.
    expect_beyond_limit(refusal([] { account_low_rank(LowRankKind::PCA, kTwo40, int64_t{1} << 22, 8); }),
                        "2 x vocab x dim = 2199023255552 x 4194304 = 9223372036854775808 FLOPs");
    // Other counts beyond the limit though V d is not: a full-rank tt's head FLOPs
    // (V (2 I_1 r_1 I_2 + 2 d)), aq's codebook values, the whole model with model_params.
    expect_beyond_limit(refusal([] { account_tensor_train(kTwo40, {1024, 2048}, {1, 1024, 1}); }), "vocab x");
    expect_beyond_limit(refusal([] { account_aq(2, int64_t{1} << 45, 1024, 256); }),
                        "codebooks x codewords x dim");
    expect_beyond_limit(refusal([] { account_low_rank(LowRankKind::SVD, 1000, 64, 8, {}, kTwo62 + 1); }),
                        "model_params = 4611686018427387905");
    EXPECT_NE(refusal([] { account_low_rank(LowRankKind::SVD, 1000, 64, 8, {}, 10); }).find("model_params"),
              std::string::npos);
    // The model's context: a position table beyond the limit.
    auto small = account_low_rank(LowRankKind::PCA, 1000, 64, 8);
    expect_beyond_limit(refusal([&] { apply_model_context(small, true, kTwo62); }),
                        "params_before + positions");

    // Every table method, as the CLI's account and the Python module's account() reach it:
    // a refusal, never a number, for 2^62 tokens; lle and fourier are counted only after a fit,
    // whose own accounting (account_stored) is bounded alike.
    for (const TableMethod* m : table_methods()) {
        CompressionRequest r{.method = m->name()};
        m->fill_example(r, 768);
        const std::string message =
            refusal([&] { account_setting(r, kTwo62, 768, {.stored_type = "f32"}, "account"); });
        ASSERT_FALSE(message.empty()) << m->name() << " counted 2^62 x 768";
        EXPECT_EQ(message.rfind("account: ", 0), 0u) << message;
        if (message.find("counted only after a fit") == std::string::npos)
            expect_beyond_limit(message, "vocab x dim = 4611686018427387904 x 768");
    }
    expect_beyond_limit(refusal([] { table_support::account_stored("lle", kTwo40, kTwo24, 100, 0, 1, 1); }),
                        "vocab x dim");
    expect_beyond_limit(
        refusal([] { table_support::account_stored("fourier", 1000, 64, kTwo62 + 1, 0, 1, 1); }),
        "params_after");
}

// Up to the limit the numbers are exact: no wrap, no rounding through double.
TEST(Accounting, LargestCountableTablesAreCountedExactly)
{
    const int64_t V = kTwo40, d = int64_t{1} << 21, k = 8; // V d = 2^61, the dense head 2^62
    const auto a = account_low_rank(LowRankKind::PCA, V, d, k);
    EXPECT_EQ(a.params_before, int64_t{1} << 61);
    EXPECT_EQ(a.params_after, V * k + d * k + d);
    EXPECT_EQ(a.flops_dense_with_head, kTwo62);
    EXPECT_EQ(a.flops_head, 2 * a.params_after);
    EXPECT_TRUE(std::isfinite(a.ratio) && a.ratio > 0 && a.ratio < 1) << a.ratio;
    EXPECT_TRUE(std::isfinite(a.eta) && a.eta > 0) << a.eta;
    EXPECT_TRUE(std::isfinite(a.energy.omega) && a.energy.omega > 0) << a.energy.omega;
    const int64_t V_tt = int64_t{1} << 36; // its head: 5 x 2^58 FLOPs
    const auto tt = account_tensor_train(V_tt, {1024, 2048}, {1, 4, 1});
    EXPECT_EQ(tt.params_after, V_tt * (1024 * 4 + 4 * 2048));
    EXPECT_EQ(tt.flops_head, V_tt * (2 * 1024 * 4 * 2048 + 2 * d));
    EXPECT_TRUE(std::isfinite(tt.ratio) && std::isfinite(tt.energy.omega)) << tt.ratio;
    const auto tucker = account_tucker(V, {1024, 2048}, {2, 2});
    EXPECT_EQ(tucker.params_after, V * 4 + 1024 * 2 + 2048 * 2);
    const int64_t d_3 = d / 2; // aq and quant's heads: 3 V d FLOPs
    const auto aq = account_aq(V, d_3, 1, 256);
    EXPECT_EQ(aq.params_after, 256 * d_3 + V);
    EXPECT_EQ(aq.flops_head, 3 * V * d_3);
    const auto quant = account_without_table({.method = "quant", .type = "q8_0"}, V, d_3, 0, "account");
    EXPECT_EQ(quant.params_after, int64_t{1} << 60);
    EXPECT_EQ(quant.flops_head, 3 * V * d_3);
    EXPECT_TRUE(std::isfinite(quant.ratio)) << quant.ratio;
}

// TensorSLM's omega divides by the original table's memory energy, nu (V d + l d): a
// request with nu 0 was accepted and gave omega inf (or NaN with tau 0 too).
TEST(Accounting, EnergyModelWithoutMemoryEnergyIsRefused)
{
    CompressionRequest r{.method = "pca", .rank = 8};
    r.nu = 0;
    test::expect_input_error([&] { account_setting(r, 1000, 64, {}, "account"); }, "nu");
    r.nu = 5;
    const auto a = account_setting(r, 1000, 64, {}, "account");
    EXPECT_TRUE(std::isfinite(a.energy.omega)) << a.energy.omega;
}
