// Fourier token map and LLE neighbour graph for the workbench (analyses.hpp): the
// token map is the engine's (fourier_map.hpp), as embedlab-cli fourier-map prints it.
#include <algorithm>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "analyses.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/fourier_map.hpp"
#include "embedlab/layout_2d.hpp"
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

} // namespace

FourierMapResult fourier_map(const std::string& model, const std::string& fourier_dir, int64_t first,
                             int64_t end, const ProgressFn& progress)
{
    auto lm = load_model(model, {.need_tokenizer = false});
    try {
        lm.tokenizer = load_model_tokenizer(lm.files, {});
    } catch (const InputError&) {
        // no tokenizer: the map has no token texts
    }
    report_progress(progress, 1, 3);
    const auto map = fourier_token_map(lm, model, fourier_dir, first, end);
    report_progress(progress, 2, 3);
    FourierMapResult r{.vocab = map.vocab, .dim = map.dim, .first = first, .end = end, .tokens = map.tokens};
    auto add = [&r](const std::string& name, const torch::Tensor& m) {
        r.matrices.push_back({name, values_of(m), neighbour_cosines(m)});
    };
    add("T", map.features);
    if (map.fourier) {
        add("MLP(T)", map.mlp);
        add("E", map.embedding);
    } else {
        r.note = "no fitted fourier model: T and the original rows only";
    }
    if (map.original.defined())
        add("original", map.original);
    else
        r.note = map.original_note;
    report_progress(progress, 3, 3);
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
    r.frequency.assign(split.counts.begin(), split.counts.end());
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

TsneResult neighbour_layout(const std::string& model, const TsneOptions& options, const ProgressFn& progress)
{
    auto lm = load_model(model, {.need_tokenizer = false});
    const auto* dense = dense_table(&lm.model->token_embedding());
    if (!dense)
        throw InputError(model + ": the token embedding is already compressed; open the original model");
    const torch::Tensor table = dense->to(torch::kFloat32).contiguous(); // a float32 file's: its mapping
    lm.model.reset();
    return tsne_layout(table.data_ptr<float>(), table.size(0), table.size(1), options, progress);
}

} // namespace embedlab::app
