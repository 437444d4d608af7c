// account: what a compressed embedding costs and saves, from sizes alone. The method's
// own fields are its flags (method_flags.hpp) and its own account() counts them
// (table_method.hpp): a method that can be counted without a table needs no code here.
#include <algorithm>
#include <cctype>
#include <limits>

#include "common.hpp"
#include "embedlab/accounting.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/quant_types.hpp"
#include "embedlab/table_method.hpp"
#include "method_flags.hpp"

namespace embedlab::cli {

namespace {

// d: --dim, or 0 when --shape gives it (tt, tucker). The engine takes d from the shape,
// checks that it agrees with --dim (check_request) and bounds every count (issue 57
// item 4: one bound, the engine's, for the CLI, the Python module and the GUI alike).
int64_t table_width(const Args& args, const CompressionRequest& first)
{
    if (args.has("--dim"))
        return args.get_int("--dim", 0, 1, std::numeric_limits<int64_t>::max());
    if (first.shape.empty())
        throw InputError("account: --dim d is required");
    return 0;
}

} // namespace

int command_account(const std::vector<std::string>& argv)
{
    std::set<std::string> valued{"--method",       "--vocab",     "--dim",
                                 "--model-params", "--positions", "--stored-type"},
        switches{"--json", "--untied"};
    add_method_flags(valued, switches);
    Args args("account", argv, valued, switches);
    CompressionRequest base;
    base.method = args.required("--method", method_names("|"));
    const TableMethod* found = nullptr;
    try {
        found = &table_method(base.method);
    } catch (const InputError& e) { // unknown, or not the token table (flat)
        throw InputError(std::string("account: ") + e.what());
    }
    const TableMethod& method = *found;
    // No bounds of the CLI's own beyond int64: the engine's accounting refuses a count
    // beyond what EmbedLab counts (2^62), naming it.
    const int64_t limit = std::numeric_limits<int64_t>::max();
    const int64_t vocab = args.get_int("--vocab", 0, 1, limit);
    if (!args.has("--vocab"))
        throw InputError("account: --vocab V is required");
    const int64_t model_params = args.get_int("--model-params", 0, 0, limit);
    // Issue 20: an untied head is not compressed; --positions N counts a learned position
    // table of N values in TensorSLM's eta_emb (F.3).
    const bool tied = !args.has("--untied");
    const int64_t positions = args.get_int("--positions", 0, 0, limit);
    // Issue 38: bytes when the table's stored type is given; factors are float32.
    auto stored_type = args.get("--stored-type");
    if (stored_type) // ggml's names: F32, Q4_0
        std::transform(stored_type->begin(), stored_type->end(), stored_type->begin(),
                       [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (stored_type && !(stored_bits_per_value(*stored_type) > 0))
        throw InputError("account: --stored-type '" + *stored_type +
                         "' is not a type EmbedLab counts (f32, " + quant_type_names() + ")");

    if (args.has("--store"))
        throw InputError("account: --store is counted after a fit: which factors its blocks fit follows from "
                         "their shapes (compress --store T reports the stored bytes)");
    const auto settings = method_flag_settings(args, "account", base);
    const int64_t dim = table_width(args, settings.front());
    std::vector<EmbeddingAccounting> rows;
    for (const auto& request : settings) {
        rows.push_back(account_setting(request, vocab, dim,
                                       {.model_params = model_params,
                                        .tied = tied,
                                        .positions = positions,
                                        .stored_type = stored_type.value_or("")},
                                       "account", field_flag));
    }

    if (args.has("--json")) {
        if (rows.size() == 1) {
            print_json(accounting_json(rows[0]));
        } else {
            Json results = Json::array();
            for (const auto& r : rows)
                results.push_back(accounting_json(r));
            print_json({{"method", base.method}, {"results", results}});
        }
        return 0;
    }
    const auto& first = rows[0];
    const EnergyOptions energy = first.energy_options;
    std::printf("%s, V = %lld, d = %lld: dense table %.2fM params, %.2fM FLOPs per token (%s)\n",
                base.method.c_str(), (long long)first.vocab, (long long)first.dim, first.params_before / 1e6,
                first.flops_per_token_dense / 1e6, tied ? "tied head" : "untied: the lookup alone");
    // Issue 36 item 4: both conventions for the dense baseline, named.
    std::printf(
        "FLOPs convention: lookup = building one row (dense: %lld, a read, as the PCA paper's Table II); "
        "with head = the tied head's product with every row (dense: %.2fM = 2 V d); FLOPs/token = %s\n",
        (long long)first.flops_dense_lookup, first.flops_dense_with_head / 1e6,
        tied ? "with head" : "lookup (untied)");
    const bool energy_model = first.energy.omega > 0;
    std::printf("%-28s %12s %8s %8s %12s %12s %8s%s\n", "setting", "params", "ratio", "eta_emb", "lookup",
                "FLOPs/token", "omega", stored_type ? "        bytes  bytes ratio" : "");
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        std::printf("%-28s %11.2fM %8.4f %8.4f %12lld %11.4fM %8s", describe_request(settings[i]).c_str(),
                    r.params_after / 1e6, r.ratio, r.eta_emb, (long long)r.flops_lookup,
                    r.flops_per_token / 1e6,
                    energy_model ? std::to_string(r.energy.omega).substr(0, 6).c_str() : "-");
        if (stored_type)
            std::printf(" %12.0f %12.4f", r.bytes_after, r.bytes_ratio);
        std::printf("\n");
    }
    if (energy_model)
        std::printf(
            "energy (TensorSLM eqs. 2-5, l = %lld tokens): %s nu %g, tau %g, nu/tau %.3g (the paper's "
            "Appendix F default: 5)\n",
            (long long)energy.tokens, energy.device.empty() ? "" : (energy.device + ":").c_str(), energy.nu,
            energy.tau, energy.tau > 0 ? energy.nu / energy.tau : 0.0);
    if (energy_model && !energy.device.empty())
        std::printf("energy: %s at nu %g, tau %g; omega over its ranges %.4f..%.4f\n", energy.device.c_str(),
                    energy.nu, energy.tau, first.energy.omega_low, first.energy.omega_high);
    if (stored_type)
        std::printf("bytes: the table's %s values take %.4g bits each (%.0f bytes); the method's values %.4g "
                    "bits, indices at their own width\n",
                    first.stored_type_before.c_str(), first.bits_per_value_before, first.bytes_before,
                    first.bits_per_value_after);
    if (positions > 0)
        std::printf("eta_emb with the %lld-value position table (TensorSLM F.3): %.4f\n",
                    (long long)positions, first.eta_emb_with_positions);
    const std::string note = method.accounting_note(first);
    if (!note.empty())
        std::printf("%s\n", note.c_str());
    return 0;
}

} // namespace embedlab::cli
