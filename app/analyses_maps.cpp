// Fourier token map and LLE neighbour graph for the workbench (analyses.hpp);
// the same computations as embedlab-cli fourier-map and neighbours.
#include <algorithm>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "analyses.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/model.hpp"
#include "embedlab/partial_sparse.hpp"

namespace embedlab::app {

namespace {

std::vector<double> values_of(const torch::Tensor& m)
{
    const auto t = m.to(torch::kDouble).contiguous();
    return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// Cosine of rows i and i+1; a zero row against a zero row counts 1.
std::vector<double> neighbour_cosines(const torch::Tensor& m)
{
    if (m.size(0) < 2)
        return {};
    const auto x = m.to(torch::kDouble);
    const auto a = x.narrow(0, 0, x.size(0) - 1), b = x.narrow(0, 1, x.size(0) - 1);
    const auto na = a.norm(2, 1), nb = b.norm(2, 1);
    auto c = (a * b).sum(1) / (na * nb);
    c = torch::where((na == 0) | (nb == 0), torch::where(na == nb, 1.0, 0.0).to(torch::kDouble), c);
    return values_of(c);
}

std::shared_ptr<const FourierTokenEmbedding> fourier_of(const LanguageModel& model)
{
    return std::dynamic_pointer_cast<const FourierTokenEmbedding>(model.shared_token_embedding());
}

std::optional<torch::Tensor> dense_rows(const LanguageModel& model, int64_t a, int64_t b)
{
    const auto* dense = dense_table(&model.token_embedding());
    if (!dense)
        return std::nullopt;
    return dense->narrow(0, a, b - a).clone();
}

} // namespace

FourierMapResult fourier_map(const std::string& model, const std::string& fourier_dir, int64_t first,
                             int64_t end, const ProgressFn& progress)
{
    auto lm = load_model(model, {.need_tokenizer = false});
    const int64_t V = lm.model->config().vocab_size, d = lm.model->config().hidden_size;
    if (first < 0 || end > V || first >= end)
        throw InputError(model + ": token ids " + std::to_string(first) + ".." + std::to_string(end) +
                         " must satisfy 0 <= first < end <= V = " + std::to_string(V));
    report_progress(progress, 1, 4);
    FourierMapResult r{.vocab = V, .dim = d, .first = first, .end = end};
    auto fourier = fourier_of(*lm.model);
    auto original = dense_rows(*lm.model, first, end);
    if (fourier) { // a fourier directory: the original rows come from its recorded source
        const auto manifest = nlohmann::json::parse(lm.files.embedlab_manifest, nullptr, false);
        const nlohmann::json::json_pointer at("/source/path");
        const std::string source = manifest.is_object() && manifest.contains(at) && manifest[at].is_string()
                                       ? manifest[at].get<std::string>()
                                       : std::string();
        if (!source.empty() && std::filesystem::exists(source))
            original = dense_rows(*load_model(source, {.need_tokenizer = false}).model, first, end);
        else
            r.note = "the source model of this fourier directory was not found";
    } else if (!fourier_dir.empty()) {
        auto f = load_model(fourier_dir, {.need_tokenizer = false});
        fourier = fourier_of(*f.model);
        if (!fourier || fourier->vocab_size() != V || fourier->dim() != d)
            throw InputError(fourier_dir + ": not a fourier directory with V = " + std::to_string(V) +
                             ", d = " + std::to_string(d));
    } else {
        r.note = "no fitted fourier model: T and the original rows only";
    }
    report_progress(progress, 2, 4);
    c10::InferenceMode guard;
    const auto features = fourier_features(torch::arange(first, end, torch::kLong), V, d);
    auto add = [&r](const std::string& name, const torch::Tensor& m) {
        r.matrices.push_back({name, values_of(m), neighbour_cosines(m)});
    };
    add("T", features);
    if (fourier) {
        add("MLP(T)", fourier->mlp(features));
        add("E", fourier->rows_from_features(features));
    }
    if (original)
        add("original", *original);
    try {
        const auto tokenizer = load_model_tokenizer(lm.files, {});
        for (int64_t p = first; p < end; ++p)
            r.tokens.push_back(p < tokenizer->vocab_size() ? tokenizer->token_text(static_cast<int32_t>(p))
                                                           : std::string());
    } catch (const InputError&) {
        // no tokenizer: the map has no token texts
    }
    report_progress(progress, 4, 4);
    return r;
}

NeighbourGraphResult neighbour_graph(const std::string& model, const std::string& text, double keep_ratio,
                                     int64_t k, const ProgressFn& progress)
{
    auto lm = load_model(model);
    const auto* dense = dense_table(&lm.model->token_embedding());
    if (!dense)
        throw InputError(model + ": the token embedding is already compressed; open the original model");
    // Only the table is read from here on: holding it lets the rest of the model go,
    // so the graph's work on a 150k-row table (PCA, the LLE fit) never sits beside
    // every layer's weights. A float32 file's table stays a view of its mapping,
    // whose other pages the loader's scan already dropped.
    const torch::Tensor table = *dense;
    lm.model.reset();
    const int64_t V = table.size(0);
    const auto specials = special_token_ids(*lm.tokenizer); // as compress's frequency split
    const auto ids = lm.tokenizer->encode(read_text_file(text));
    FrequencySplit split;
    try {
        split = split_by_frequency(ids, V, keep_ratio, specials);
    } catch (const InputError& e) {
        throw InputError(text + ": " + e.what());
    }
    report_progress(progress, 1, 10);
    NeighbourGraphResult r{.vocab = V, .k = k, .keep_ratio = keep_ratio};
    const auto pca = fit_low_rank(table, LowRankKind::PCA, 2); // Z = (E - mu) U_2: the 2-D projection
    r.x = values_of(pca.Z.select(1, 0));
    r.y = values_of(pca.Z.select(1, 1));
    r.common = split.common;
    r.rare = split.rare;
    if (!split.rare.empty()) {
        auto fit = fit_partial_sparse(
            table, split, {.kind = PartialSparseKind::LLE, .k = k}, [&](int64_t done, int64_t total) {
                return !progress || progress(1 + 8 * done / std::max<int64_t>(total, 1), 10);
            });
        const auto neighbour_ids = fit.neighbour_ids.contiguous();
        r.neighbours.assign(neighbour_ids.data_ptr<int64_t>(),
                            neighbour_ids.data_ptr<int64_t>() + neighbour_ids.numel());
        r.weights = values_of(fit.weights);
        const PartialSparseTokenEmbedding lle(std::move(fit));
        const auto rare_ids = torch::tensor(split.rare, torch::kLong);
        // cos(rare row, its rebuilt row) and cos(rare row, each neighbour's row), for the
        // histogram and the view's neighbour list: a chunk of rare rows at a time, so no
        // float64 copy of every rare row (2 GB at Qwen2.5's 151,936 rows) and no
        // [rare, k, d] copy of the table is ever made.
        const int64_t R = neighbour_ids.size(0), K = neighbour_ids.size(1);
        for (int64_t s = 0; s < R; s += 2048) {
            const int64_t e = std::min(R, s + 2048);
            const auto rows = table.index_select(0, rare_ids.slice(0, s, e)).to(torch::kDouble);
            const auto rebuilt = lle.rare_rows(s, e - s).to(torch::kDouble);
            const auto own = values_of(torch::cosine_similarity(rebuilt, rows, 1, 1e-12));
            r.cosine.insert(r.cosine.end(), own.begin(), own.end());
            const auto near = table.index_select(0, neighbour_ids.slice(0, s, e).reshape({-1}))
                                  .to(torch::kDouble)
                                  .view({e - s, K, -1});
            const auto c =
                values_of(torch::cosine_similarity(rows.unsqueeze(1), near, 2, 1e-12).reshape({-1}));
            r.neighbour_cosine.insert(r.neighbour_cosine.end(), c.begin(), c.end());
        }
        constexpr int kBins = 40;
        r.hist_lo = std::min(0.0, *std::min_element(r.cosine.begin(), r.cosine.end()));
        r.histogram.assign(kBins, 0.0);
        for (double c : r.cosine)
            r.histogram[std::clamp(static_cast<int>((c - r.hist_lo) / (1.0 - r.hist_lo) * kBins), 0,
                                   kBins - 1)] += 1;
    }
    for (int64_t id = 0; id < V; ++id)
        r.tokens.push_back(id < lm.tokenizer->vocab_size()
                               ? lm.tokenizer->token_text(static_cast<int32_t>(id))
                               : std::string());
    report_progress(progress, 10, 10);
    return r;
}

} // namespace embedlab::app
