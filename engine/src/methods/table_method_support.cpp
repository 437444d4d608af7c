// What the table methods share (table_method_support.hpp).
#include "methods/table_method_support.hpp"

#include <tuple>

#include "methods/accounting_counts.hpp"

namespace embedlab::table_support {

namespace {
// Row-wise cosines of two [n, d] float64 blocks. Zero rows: identical zeros are
// perfect, a zero against a non-zero is not.
torch::Tensor row_cosines(const torch::Tensor& a, const torch::Tensor& b)
{
    const auto na = a.norm(2, 1), nb = b.norm(2, 1);
    auto cos = (a * b).sum(1) / (na * nb);
    cos = torch::where((na == 0) & (nb == 0), torch::ones_like(cos), cos);
    return torch::where((na == 0) ^ (nb == 0), torch::zeros_like(cos), cos);
}
} // namespace

ProgressFn sub_progress(const ProgressFn& progress, int64_t from, int64_t to)
{
    if (!progress)
        return {};
    return [=](int64_t done, int64_t total) {
        return progress(from + (total > 0 ? (to - from) * done / total : 0), 100);
    };
}

// Cosine of rebuilt to original rare rows: the paper's Table 9 distribution.
nlohmann::ordered_json rare_cosine_json(const torch::Tensor& table, const PartialSparseTokenEmbedding& e)
{
    const auto& rare = e.fit().rare_ids;
    if (rare.numel() == 0)
        return {{"rows", 0}};
    // In blocks of rows: only the R cosines are kept, never R x d in float64 (issue 20 item 9).
    const int64_t R = rare.numel(), block = 4096;
    auto cos = torch::empty({R}, torch::kDouble);
    for (int64_t r0 = 0; r0 < R; r0 += block) {
        const int64_t n = std::min(block, R - r0);
        cos.narrow(0, r0, n).copy_(
            row_cosines(table.index_select(0, rare.narrow(0, r0, n)).to(torch::kDouble),
                        e.rare_rows(r0, n).to(torch::kDouble)));
    }
    const auto sorted = std::get<0>(cos.sort());
    auto pct = [&](double p) {
        return sorted[static_cast<int64_t>(p * static_cast<double>(sorted.numel() - 1))].item<double>();
    };
    const auto hist = torch::histc(cos.clamp(-1, 1), 20, -1, 1).to(torch::kLong).contiguous();
    return {{"rows", rare.numel()},
            {"mean", cos.mean().item<double>()},
            {"min", pct(0)},
            {"p05", pct(0.05)},
            {"p25", pct(0.25)},
            {"p50", pct(0.5)},
            {"p75", pct(0.75)},
            {"p95", pct(0.95)},
            {"max", pct(1)},
            {"histogram_range", {-1.0, 1.0}},
            {"histogram", std::vector<int64_t>(hist.data_ptr<int64_t>(), hist.data_ptr<int64_t>() + 20)}};
}

EmbeddingAccounting account_stored(const std::string& method, int64_t V, int64_t d, int64_t params_after,
                                   int64_t model_params, int64_t flops_lookup, int64_t flops_head)
{
    using accounting_counts::Count;
    if (V < 1 || d < 1)
        throw InputError("vocabulary size and dimension must be positive, got V=" + std::to_string(V) +
                         ", d=" + std::to_string(d));
    // Checked (accounting_counts.hpp): within 2^62, or an InputError naming the terms.
    const Count vocab(V, "vocab"), dim(d, "dim"), after(params_after, "params_after");
    const Count before = multiply(vocab, dim, "parameters");
    const Count dense_head = multiply(2 * vocab, dim, "FLOPs");
    EmbeddingAccounting a;
    a.method = method;
    a.vocab = V;
    a.dim = d;
    a.params_before = before.value();
    a.params_after = after.value();
    a.ratio = static_cast<double>(params_after) / static_cast<double>(a.params_before);
    a.eta_emb = 1.0 - a.ratio;
    std::tie(a.model_params_before, a.model_params_after) =
        accounting_counts::model_counts(model_params, before, after);
    a.eta = static_cast<double>(a.model_params_before - a.model_params_after) /
            static_cast<double>(a.model_params_after);
    a.flops_per_token_dense = dense_head.value();
    a.flops_dense_lookup = 0;
    a.flops_dense_with_head = dense_head.value();
    a.eta_emb_with_positions = a.eta_emb;
    a.flops_lookup = Count(flops_lookup, "flops_lookup").value();
    a.flops_head = Count(flops_head, "flops_head").value();
    a.flops_per_token = flops_head;
    return a;
}

nlohmann::ordered_json loss_curve_json(const std::vector<FourierLossPoint>& curve, size_t limit)
{
    nlohmann::ordered_json steps = nlohmann::ordered_json::array(), losses = nlohmann::ordered_json::array();
    const size_t n = curve.size();
    size_t last = n; // index of the previous point taken
    for (size_t j = 0; j < std::min(n, limit); ++j) {
        const size_t i = n <= limit ? j : j * (n - 1) / (limit - 1);
        if (i == last)
            continue;
        last = i;
        steps.push_back(curve[i].step);
        losses.push_back(curve[i].loss);
    }
    return {{"steps", steps}, {"loss", losses}};
}

nlohmann::ordered_json energy_json(const EnergyEstimate& e)
{
    nlohmann::ordered_json j = {{"original_nu", e.original_nu},
                                {"original_tau", e.original_tau},
                                {"compressed_nu", e.compressed_nu},
                                {"compressed_tau", e.compressed_tau},
                                {"omega", e.omega}};
    if (e.omega_high > 0) {
        j["omega_low"] = e.omega_low;
        j["omega_high"] = e.omega_high;
    }
    return j;
}

} // namespace embedlab::table_support
