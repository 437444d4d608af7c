// account: what a compressed embedding costs and saves, from sizes alone.
#include "common.hpp"
#include "embedlab/accounting.hpp"
#include "embedlab/compress.hpp"

namespace embedlab::cli {

namespace {
// "4,8:2,4" -> {"4,8", "2,4"}.
std::vector<std::string> split_colons(const std::string& s)
{
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t colon; (colon = s.find(':', start)) != std::string::npos; start = colon + 1)
        out.push_back(s.substr(start, colon - start));
    out.push_back(s.substr(start));
    return out;
}
} // namespace

int command_account(const std::vector<std::string>& argv)
{
    Args args("account", argv,
              {"--method", "--vocab", "--dim", "--rank", "--shape", "--ranks", "--tokens", "--nu", "--tau",
               "--device", "--model-params", "--positions"},
              {"--json", "--untied"});
    const std::string method = args.get("--method").value_or("");
    if (method != "pca" && method != "svd" && method != "tt" && method != "tucker")
        throw InputError("account: --method must be pca, svd, tt or tucker");
    const int64_t limit = int64_t{1} << 40;
    const int64_t vocab = args.get_int("--vocab", 0, 1, limit);
    if (!args.has("--vocab"))
        throw InputError("account: --vocab V is required");
    EnergyOptions energy;
    energy.tokens = args.get_int("--tokens", energy.tokens, 0, limit);
    if (args.has("--device")) {
        if (args.has("--nu") || args.has("--tau"))
            throw InputError("account: --device sets nu and tau; give either --device or --nu/--tau");
        energy = energy_options_for_device(*args.get("--device"), energy.tokens);
    }
    energy.nu = args.get_double("--nu", energy.nu, 0, 1e12);
    energy.tau = args.get_double("--tau", energy.tau, 0, 1e12);
    const int64_t model_params = args.get_int("--model-params", 0, 0, limit);
    // Issue 20: an untied head is not compressed; --positions N counts a learned position
    // table of N values in TensorSLM's eta_emb (F.3).
    const bool tied = !args.has("--untied");
    const int64_t positions = args.get_int("--positions", 0, 0, limit);

    std::vector<EmbeddingAccounting> rows;
    const bool tt = method_descriptor(method).id == Method::TT;
    const bool tucker = method_descriptor(method).id == Method::Tucker;
    if (tucker) {
        // One rank per mode, r_1..r_N (no boundary 1s, unlike tt); several settings as
        // --ranks A1,A2:B1,B2.
        const auto shape = args.get_int_list("--shape", 1, limit);
        if (shape.empty())
            throw InputError("account: --method tucker needs --shape I1,I2,... (product = d) and --ranks "
                             "r1,r2,... (one per factor)");
        const auto ranks = args.get("--ranks");
        if (!ranks)
            throw InputError("account: --method tucker needs --ranks r1,..,rN (one per --shape factor, "
                             "1 <= r_k <= I_k; A1,A2:B1,B2 for several)");
        int64_t product = 1;
        for (int64_t f : shape)
            product = std::min(product * f, limit);
        if (args.has("--dim") && args.get_int("--dim", 0, 1, limit) != product)
            throw InputError("account: --shape has product " + std::to_string(product) + ", not --dim " +
                             *args.get("--dim"));
        for (const auto& set : split_colons(*ranks))
            rows.push_back(account_tucker(
                vocab, shape,
                Args("account", {"--ranks", set}, {"--ranks"}, {}).get_int_list("--ranks", 1, limit),
                model_params));
    } else if (tt) {
        const auto shape = args.get_int_list("--shape", 1, limit);
        if (shape.empty())
            throw InputError("account: --method tt needs --shape I1,I2,... (product = d)");
        auto ranks = args.get_int_list("--ranks", 1, limit);
        if (ranks.empty())
            ranks = tt_rank_caps(shape);
        int64_t product = 1;
        for (int64_t f : shape)
            product = std::min(product * f, limit);
        if (args.has("--dim") && args.get_int("--dim", 0, 1, limit) != product)
            throw InputError("account: --shape has product " + std::to_string(product) + ", not --dim " +
                             *args.get("--dim"));
        rows.push_back(account_tensor_train(vocab, shape, ranks, energy, model_params));
    } else {
        const int64_t dim = args.get_int("--dim", 0, 1, limit);
        if (!args.has("--dim"))
            throw InputError("account: --dim d is required");
        const auto ranks = args.get_int_list("--rank", 1, limit);
        if (ranks.empty())
            throw InputError("account: --rank K (or K1,K2,...) is required");
        for (int64_t k : ranks)
            rows.push_back(account_low_rank(method_descriptor(method).id == Method::PCA ? LowRankKind::PCA
                                                                                        : LowRankKind::SVD,
                                            vocab, dim, k, energy, model_params));
    }

    for (auto& r : rows)
        apply_model_context(r, tied, positions);

    if (args.has("--json")) {
        if (rows.size() == 1) {
            print_json(accounting_json(rows[0]));
        } else {
            Json results = Json::array();
            for (const auto& r : rows)
                results.push_back(accounting_json(r));
            print_json({{"method", method}, {"results", results}});
        }
        return 0;
    }
    const auto& first = rows[0];
    std::printf("%s, V = %lld, d = %lld: dense table %.2fM params, %.2fM FLOPs per token (%s)\n",
                method.c_str(), (long long)first.vocab, (long long)first.dim, first.params_before / 1e6,
                first.flops_per_token_dense / 1e6, tied ? "tied head" : "untied: the lookup alone");
    // Issue 36 item 4: both conventions for the dense baseline, named.
    std::printf(
        "FLOPs convention: lookup = building one row (dense: %lld, a read, as the PCA paper's Table II); "
        "with head = the tied head's product with every row (dense: %.2fM = 2 V d); FLOPs/token = %s\n",
        (long long)first.flops_dense_lookup, first.flops_dense_with_head / 1e6,
        tied ? "with head" : "lookup (untied)");
    std::printf("%-18s %12s %8s %8s %12s %12s %8s\n", tt || tucker ? "shape / ranks" : "rank", "params",
                "ratio", "eta_emb", "lookup", "FLOPs/token", "omega");
    for (const auto& r : rows) {
        std::string label = std::to_string(r.rank);
        if (tt || tucker) {
            const auto& shape = tt ? r.shape : r.tucker_shape;
            const auto& ranks = tt ? r.ranks : r.tucker_ranks;
            label.clear();
            for (size_t i = 0; i < shape.size(); ++i) {
                if (i)
                    label += 'x';
                label += std::to_string(shape[i]);
            }
            label += " /";
            for (size_t i = 0; i < ranks.size(); ++i) {
                label += i ? ',' : ' ';
                label += std::to_string(ranks[i]);
            }
        }
        std::printf("%-18s %11.2fM %8.4f %8.4f %12lld %11.4fM %8s\n", label.c_str(), r.params_after / 1e6,
                    r.ratio, r.eta_emb, (long long)r.flops_lookup, r.flops_per_token / 1e6,
                    tucker ? "-" : std::to_string(r.energy.omega).substr(0, 6).c_str()); // tucker: no model
    }
    if (!tucker)
        std::printf(
            "energy (TensorSLM eqs. 2-5, l = %lld tokens): %s nu %g, tau %g, nu/tau %.3g (the paper's "
            "Appendix F default: 5)\n",
            (long long)energy.tokens, energy.device.empty() ? "" : (energy.device + ":").c_str(), energy.nu,
            energy.tau, energy.tau > 0 ? energy.nu / energy.tau : 0.0);
    if (!energy.device.empty())
        std::printf("energy: %s at nu %g, tau %g; omega over its ranges %.4f..%.4f\n", energy.device.c_str(),
                    energy.nu, energy.tau, first.energy.omega_low, first.energy.omega_high);
    if (positions > 0)
        std::printf("eta_emb with the %lld-value position table (TensorSLM F.3): %.4f\n",
                    (long long)positions, first.eta_emb_with_positions);
    if (tucker)
        std::printf("core values per token %lld (prod r_k), shared factor values %lld (sum I_k r_k); FLOPs: "
                    "lookup %lld (multi-mode product), tied head %lld (projection onto the factors + one "
                    "product with every core); no energy model (TensorSLM eqs. 2-5 model tt and svd)\n",
                    (long long)first.core_values_per_token, (long long)first.factor_values,
                    (long long)first.flops_lookup, (long long)first.flops_head);
    if (tt)
        std::printf(
            "params per token %lld, eta_TTD %.3f; SVD of equal size: rank %lld, omega %.4f\n"
            "(TensorSLM's Table 6 totals cannot be reproduced from its own formula; counted as "
            "METHODS.md 5)\n"
            "omega above: eq. 3's r_max^2 sum I_k = %.0f per token (the paper's complexity); from the "
            "%.0f values stored per token: omega %.4f\n",
            (long long)first.params_per_token, first.eta_ttd, (long long)first.svd_equal_size_rank,
            first.svd_equal_size_energy.omega, first.energy_size, first.energy_size_stored,
            first.energy_stored.omega);
    return 0;
}

} // namespace embedlab::cli
