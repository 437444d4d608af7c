#include "embedlab/accounting.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <tuple>

#include "embedlab/error.hpp"
#include "embedlab/name_table.hpp"
#include "io/gguf_quants.hpp"
#include "methods/accounting_counts.hpp"

namespace embedlab {

using accounting_counts::Count;

namespace {

// V and d positive, and the table's V d parameters within what EmbedLab counts (2^62).
void check_sizes(int64_t vocab, int64_t dim)
{
    if (vocab < 1 || dim < 1)
        throw InputError("vocabulary size and dimension must be positive, got V=" + std::to_string(vocab) +
                         ", d=" + std::to_string(dim));
    multiply(Count(vocab, "vocab"), Count(dim, "dim"), "parameters");
}

// What every method's accounting starts from: the method and the table's size.
EmbeddingAccounting accounting_of(const char* method, int64_t vocab, int64_t dim)
{
    EmbeddingAccounting a;
    a.method = method;
    a.vocab = vocab;
    a.dim = dim;
    return a;
}

std::string join(const std::vector<int64_t>& v, const char* sep)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i)
            s += sep;
        s += std::to_string(v[i]);
    }
    return s;
}

// The product of a tensorised row's shape (tt, tucker): d. InputError for a factor
// below 1 or a product beyond 2^62, before anything multiplies it.
int64_t shape_dim(const std::string& method, const std::vector<int64_t>& shape)
{
    for (int64_t f : shape)
        if (f < 1)
            throw InputError(method + " shape factors must be positive, got " + join(shape, "x"));
    Count d(1);
    for (size_t k = 0; k < shape.size(); ++k)
        d = d * Count(shape[k], "I_" + std::to_string(k + 1));
    return d.value();
}

double energy_total(double nu_part, double tau_part)
{
    return nu_part + tau_part;
}

// The figures every method shares, from a.vocab, a.dim and the stored values `after`
// (a Count, so every sum below is checked).
void fill_common(EmbeddingAccounting& a, const Count& after, int64_t model_params)
{
    const Count V(a.vocab, "vocab"), d(a.dim, "dim");
    const Count before = multiply(V, d, "parameters");
    const Count dense_head = multiply(2 * V, d, "FLOPs");
    a.params_before = before.value();
    a.params_after = after.value();
    a.ratio = static_cast<double>(a.params_after) / static_cast<double>(a.params_before);
    a.eta_emb = static_cast<double>(a.params_before - a.params_after) / static_cast<double>(a.params_before);
    std::tie(a.model_params_before, a.model_params_after) =
        accounting_counts::model_counts(model_params, before, after);
    a.eta = static_cast<double>(a.model_params_before - a.model_params_after) /
            static_cast<double>(a.model_params_after);
    a.flops_per_token_dense = dense_head.value();
    a.flops_dense_lookup = 0;
    a.flops_dense_with_head = dense_head.value();
    a.eta_emb_with_positions = a.eta_emb;
}

} // namespace

void apply_energy(EmbeddingAccounting& a, const EnergyOptions& energy)
{
    a.energy_options = energy;
    // By what the accounting holds: a TT shape, or a low-rank rank; others have no model.
    if (!a.shape.empty()) {
        a.energy = tt_energy(a.vocab, a.dim, a.energy_size, energy);
        a.energy_stored = tt_energy(a.vocab, a.dim, a.energy_size_stored, energy);
        a.svd_equal_size_energy = svd_energy(a.vocab, a.dim, a.svd_equal_size_rank, energy);
    } else if (a.rank > 0) {
        a.energy = svd_energy(a.vocab, a.dim, a.rank, energy);
    }
}

double stored_bits_per_value(const std::string& type)
{
    const auto* traits = io::ggml_type_traits(type); // F32/F16/BF16 and the block formats
    return traits ? 8.0 * traits->block_bytes / traits->block_elems : 0.0;
}

void apply_storage(EmbeddingAccounting& a, const std::string& stored_type_before, double bits_per_value_after)
{
    const double before = stored_bits_per_value(stored_type_before);
    if (!(before > 0) || !(bits_per_value_after > 0))
        return;
    a.stored_type_before = stored_type_before;
    a.bits_per_value_before = before;
    a.bits_per_value_after = bits_per_value_after;
    a.bytes_before = static_cast<double>(a.params_before) * before / 8;
    a.bytes_after = static_cast<double>(a.params_after - a.index_values) * bits_per_value_after / 8 +
                    static_cast<double>(a.index_bytes);
    a.bytes_ratio = a.bytes_after / a.bytes_before;
}

void apply_model_context(EmbeddingAccounting& a, bool tied_head, int64_t position_params)
{
    const Count dense_head = multiply(2 * Count(a.vocab, "vocab"), Count(a.dim, "dim"), "FLOPs");
    const Count with_positions = add(Count(a.params_before, "params_before"),
                                     Count(std::max<int64_t>(position_params, 0), "positions"), "parameters");
    a.tied_head = tied_head;
    a.flops_per_token = tied_head ? a.flops_head : a.flops_lookup;
    a.flops_per_token_dense = tied_head ? dense_head.value() : 0;
    a.flops_dense_lookup = 0;
    a.flops_dense_with_head = dense_head.value();
    a.position_params = std::max<int64_t>(position_params, 0);
    a.eta_emb_with_positions =
        static_cast<double>(a.params_before - a.params_after) / static_cast<double>(with_positions.value());
}

const std::vector<EnergyDevice>& energy_devices()
{
    // TensorSLM Table 1: Raspberry Pi 5 (Cortex-A76) add 1.0-2.5, mult 1.2-3, memory 70-260;
    // A100 server add 5-12, mult 6-15, memory 100-450 (pJ per float32).
    static const std::vector<EnergyDevice> devices{
        {"raspberry-pi-5", "Raspberry Pi 5 (Cortex-A76 CPU), TensorSLM Table 1", 70, 260, 1.0, 3.0},
        {"a100-server", "GPU server (A100), TensorSLM Table 1", 100, 450, 5, 15},
    };
    return devices;
}

const EnergyDevice* find_energy_device(const std::string& name)
{
    return row_with_name(energy_devices(), name);
}

std::string energy_device_names()
{
    std::string known;
    for (const auto& e : energy_devices())
        known += (known.empty() ? "" : ", ") + std::string(e.name);
    return known;
}

EnergyOptions energy_options_for_device(const std::string& name, int64_t tokens)
{
    const EnergyDevice* d = find_energy_device(name);
    if (!d)
        throw InputError("unknown energy device '" + name + "' (known: " + energy_device_names() + ")");
    return {.nu = (d->nu_low + d->nu_high) / 2,
            .tau = (d->tau_low + d->tau_high) / 2,
            .tokens = tokens,
            .device = d->name};
}

namespace {
// omega at the device's corners: the lowest tau/nu and the highest bound it.
template <class F> void device_range(EnergyEstimate& e, const EnergyOptions& o, F&& estimate)
{
    const EnergyDevice* d = o.device.empty() ? nullptr : find_energy_device(o.device);
    if (!d)
        return;
    EnergyOptions cheap = o, dear = o;
    cheap.nu = d->nu_high;
    cheap.tau = d->tau_low;
    dear.nu = d->nu_low;
    dear.tau = d->tau_high;
    const double a = estimate(cheap).omega, b = estimate(dear).omega;
    e.omega_low = std::min(a, b);
    e.omega_high = std::max(a, b);
}
} // namespace

EnergyEstimate svd_energy(int64_t vocab, int64_t dim, int64_t rank, const EnergyOptions& o)
{
    const double V = static_cast<double>(vocab), d = static_cast<double>(dim), k = static_cast<double>(rank),
                 l = static_cast<double>(o.tokens);
    EnergyEstimate e;
    e.original_nu = o.nu * (d * V + l * d);
    e.compressed_nu = o.nu * (k * (V + 2 * d + l + 1) + l * d);
    e.compressed_tau = o.tau * (2 * l * d * k - l * d + k * d);
    e.omega = energy_total(e.compressed_nu, e.compressed_tau) / energy_total(e.original_nu, e.original_tau);
    device_range(e, o, [&](EnergyOptions x) {
        x.device.clear();
        return svd_energy(vocab, dim, rank, x);
    });
    return e;
}

namespace {
// N I r^2 of eqs. 3-4, generalised to unequal I_k as r^2 sum I_k, r the largest rank.
double tt_energy_size(const std::vector<int64_t>& shape, const int64_t* ranks, size_t count)
{
    const double r = static_cast<double>(*std::max_element(ranks, ranks + count));
    return r * r * static_cast<double>(std::accumulate(shape.begin(), shape.end(), int64_t{0}));
}
} // namespace

EnergyEstimate tt_energy(int64_t vocab, int64_t dim, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& ranks, const EnergyOptions& o)
{
    return tt_energy(vocab, dim, tt_energy_size(shape, ranks.data(), ranks.size()), o);
}

EnergyEstimate tt_energy(int64_t vocab, int64_t dim, double nir2, const EnergyOptions& o)
{
    const double V = static_cast<double>(vocab), d = static_cast<double>(dim),
                 l = static_cast<double>(o.tokens);
    EnergyEstimate e;
    e.original_nu = o.nu * (d * V + l * d);
    e.compressed_nu = o.nu * (V * nir2 + l * nir2 + l * d);
    e.compressed_tau = o.tau * nir2;
    e.omega = energy_total(e.compressed_nu, e.compressed_tau) / energy_total(e.original_nu, e.original_tau);
    device_range(e, o, [&](EnergyOptions x) {
        x.device.clear();
        return tt_energy(vocab, dim, nir2, x);
    });
    return e;
}

EmbeddingAccounting account_low_rank(LowRankKind kind, int64_t vocab, int64_t dim, int64_t rank,
                                     const EnergyOptions& energy, int64_t model_params)
{
    check_sizes(vocab, dim);
    if (rank < 1 || rank > dim)
        throw InputError("rank must be between 1 and d = " + std::to_string(dim) + ", got " +
                         std::to_string(rank));
    const char* method = kind == LowRankKind::PCA ? "pca" : kind == LowRankKind::SVD ? "svd" : "lrf";
    EmbeddingAccounting a = accounting_of(method, vocab, dim);
    a.rank = rank;
    const Count V(vocab, "vocab"), d(dim, "dim"), k(rank, "rank");
    // PCA stores Z (V x k), P (k x d) and the mean mu (d); SVD has no mean.
    const Count after = V * k + d * k + (kind == LowRankKind::PCA ? d : Count(0));
    fill_common(a, after, model_params);
    // METHODS 1: the tied head through the factors touches every stored value once;
    // a lookup is z_t P (+ mu).
    a.flops_head = (2 * after.renamed("params_after")).value();
    a.flops_lookup = (2 * d * k + (kind == LowRankKind::PCA ? d : Count(0))).value();
    a.flops_per_token = a.flops_head;
    a.energy = svd_energy(vocab, dim, rank, energy);
    a.energy_options = energy;
    return a;
}

std::vector<int64_t> tt_rank_caps(const std::vector<int64_t>& shape)
{
    std::vector<int64_t> caps(shape.size() + 1, 1);
    const int64_t total = shape_dim("tensor-train", shape);
    int64_t left = 1;
    for (size_t k = 1; k < shape.size(); ++k) {
        left *= shape[k - 1];
        caps[k] = std::min(left, total / left);
    }
    return caps;
}

namespace {

// Positive factors whose product is d (tt and tucker tensorise a row alike).
// Multiplied only while the product stays within d, so a lying file cannot overflow it.
void check_shape_product(const std::string& method, int64_t dim, const std::vector<int64_t>& shape)
{
    for (int64_t f : shape)
        if (f < 1)
            throw InputError(method + " shape factors must be positive, got " + join(shape, "x"));
    int64_t product = 1;
    bool beyond = false;
    for (int64_t f : shape) {
        if (f > dim / product) {
            beyond = true;
            break;
        }
        product *= f;
    }
    if (beyond || product != dim)
        throw InputError(method + " shape " + join(shape, "x") + " has product " +
                         (beyond ? "greater than d" : std::to_string(product)) +
                         ", not d = " + std::to_string(dim));
}

} // namespace

void check_tt_shape_and_ranks(int64_t dim, const std::vector<int64_t>& shape,
                              const std::vector<int64_t>& ranks)
{
    if (shape.size() < 2)
        throw InputError("a tensor-train shape needs at least 2 factors, got " +
                         std::to_string(shape.size()));
    check_shape_product("tensor-train", dim, shape);
    if (ranks.size() != shape.size() + 1)
        throw InputError("a " + std::to_string(shape.size()) + "-factor shape needs " +
                         std::to_string(shape.size() + 1) + " ranks r_0..r_N, got " +
                         std::to_string(ranks.size()));
    if (ranks.front() != 1 || ranks.back() != 1)
        throw InputError("tensor-train ranks must start and end with 1, got " + join(ranks, ","));
    const auto caps = tt_rank_caps(shape);
    for (size_t k = 1; k + 1 < ranks.size(); ++k)
        if (ranks[k] < 1 || ranks[k] > caps[k])
            throw InputError("tensor-train rank r_" + std::to_string(k) + " = " + std::to_string(ranks[k]) +
                             " is outside [1, " + std::to_string(caps[k]) + "] for shape " +
                             join(shape, "x"));
}

EmbeddingAccounting account_tensor_train(int64_t vocab, const std::vector<int64_t>& shape,
                                         const std::vector<int64_t>& ranks, const EnergyOptions& energy,
                                         int64_t model_params)
{
    const int64_t dim = shape_dim("tensor-train", shape);
    check_sizes(vocab, dim);
    check_tt_shape_and_ranks(dim, shape, ranks);
    EmbeddingAccounting a = accounting_of("tt", vocab, dim);
    a.shape = shape;
    a.ranks = ranks;
    // Core k holds r_{k-1} I_k r_k values (ranks r_0..r_N as given, r_0 = r_N = 1).
    auto core = [&](size_t k) {
        const std::string i = std::to_string(k + 1);
        return Count(ranks[k], "r_" + std::to_string(k)) * Count(shape[k], "I_" + i) *
               Count(ranks[k + 1], "r_" + i);
    };
    Count per_token(0);
    for (size_t k = 0; k < shape.size(); ++k)
        per_token = per_token + core(k);
    per_token = per_token.renamed("params_per_token");
    const Count V(vocab, "vocab"), d(dim, "dim");
    a.params_per_token = per_token.value();
    a.eta_ttd = static_cast<double>(dim) / static_cast<double>(a.params_per_token) - 1.0;
    fill_common(a, V * per_token, model_params);
    // Reconstructing a row contracts the cores left to right: sum over k of
    // 2 * (prod_{j<k} I_j) * r_{k-1} * I_k * r_k; the head needs all V rows.
    Count per_row(0), left(1);
    for (size_t k = 0; k < shape.size(); ++k) {
        if (k > 0)
            per_row = per_row + 2 * left * core(k);
        left = (left * Count(shape[k], "I_" + std::to_string(k + 1))).renamed("prod I_j");
    }
    per_row = per_row.renamed("flops_lookup");
    a.flops_lookup = per_row.value();
    a.flops_head = (V * (per_row + 2 * d)).value();
    a.flops_per_token = a.flops_head;
    a.mean_params_per_token = static_cast<double>(a.params_per_token);
    a.energy_size = tt_energy_size(shape, ranks.data(), ranks.size());
    a.energy = tt_energy(vocab, dim, a.energy_size, energy);
    a.energy_size_stored = static_cast<double>(a.params_per_token);
    a.energy_stored = tt_energy(vocab, dim, a.energy_size_stored, energy);
    a.svd_equal_size_rank =
        std::clamp<int64_t>(static_cast<int64_t>(std::llround(static_cast<double>(a.params_after) /
                                                              static_cast<double>(vocab + dim))),
                            1, dim);
    a.svd_equal_size_energy = svd_energy(vocab, dim, a.svd_equal_size_rank, energy);
    a.energy_options = energy;
    return a;
}

EmbeddingAccounting account_tensor_train_per_token(int64_t vocab, const std::vector<int64_t>& shape,
                                                   const std::vector<int32_t>& token_ranks,
                                                   const EnergyOptions& energy, int64_t model_params)
{
    const int64_t N = static_cast<int64_t>(shape.size());
    if (N < 2 || vocab < 1 ||
        static_cast<int64_t>(token_ranks.size()) !=
            (Count(vocab, "vocab") * Count(N - 1, "inner ranks")).value())
        throw InputError("per-token TT ranks: " + std::to_string(token_ranks.size()) + " values for V = " +
                         std::to_string(vocab) + " tokens of " + std::to_string(N - 1) + " inner ranks");
    // The largest rank at each position: the cores' padded sizes, checked against the caps.
    std::vector<int64_t> largest(static_cast<size_t>(N + 1), 1);
    for (int64_t t = 0; t < vocab; ++t)
        for (int64_t k = 1; k < N; ++k)
            largest[k] = std::max<int64_t>(largest[k], token_ranks[static_cast<size_t>(t * (N - 1) + k - 1)]);
    EmbeddingAccounting a = account_tensor_train(vocab, shape, largest, energy, model_params);
    // Now per token: its own values, lookup FLOPs (as account_tensor_train counts a row)
    // and energy size, summed over the vocabulary.
    int64_t params = 0, flops = 0;
    double size = 0;
    std::vector<int64_t> r(static_cast<size_t>(N + 1), 1);
    a.mean_ranks.assign(static_cast<size_t>(N - 1), 0.0);
    const auto sum_i = static_cast<double>(std::accumulate(shape.begin(), shape.end(), int64_t{0}));
    for (int64_t t = 0; t < vocab; ++t) {
        for (int64_t k = 1; k < N; ++k) {
            r[k] = token_ranks[static_cast<size_t>(t * (N - 1) + k - 1)];
            if (r[k] < 1)
                throw InputError("per-token TT ranks: token " + std::to_string(t) + " has r_" +
                                 std::to_string(k) + " = " + std::to_string(r[k]));
            a.mean_ranks[static_cast<size_t>(k - 1)] += static_cast<double>(r[k]);
        }
        int64_t left = 1, r_max = 1;
        for (int64_t k = 0; k < N; ++k) {
            params += r[k] * shape[k] * r[k + 1];
            if (k > 0)
                flops += 2 * left * r[k] * shape[k] * r[k + 1];
            left *= shape[k];
            r_max = std::max(r_max, r[k + 1]);
        }
        size += static_cast<double>(r_max) * static_cast<double>(r_max) * sum_i;
    }
    const double V = static_cast<double>(vocab);
    for (auto& m : a.mean_ranks)
        m /= V;
    a.per_token_ranks = true;
    // The sums above are at most the counts at the largest ranks, which
    // account_tensor_train checked; what is added to them is checked here.
    const Count rank_values = Count(vocab, "vocab") * Count(N - 1, "inner ranks"); // int32 each
    const Count after = Count(params, "core values") + rank_values; // the rank values are stored too
    a.index_values = rank_values.value();
    a.index_bytes = (4 * rank_values).value();
    a.mean_params_per_token = static_cast<double>(after.value()) / V;
    a.params_per_token = std::llround(a.mean_params_per_token);
    a.eta_ttd = static_cast<double>(a.dim) / a.mean_params_per_token - 1.0;
    fill_common(a, after, model_params);
    a.flops_lookup = std::llround(static_cast<double>(flops) / V);
    a.flops_head = (Count(flops, "lookup flops") + 2 * Count(vocab, "vocab") * Count(a.dim, "dim")).value();
    a.flops_per_token = a.flops_head;
    a.energy_size = size / V;
    a.energy = tt_energy(vocab, a.dim, a.energy_size, energy);
    a.energy_size_stored = static_cast<double>(params) / V; // the core values, ranks aside
    a.energy_stored = tt_energy(vocab, a.dim, a.energy_size_stored, energy);
    a.svd_equal_size_rank =
        std::clamp<int64_t>(static_cast<int64_t>(std::llround(static_cast<double>(a.params_after) /
                                                              static_cast<double>(vocab + a.dim))),
                            1, a.dim);
    a.svd_equal_size_energy = svd_energy(vocab, a.dim, a.svd_equal_size_rank, energy);
    return a;
}

void check_tucker_shape_and_ranks(int64_t dim, const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& ranks)
{
    if (shape.empty())
        throw InputError("tucker needs a shape I_1,..,I_N with product d = " + std::to_string(dim) +
                         " (as tt's --shape)");
    check_shape_product("tucker", dim, shape);
    if (ranks.size() != shape.size())
        throw InputError("tucker ranks: shape " + join(shape, "x") + " has " + std::to_string(shape.size()) +
                         " modes, so it needs " + std::to_string(shape.size()) + " ranks r_1..r_N, got " +
                         std::to_string(ranks.size()) + (ranks.empty() ? "" : " (" + join(ranks, ",") + ")") +
                         " (unlike tt, no boundary 1s)");
    for (size_t k = 0; k < shape.size(); ++k)
        if (ranks[k] < 1 || ranks[k] > shape[k])
            throw InputError("tucker rank r_" + std::to_string(k + 1) + " = " + std::to_string(ranks[k]) +
                             " is outside [1, " + std::to_string(shape[k]) + "] (I_" + std::to_string(k + 1) +
                             " of shape " + join(shape, "x") + ")");
}

EmbeddingAccounting account_tucker(int64_t vocab, const std::vector<int64_t>& shape,
                                   const std::vector<int64_t>& ranks, int64_t model_params)
{
    const int64_t dim = shape_dim("tucker", shape);
    check_sizes(vocab, dim);
    check_tucker_shape_and_ranks(dim, shape, ranks);
    EmbeddingAccounting a = accounting_of("tucker", vocab, dim);
    a.tucker_shape = shape;
    a.tucker_ranks = ranks;
    const size_t N = shape.size();
    // Each r_k <= I_k (checked above), so I_k and r_k fit any product of the shape's.
    std::vector<Count> I, r;
    for (size_t k = 0; k < N; ++k) {
        I.emplace_back(shape[k], "I_" + std::to_string(k + 1));
        r.emplace_back(ranks[k], "r_" + std::to_string(k + 1));
    }
    Count core(1), factors(0);
    for (size_t k = 0; k < N; ++k) {
        core = core * r[k];
        factors = factors + I[k] * r[k];
    }
    core = core.renamed("core_values_per_token");
    factors = factors.renamed("factor_values");
    a.core_values_per_token = core.value();
    a.factor_values = factors.value();
    // Stored: every token's core G_v (prod r_k values) and the shared factors U_k.
    const Count V(vocab, "vocab");
    fill_common(a, V * core + factors, model_params);
    // Lookup: G_v x_1 U_1 .. x_N U_N, modes in order; before mode k the tensor is
    // I_1..I_{k-1} x r_k..r_N, so mode k costs 2 (prod_{j<k} I_j) I_k r_k (prod_{j>k} r_j).
    // Tied head: z = h x_1 U_1^T .. x_N U_N^T, mode k costing 2 (prod_{j<k} r_j) r_k I_k
    // (prod_{j>k} I_j), then <z, G_v> for every token: 2 V prod r_k. Exactly hidden E^T of
    // the reconstructed rows, without rebuilding them (cheaper than V lookups + 2 V d).
    Count lookup(0), projection(0);
    for (size_t k = 0; k < N; ++k) {
        Count before_i(1), after_r(1), before_r(1), after_i(1);
        for (size_t j = 0; j < k; ++j) {
            before_i = before_i * I[j];
            before_r = before_r * r[j];
        }
        for (size_t j = k + 1; j < N; ++j) {
            after_r = after_r * r[j];
            after_i = after_i * I[j];
        }
        lookup = lookup + 2 * before_i * I[k] * r[k] * after_r;
        projection = projection + 2 * before_r * r[k] * I[k] * after_i;
    }
    a.flops_lookup = lookup.value();
    a.flops_head = (projection.renamed("projection flops") + 2 * V * core).value();
    a.flops_per_token = a.flops_head;
    return a;
}

EmbeddingAccounting account_aq(int64_t vocab, int64_t dim, int64_t codebooks, int64_t codewords,
                               int64_t model_params)
{
    check_sizes(vocab, dim);
    if (codebooks < 1 || codebooks > 1024 || codewords < 2 || codewords > 256 ||
        (codewords & (codewords - 1)) != 0)
        throw InputError("aq needs 1..1024 codebooks of a power of two in 2..256 codewords, got M = " +
                         std::to_string(codebooks) + ", K = " + std::to_string(codewords));
    EmbeddingAccounting a = accounting_of("aq", vocab, dim);
    a.aq_codebooks = codebooks;
    a.aq_codewords = codewords;
    int64_t bits = 0;
    while ((int64_t{1} << bits) < codewords)
        ++bits;
    a.aq_code_bits_per_token = codebooks * bits; // M <= 1024, log2 K <= 8
    const Count V(vocab, "vocab"), d(dim, "dim"), M(codebooks, "codebooks"), K(codewords, "codewords");
    const Count codes = V * M;
    a.index_values = codes.value();
    a.index_bytes = (V * Count((a.aq_code_bits_per_token + 7) / 8, "code bytes per token")).value();
    fill_common(a, M * K * d + codes, model_params);
    a.flops_lookup = (M * d).value();
    a.flops_head = (V * M * d + 2 * V * d).value();
    a.flops_per_token = a.flops_head;
    return a;
}

std::vector<std::vector<int64_t>> tt_shapes(int64_t dim, int n)
{
    std::vector<std::vector<int64_t>> out;
    std::vector<int64_t> current;
    std::function<void(int64_t, int)> recurse = [&](int64_t rest, int left) {
        if (left == 1) {
            if (rest >= 2) {
                current.push_back(rest);
                out.push_back(current);
                current.pop_back();
            }
            return;
        }
        for (int64_t f = 2; f <= rest / 2; ++f)
            if (rest % f == 0) {
                current.push_back(f);
                recurse(rest / f, left - 1);
                current.pop_back();
            }
    };
    if (dim >= 2 && n >= 1)
        recurse(dim, n);
    return out;
}

std::vector<int64_t> balanced_tt_shape(int64_t d, const std::string& label)
{
    auto shapes = tt_shapes(d, 3);
    if (shapes.empty())
        throw InputError(label + ": d = " + std::to_string(d) + " has no 3-factor shape for tt");
    auto spread = [](const std::vector<int64_t>& s) {
        const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
        return std::pair(*hi, -*lo);
    };
    return *std::min_element(shapes.begin(), shapes.end(),
                             [&](const auto& a, const auto& b) { return spread(a) < spread(b); });
}

} // namespace embedlab
