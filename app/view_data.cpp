#include "view_data.hpp"

#include <algorithm>

#include "embedlab/method_registry.hpp"

namespace embedlab::app {

namespace {

template <class T> QVector<double> doubles(const std::vector<T>& v)
{
    return QVector<double>(v.begin(), v.end());
}

template <class T> QVector<int> ints(const std::vector<T>& v)
{
    QVector<int> out;
    out.reserve(static_cast<qsizetype>(v.size()));
    for (auto x : v)
        out.push_back(static_cast<int>(x));
    return out;
}

QString joined(const std::vector<int64_t>& v, const char* sep)
{
    QStringList parts;
    for (auto x : v)
        parts << QString::number(x);
    return parts.join(sep);
}

QStringList texts(const std::vector<std::string>& v)
{
    QStringList out;
    out.reserve(static_cast<qsizetype>(v.size()));
    for (const auto& s : v)
        out << QString::fromStdString(s);
    return out;
}

} // namespace

views::SpectrumData spectrum_view_data(const SpectrumResult& r, const QString& label)
{
    views::SpectrumData d;
    d.label = label;
    d.eigenvalues = doubles(r.eigenvalues);
    d.explained = doubles(r.explained);
    d.params_at_rank = doubles(r.params_at_rank);
    d.flops_at_rank = doubles(r.flops_at_rank);
    d.original_params = r.original_params;
    return d;
}

views::SpectrumOverlay spectrum_overlay(const SpectrumResult& r, const QString& name)
{
    return {name, doubles(r.eigenvalues), {}};
}

QVector<views::SpectrumOverlay> value_head_overlays(const AllocationResult& r)
{
    QVector<views::SpectrumOverlay> out;
    if (r.kv_heads <= 0)
        return out;
    for (size_t i = 0; i < r.head_spectra.size(); ++i) {
        const auto layer = static_cast<int64_t>(i) / r.kv_heads, head = static_cast<int64_t>(i) % r.kv_heads;
        out.push_back({QString("layer %1 head %2").arg(layer).arg(head), doubles(r.head_spectra[i]),
                       QString("layer %1").arg(layer)});
    }
    return out;
}

views::RankAllocationData allocation_view_data(const AllocationResult& r, const QString& label)
{
    views::RankAllocationData d;
    d.label = label;
    d.d_head = static_cast<int>(r.d_head);
    const double top = r.scores.empty() ? 0 : *std::max_element(r.scores.begin(), r.scores.end());
    for (double t : r.scores)
        d.normalised.push_back(top > 0 ? t / top : 0.0);
    for (const auto& a : r.allocations)
        d.allocations.push_back({a.remaining, doubles(a.w), ints(a.ranks)});
    return d;
}

views::FourierMapData fourier_view_data(const FourierMapResult& r, const QString& label)
{
    views::FourierMapData d;
    d.label = label;
    d.first = static_cast<int>(r.first);
    d.count = static_cast<int>(r.end - r.first);
    d.dim = static_cast<int>(r.dim);
    for (const auto& m : r.matrices)
        d.matrices.push_back({QString::fromStdString(m.name), doubles(m.values), doubles(m.neighbour)});
    d.tokens = texts(r.tokens);
    d.note = QString::fromStdString(r.note);
    return d;
}

views::TensorTrainData tt_view_data(const TensorTrainResult& r, const QString& label)
{
    views::TensorTrainData d;
    d.label = label;
    d.vocab = static_cast<int>(r.vocab);
    d.dim = static_cast<int>(r.dim);
    d.fittedRows = static_cast<int>(r.fitted_rows);
    for (const auto& c : r.candidates) {
        // Each token keeps its own ranks: the cores' sizes, and the mean over tokens.
        QString ranks = joined(c.ranks, ",");
        if (!c.mean_ranks.empty()) {
            ranks += " (per token, mean";
            for (double m : c.mean_ranks)
                ranks += " " + QString::number(m, 'f', 2);
            ranks += ")";
        }
        d.candidates.push_back({joined(c.shape, "x"), ranks, c.eps, c.ratio, c.relative_error, c.mean_cosine,
                                static_cast<int>(c.svd_rank), c.energy_original, c.energy_tt, c.energy_svd,
                                c.accesses_original, c.accesses_tt, c.accesses_svd, c.operations_original,
                                c.operations_tt, c.operations_svd});
    }
    d.chosen = static_cast<int>(r.chosen);
    return d;
}

views::NeighbourGraphData lle_view_data(const NeighbourGraphResult& r, const QString& label)
{
    views::NeighbourGraphData d;
    d.label = label;
    d.x = doubles(r.x);
    d.y = doubles(r.y);
    d.common = ints(r.common);
    d.rare = ints(r.rare);
    d.k = static_cast<int>(r.k);
    d.neighbours = ints(r.neighbours);
    d.weights = doubles(r.weights);
    d.neighbour_cosine = doubles(r.neighbour_cosine);
    d.cosine = doubles(r.cosine);
    d.histogram = doubles(r.histogram);
    d.hist_lo = r.hist_lo;
    d.tokens = texts(r.tokens);
    d.frequency = doubles(r.frequency);
    return d;
}

views::NeighbourMapLayout tsne_view_layout(const TsneResult& r)
{
    const auto& o = r.options;
    views::NeighbourMapLayout l{"t-SNE", doubles(r.x), doubles(r.y), ints(r.sample), {}};
    l.parameters =
        QString("t-SNE (Barnes-Hut, θ %1) over %2 sampled tokens on their first %3 principal "
                "components: perplexity %4, %5 iterations (early exaggeration %6 for %7), seed %8, "
                "learning rate %9, final KL %10. The other tokens sit at the mean of their %11 nearest "
                "sampled tokens.")
            .arg(o.theta)
            .arg(r.sample.size())
            .arg(o.pca_dims)
            .arg(o.perplexity)
            .arg(o.iterations)
            .arg(o.exaggeration)
            .arg(o.exaggeration_iterations)
            .arg(o.seed)
            .arg(o.learning_rate, 0, 'f', 1)
            .arg(r.kl, 0, 'f', 3)
            .arg(o.placement_neighbours);
    return l;
}

QStringList baseline_methods()
{
    QStringList out;
    for (const auto& m : method_registry())
        if (m.bytes_baseline)
            out << QString::fromStdString(m.name);
    return out;
}

} // namespace embedlab::app
