#include "embedlab/compress.hpp"

#include <chrono>
#include <cmath>

#include "embedlab/experiment_request.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/tensor_train.hpp"
#include "embedlab/tucker.hpp"

namespace embedlab {

const std::vector<std::string>& compression_methods()
{
    static const std::vector<std::string> methods = [] {
        std::vector<std::string> m;
        for (const auto& d : method_registry())
            if (d.part == CompressedPart::TokenEmbedding)
                m.push_back(d.name);
        return m;
    }();
    return methods;
}

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

ReconstructionMetrics measure_reconstruction(const torch::Tensor& original, const TokenEmbedding& compressed,
                                             const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const int64_t V = original.size(0), block = 4096;
    double err2 = 0, norm2 = 0, cos_sum = 0;
    ReconstructionMetrics m;
    m.worst_cosine = 2;
    for (int64_t v0 = 0; v0 < V; v0 += block) {
        const int64_t n = std::min(block, V - v0);
        const auto ids = torch::arange(v0, v0 + n, torch::kLong);
        const auto a = original.narrow(0, v0, n).to(torch::kDouble);
        const auto b = compressed.lookup(ids).to(torch::kDouble);
        // One scratch block for the squares and products (issue 21: fewer n x d float64
        // temporaries at once); the same operations on the same values as out-of-place.
        auto scratch = a - b;
        scratch.pow_(2);
        err2 += scratch.sum().item<double>();
        torch::pow_out(scratch, a, 2);
        norm2 += scratch.sum().item<double>();
        const auto na = a.norm(2, 1), nb = b.norm(2, 1);
        torch::mul_out(scratch, a, b);
        auto cos = scratch.sum(1) / (na * nb);
        scratch = torch::Tensor();
        cos = torch::where((na == 0) & (nb == 0), torch::ones_like(cos), cos);
        cos = torch::where((na == 0) ^ (nb == 0), torch::zeros_like(cos), cos);
        cos_sum += cos.sum().item<double>();
        const auto worst = cos.argmin().item<int64_t>();
        if (const double w = cos[worst].item<double>(); w < m.worst_cosine) {
            m.worst_cosine = w;
            m.worst_row = v0 + worst;
        }
        report_progress(progress, v0 + n, V);
    }
    m.relative_frobenius = norm2 > 0 ? std::sqrt(err2 / norm2) : std::sqrt(err2);
    m.mean_cosine = V > 0 ? cos_sum / static_cast<double>(V) : 1.0;
    return m;
}

namespace {

// Fit progress takes the first 80% of the bar, reconstruction metrics the rest.
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

// Accounting from a stored-value count, for methods without a closed form.
EmbeddingAccounting account_stored(const std::string& method, int64_t V, int64_t d, int64_t params_after,
                                   int64_t model_params, int64_t flops_lookup, int64_t flops_head)
{
    EmbeddingAccounting a;
    a.method = method;
    a.vocab = V;
    a.dim = d;
    a.params_before = V * d;
    a.params_after = params_after;
    a.ratio = static_cast<double>(params_after) / static_cast<double>(a.params_before);
    a.eta_emb = 1.0 - a.ratio;
    a.model_params_before = model_params > 0 ? model_params : a.params_before;
    a.model_params_after = a.model_params_before - a.params_before + params_after;
    a.eta = static_cast<double>(a.model_params_before - a.model_params_after) /
            static_cast<double>(a.model_params_after);
    a.flops_per_token_dense = 2 * V * d;
    a.flops_dense_lookup = 0;
    a.flops_dense_with_head = 2 * V * d;
    a.eta_emb_with_positions = a.eta_emb;
    a.flops_lookup = flops_lookup;
    a.flops_head = flops_head;
    a.flops_per_token = flops_head;
    return a;
}

// At most `limit` points of the loss curve, evenly spaced, first and last kept.
nlohmann::ordered_json loss_curve_json(const std::vector<FourierLossPoint>& curve, size_t limit = 200)
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

} // namespace

CompressedEmbedding compress_table(const torch::Tensor& table, const CompressionSpec& spec,
                                   int64_t model_params, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (table.dim() != 2)
        throw InputError("the embedding table must be a matrix");
    const int64_t V = table.size(0), d = table.size(1);
    CompressedEmbedding out;
    out.spec = spec;
    const Method method = method_descriptor(spec.method).id;
    if (method == Method::Flat)
        throw InputError("method 'flat' compresses the attention values, not the token embedding");
    if (method == Method::PCA || method == Method::SVD) {
        const auto kind = method == Method::PCA ? LowRankKind::PCA : LowRankKind::SVD;
        auto fit = fit_low_rank(table, kind, spec.rank, sub_progress(progress, 0, 80));
        out.fit_seconds = fit.seconds;
        out.fit = {
            {"eigenvalues", fit.eigenvalues},
            {"explained_variance", fit.explained_variance},
            {"explained_variance_at_rank", fit.explained_variance[static_cast<size_t>(spec.rank - 1)]}};
        out.embedding = std::make_shared<LowRankTokenEmbedding>(fit);
        out.accounting = account_low_rank(kind, V, d, spec.rank, {}, model_params);
    } else if (method == Method::TT) {
        auto fit = fit_tensor_train(
            table,
            {.shape = spec.shape, .ranks = spec.ranks, .eps = spec.eps, .uniform_ranks = spec.uniform_ranks},
            sub_progress(progress, 0, 80));
        out.fit_seconds = fit.seconds;
        out.spec.ranks = fit.ranks;
        out.fit = {{"ranks", fit.ranks}, {"per_token_ranks", fit.token_ranks.defined()}};
        if (fit.eps > 0)
            out.fit["mean_needed_ranks"] = fit.mean_needed_ranks;
        // The fit's cores move in (rearranged in place, not copied).
        auto embedding = std::make_shared<TensorTrainTokenEmbedding>(std::move(fit));
        if (embedding->per_token_ranks()) {
            const auto r = fit.token_ranks.contiguous();
            const std::vector<int32_t> own(r.data_ptr<int32_t>(), r.data_ptr<int32_t>() + r.numel());
            out.accounting = account_tensor_train_per_token(V, fit.shape, own, {}, model_params);
        } else {
            out.accounting = account_tensor_train(V, fit.shape, fit.ranks, {}, model_params);
        }
        out.embedding = std::move(embedding);
    } else if (method == Method::Tucker) {
        auto fit =
            fit_tucker(table, {.shape = spec.shape, .ranks = spec.ranks}, sub_progress(progress, 0, 80));
        out.fit_seconds = fit.seconds;
        // How much of each mode's energy the kept eigenvectors hold (HOSVD's per-mode bound).
        nlohmann::ordered_json kept = nlohmann::ordered_json::array();
        for (size_t k = 0; k < fit.eigenvalues.size(); ++k) {
            double all = 0, top = 0;
            for (size_t j = 0; j < fit.eigenvalues[k].size(); ++j) {
                all += fit.eigenvalues[k][j];
                top += j < static_cast<size_t>(fit.ranks[k]) ? fit.eigenvalues[k][j] : 0.0;
            }
            kept.push_back(all > 0 ? top / all : 1.0);
        }
        out.fit = {{"ranks", fit.ranks},
                   {"mode_eigenvalues", fit.eigenvalues},
                   {"mode_energy_kept", kept},
                   {"tied_head", "logits in core space: the hidden state is projected onto the factors once "
                                 "(h x_k U_k^T), then multiplied with every token's core; no dense copy"}};
        out.embedding = std::make_shared<TuckerTokenEmbedding>(fit);
        out.accounting = account_tucker(V, spec.shape, spec.ranks, model_params);
    } else if (method_descriptor(method).needs_frequency_text) {
        if (!spec.split)
            throw InputError("method '" + spec.method +
                             "' needs a frequency split (--freq-text and --keep-ratio)");
        const auto kind = method == Method::LLE      ? PartialSparseKind::LLE
                          : method == Method::LLEUnk ? PartialSparseKind::Unk
                                                     : PartialSparseKind::PCA;
        auto fit = fit_partial_sparse(
            table, *spec.split,
            {.kind = kind, .k = spec.k, .reg = spec.reg, .unk_id = spec.unk_id, .knn = spec.knn},
            sub_progress(progress, 0, 80));
        out.fit_seconds = fit.seconds;
        const auto knn = knn_json(fit.knn);
        auto embedding = std::make_shared<PartialSparseTokenEmbedding>(std::move(fit));
        out.fit = {{"common", spec.split->common.size()},
                   {"rare", spec.split->rare.size()},
                   {"rare_cosine", rare_cosine_json(table, *embedding)},
                   // METHODS 0: a tied head must not keep a dense copy.
                   {"tied_head", "logits use the rebuilt table, rebuilt once per forward call from the "
                                 "stored common rows and rare-token codes; no dense copy is kept, so a tied "
                                 "model keeps the whole saving"}};
        if (kind == PartialSparseKind::LLE)
            out.fit["knn"] = knn;
        // A rare row is a weighted sum of k common rows (lle), the shared unk row (lle-unk) or
        // z P + mu of rank k (lle-pca); common rows are read. The tied head rebuilds the R
        // rare rows once, then multiplies with all V.
        const int64_t rare = static_cast<int64_t>(spec.split->rare.size());
        // LLE as rebuild_rare runs it: each neighbour row normalised (2d for its norm,
        // 2d to add it weighted), then the sum's norm (2d) and the rescale (d): 4 k d + 3 d.
        const int64_t rare_lookup = kind == PartialSparseKind::LLE   ? 4 * spec.k * d + 3 * d
                                    : kind == PartialSparseKind::Unk ? 0
                                                                     : 2 * spec.k * d + d;
        out.accounting = account_stored(spec.method, V, d, embedding->parameter_count(), model_params,
                                        rare_lookup, rare * rare_lookup + 2 * V * d);
        out.accounting.index_values = embedding->index_values();
        out.accounting.index_bytes = out.accounting.index_values * index_bytes_for(V);
        out.fit["flops_lookup_note"] = "flops_lookup is a rare token's; a common token's row is read (0)";
        out.embedding = std::move(embedding);
    } else { // Method::Fourier
        const FourierOptions options{.mlp = parse_fourier_mlp(spec.mlp),
                                     .hidden_ratio = spec.hidden_ratio,
                                     .norm = spec.norm,
                                     .loss = spec.loss,
                                     .steps = spec.steps,
                                     .lr = spec.lr,
                                     .batch = spec.batch,
                                     .weight_decay = spec.weight_decay,
                                     .seed = spec.seed};
        auto fit = fit_fourier_embedding(table, options, sub_progress(progress, 0, 80));
        out.fit_seconds = fit.seconds;
        auto embedding = std::make_shared<FourierTokenEmbedding>(fit.params);
        // The tied head rebuilds all V rows at every call: time one call for one row.
        const auto r0 = std::chrono::steady_clock::now();
        {
            c10::InferenceMode guard;
            embedding->project(torch::zeros({1, d}, torch::kFloat32));
        }
        const double head_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
        const bool folded = fit.params.mlp == FourierMlp::Linear && !fit.params.norm;
        out.fit = {{"mlp", spec.mlp},
                   {"hidden", fit.params.hidden},
                   {"norm", spec.norm},
                   {"loss", spec.loss},
                   {"initial_loss", fit.initial_loss},
                   {"final_loss", fit.final_loss},
                   {"final_mse", fit.final_mse},
                   {"parameters", embedding->parameter_count()},
                   {"loss_curve", loss_curve_json(fit.loss_curve)},
                   {"flops_per_row", embedding->flops_per_row()},
                   {"tied_head",
                    {{"rows_rebuilt_per_call", V},
                     {"rebuild_flops_per_call", V * embedding->flops_per_row()},
                     {"seconds_per_call", head_call},
                     {"mlp_folded_into_hidden", folded},
                     {"note", std::string("no table is stored: a tied head rebuilds all V rows in blocks of "
                                          "4096 at every call, on top of the usual hidden E^T product") +
                                  (folded ? "; linear without norm folds the MLP into the hidden states, "
                                            "h E^T = (h + h W) T^T + h b, so only the features are rebuilt"
                                          : "") +
                                  "; accounting.flops_per_token charges a whole rebuild to each token (as "
                                  "for tt), an upper bound when a call has many tokens"}}}};
        // As for tt: the tied head of one token needs every row rebuilt (features,
        // MLP, residual, norm) and one product with each; a batch shares the rebuild.
        // Folded: features only, plus h W and h b for the token.
        out.accounting = account_stored(
            spec.method, V, d, embedding->parameter_count(), model_params, embedding->flops_per_row(),
            folded ? V * (d + 2 * d) + 2 * d * d + 2 * d : V * (embedding->flops_per_row() + 2 * d));
        out.embedding = std::move(embedding);
    }
    out.reconstruction = measure_reconstruction(table, *out.embedding, sub_progress(progress, 80, 100));
    out.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

nlohmann::ordered_json knn_json(const KnnReport& r)
{
    nlohmann::ordered_json j = {{"kind", knn_kind_name(r.kind)}};
    if (r.kind == KnnKind::IVF) {
        j["nlist"] = r.nlist;
        j["nprobe"] = r.nprobe;
        if (r.recall_sample > 0) // none measured: no figure
            j["recall_at_k"] = r.recall_at_k;
        j["recall_sample"] = r.recall_sample;
        j["kmeans_iterations"] = r.kmeans_iterations;
    }
    j["seconds"] = r.seconds;
    if (r.kind == KnnKind::IVF)
        j["recall_seconds"] = r.recall_seconds;
    return j;
}

nlohmann::ordered_json spec_json(const CompressionSpec& spec)
{
    nlohmann::ordered_json j = {{"method", spec.method}};
    const auto* known = find_method(spec.method);
    const Method method = known ? known->id : Method::PCA;
    if (method == Method::TT) {
        j["shape"] = spec.shape;
        j["ranks"] = spec.ranks; // eps: each position's largest (the cores' sizes)
        if (spec.eps > 0) {
            j["eps"] = spec.eps;
            // Per token: every token's own ranks are stored as tt.token_ranks.
            j["rank_mode"] = spec.uniform_ranks ? "uniform" : "per_token";
        }
    } else if (method == Method::Tucker) {
        j["shape"] = spec.shape;
        j["ranks"] = spec.ranks; // r_1..r_N
    } else if (known && known->needs_frequency_text) {
        j["k"] = spec.k;
        if (method == Method::LLE)
            j["reg"] = spec.reg;
        if (method == Method::LLE && spec.knn.kind == KnnKind::IVF) { // 0: automatic (fit.knn: as run)
            j["knn"] = knn_kind_name(spec.knn.kind);
            j["nlist"] = spec.knn.nlist;
            j["nprobe"] = spec.knn.nprobe;
        }
        if (method == Method::LLEUnk)
            j["unk_id"] = spec.unk_id;
        if (spec.split) {
            j["keep_ratio"] = spec.split->keep_ratio;
            j["common"] = spec.split->common.size();
            j["rare"] = spec.split->rare.size();
        }
    } else if (method == Method::Fourier) {
        j["mlp"] = spec.mlp;
        if (spec.mlp == "geglu")
            j["hidden_ratio"] = spec.hidden_ratio;
        j["norm"] = spec.norm;
        j["loss"] = spec.loss;
        j["steps"] = spec.steps;
        j["lr"] = spec.lr;
        j["batch"] = spec.batch;
        j["weight_decay"] = spec.weight_decay;
        j["seed"] = spec.seed;
    } else {
        j["rank"] = spec.rank;
    }
    return j;
}

namespace {
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
} // namespace

const char* const kFlopsConvention =
    "flops_lookup: building one token's row from the stored values (dense: 0, a read, as the PCA paper's "
    "Table II counts it); flops_head: the tied output head's product with every row, rebuilt where the "
    "method must (dense: 2 V d); flops_per_token: flops_head when the head is tied, else flops_lookup, and "
    "flops_per_token_dense the dense model's under the same rule. flops_dense_lookup (0) and "
    "flops_dense_with_head (2 V d) name the dense baseline under each convention: compare lookup with lookup";

nlohmann::ordered_json accounting_json(const EmbeddingAccounting& a)
{
    const EnergyOptions& o = a.energy_options;
    nlohmann::ordered_json j = {{"method", a.method},
                                {"vocab", a.vocab},
                                {"dim", a.dim},
                                {"params_before", a.params_before},
                                {"params_after", a.params_after},
                                {"ratio", a.ratio},
                                {"eta_emb", a.eta_emb},
                                {"position_params", a.position_params},
                                {"eta_emb_with_positions", a.eta_emb_with_positions},
                                {"model_params_before", a.model_params_before},
                                {"model_params_after", a.model_params_after},
                                {"eta", a.eta},
                                {"flops_lookup", a.flops_lookup},
                                {"flops_head", a.flops_head},
                                {"tied_head", a.tied_head},
                                {"flops_per_token", a.flops_per_token},
                                {"flops_per_token_dense", a.flops_per_token_dense},
                                {"flops_dense_lookup", a.flops_dense_lookup},
                                {"flops_dense_with_head", a.flops_dense_with_head},
                                {"flops_convention", kFlopsConvention}};
    const auto* known = find_method(a.method);
    const Method method = known ? known->id : Method::Fourier; // lrf: the closed form below does not apply
    if (method == Method::TT) {
        j["shape"] = a.shape;
        j["ranks"] = a.ranks;
        j["rank_mode"] = a.per_token_ranks ? "per_token" : "uniform";
        if (a.per_token_ranks) {
            j["mean_ranks"] = a.mean_ranks;
            j["mean_params_per_token"] = a.mean_params_per_token;
        }
        j["params_per_token"] = a.params_per_token;
        j["eta_ttd"] = a.eta_ttd;
        j["energy_size"] = a.energy_size;
        j["energy_size_definition"] = "r_max^2 sum I_k per token: TensorSLM eq. 3's complexity term, as the "
                                      "paper computes omega (per-token ranks: the mean of each token's own)";
        j["energy"] = energy_json(a.energy);
        j["energy_size_stored"] = a.energy_size_stored;
        j["energy_stored"] = energy_json(a.energy_stored);
        j["svd_equal_size_rank"] = a.svd_equal_size_rank;
        j["svd_equal_size_energy"] = energy_json(a.svd_equal_size_energy);
    } else if (method == Method::PCA || method == Method::SVD) {
        j["rank"] = a.rank;
        j["energy"] = energy_json(a.energy);
    } else if (method == Method::Tucker) {
        j["shape"] = a.tucker_shape;
        j["ranks"] = a.tucker_ranks;
        j["core_values_per_token"] = a.core_values_per_token;
        j["factor_values"] = a.factor_values;
        j["flops_note"] = "lookup: the core's product with U_1..U_N mode by mode; tied head: the hidden "
                          "state projected onto the factors, then one product with every core";
    }
    if (a.bits_per_value_before > 0)
        j["storage"] = {{"stored_type_before", a.stored_type_before},
                        {"bits_per_value_before", a.bits_per_value_before},
                        {"bits_per_value_after", a.bits_per_value_after},
                        {"bytes_before", a.bytes_before},
                        {"bytes_after", a.bytes_after},
                        {"bytes_ratio", a.bytes_ratio},
                        {"index_values", a.index_values},
                        {"index_bytes", a.index_bytes}};
    j["energy_model"] = {{"nu", o.nu},
                         {"tau", o.tau},
                         {"nu_over_tau", o.tau > 0 ? o.nu / o.tau : 0.0},
                         {"tokens", o.tokens},
                         {"source", "TensorSLM eqs. 2-5 (METHODS.md 5); the paper's Appendix F default is "
                                    "nu / tau = 5"}};
    if (const EnergyDevice* device = o.device.empty() ? nullptr : find_energy_device(o.device))
        j["energy_model"]["device"] = {{"name", device->name},
                                       {"description", device->description},
                                       {"nu_range", {device->nu_low, device->nu_high}},
                                       {"tau_range", {device->tau_low, device->tau_high}},
                                       {"note", "nu and tau at the ranges' midpoints; omega_low/omega_high "
                                                "at the corners of the ranges"}};
    return j;
}

nlohmann::ordered_json reconstruction_json(const ReconstructionMetrics& r)
{
    return {{"relative_frobenius", r.relative_frobenius},
            {"mean_cosine", r.mean_cosine},
            {"worst_cosine", r.worst_cosine},
            {"worst_row", r.worst_row}};
}

} // namespace embedlab
