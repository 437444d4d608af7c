#include "embedlab/compress.hpp"

#include <chrono>
#include <cmath>

#include "embedlab/json_members.hpp"
#include "embedlab/table_method.hpp"
#include "methods/table_method_support.hpp"

namespace embedlab {

std::vector<std::string> compression_methods()
{
    std::vector<std::string> m;
    for (const auto& d : method_registry())
        if (d.part == CompressedPart::TokenEmbedding)
            m.push_back(d.name);
    return m;
}

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

CompressedEmbedding compress_table(const torch::Tensor& table, const CompressionSpec& spec,
                                   int64_t model_params, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (table.dim() != 2)
        throw InputError("the embedding table must be a matrix");
    CompressedEmbedding out;
    out.spec = spec;
    // Fit progress takes the first 80% of the bar, reconstruction metrics the rest.
    table_method(spec.method).fit(table, out, model_params, table_support::sub_progress(progress, 0, 80));
    out.reconstruction =
        measure_reconstruction(table, *out.embedding, table_support::sub_progress(progress, 80, 100));
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

namespace {

// The rebuild of a stored form a manifest names as its method (lrf), which no table
// method fits; null for any other name.
const StoredFormRebuild* method_of_its_own(const std::string& name)
{
    const StoredForm* form = find_method(name) ? nullptr : find_stored_form(name);
    if (!form || !form->names_a_method)
        return nullptr;
    const auto& rebuild = stored_rebuild(form->name, "stored form '" + name + "'");
    return rebuild.spec_fields ? &rebuild : nullptr;
}

} // namespace

nlohmann::ordered_json spec_json(const CompressionSpec& spec)
{
    nlohmann::ordered_json j = {{"method", spec.method}};
    // A stored form that names a method (lrf: finetune --from-scratch's factors) writes its
    // own; any other name that is not a table method is an error, never read as some
    // method's parameters.
    if (const StoredFormRebuild* form = method_of_its_own(spec.method))
        form->spec_fields(spec, j);
    else
        table_method(spec.method).spec_fields(spec, j);
    if (!spec.store.empty()) // which tensors it applied to: the manifest's stored_types
        j["store"] = spec.store;
    return j;
}

const char* const kFlopsConvention =
    "flops_lookup: building one token's row from the stored values (dense: 0, a read, as the PCA paper's "
    "Table II counts it); flops_head: the tied output head's product with every row, rebuilt where the "
    "method must (dense: 2 V d); flops_per_token: flops_head when the head is tied, else flops_lookup, and "
    "flops_per_token_dense the dense model's under the same rule. flops_dense_lookup (0) and "
    "flops_dense_with_head (2 V d) name the dense baseline under each convention: compare lookup with lookup";

nlohmann::ordered_json accounting_json(const EmbeddingAccounting& a)
{
    const EnergyOptions& o = a.energy_options;
    nlohmann::ordered_json j;
    EMBEDLAB_JSON_MEMBERS(j, a, method, vocab, dim, params_before, params_after, ratio, eta_emb,
                          position_params, eta_emb_with_positions, model_params_before, model_params_after,
                          eta, flops_lookup, flops_head, tied_head, flops_per_token, flops_per_token_dense,
                          flops_dense_lookup, flops_dense_with_head);
    j["flops_convention"] = kFlopsConvention;
    // A stored form that names a method (lrf) counts no fields of its own; any other name
    // that is not a table method is an error.
    nlohmann::ordered_json conventions{{"flops", kFlopsConvention}};
    if (!method_of_its_own(a.method)) {
        table_method(a.method).accounting_fields(a, j);
        table_method(a.method).conventions(a, conventions);
    }
    j["conventions"] = std::move(conventions);
    if (a.bits_per_value_before > 0)
        EMBEDLAB_JSON_MEMBERS(j["storage"], a, stored_type_before, bits_per_value_before,
                              bits_per_value_after, bytes_before, bytes_after, bytes_ratio, index_values,
                              index_bytes);
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
